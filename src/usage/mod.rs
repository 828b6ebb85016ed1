//! Client usage: registrations, usage metrics and the configuration each instance holds.
//!
//! Each replica adds reports up in memory (`UsageRecorder`) and writes the sums to the store
//! every flush interval and on graceful shutdown (`flush::run`), so the store's work grows
//! with toggles × applications per flush, not with the number of reports. The admin views
//! (`views`) read the store, so they show what every replica has flushed.

pub mod flush;
pub mod hourly;
pub mod polls;
pub mod views;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tracing::Instrument;

use crate::domain::usage::{MetricsReport, Registration};
use crate::store::usage::{
    minute_of, AppActivity, FastMap, InstanceActivity, PollRecord, RegistrationRecord, UsageBatch,
    UsageStore,
};
use crate::store::StoreError;
use crate::telemetry::metrics::Metrics;
use polls::PollLog;

/// Now, in epoch milliseconds.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Epoch milliseconds as of the last tick of `flush::run_clock` (0 before the first): the hot
/// path reads the time from here rather than asking the system clock per request.
static COARSE_NOW_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Now to within `flush::CLOCK_TICK`, cheaply.
pub fn coarse_now_ms() -> i64 {
    match COARSE_NOW_MS.load(Ordering::Relaxed) {
        0 => now_ms(),
        now => now,
    }
}

/// Advances the coarse clock (see `flush::run_clock`).
fn tick_coarse_clock() {
    COARSE_NOW_MS.store(now_ms(), Ordering::Relaxed);
}

/// Instances (polling or reporting) held between two flushes beyond which the flusher is asked
/// to flush early, so memory stays bounded however large the fleet (about 0.5 KiB each).
pub const FLUSH_EARLY_INSTANCES: usize = 50_000;

/// Counter fields and seen toggles new since the last flush beyond which the flusher is asked
/// to flush early. Real fleets stay far below (they are bounded by toggles × applications);
/// clients that make up names every report do not grow memory without bound (~100 MiB).
pub const FLUSH_EARLY_COUNTERS: usize = 500_000;

/// Entries (toggle counters or instances) per atomic part of a flush: bounds the memory and
/// the Redis time one write takes.
const FLUSH_PART_ENTRIES: usize = 2_000;

/// Shards of the aggregate.
const PENDING_SHARDS: usize = 8;

/// How long a part may stay in doubt: within the flush marker's two hours (the marker is set
/// after the part was first written, so it outlives this).
const IN_DOUBT_LIMIT: std::time::Duration = std::time::Duration::from_secs(110 * 60);

/// Counts older than this many minutes are useless to the views; a batch kept through a long
/// store outage drops them.
const KEEP_MINUTES: u64 = 61;

/// The replica's usage aggregate and the store it is flushed to.
pub struct UsageRecorder {
    store: UsageStore,
    /// The aggregate, in shards by application, so concurrent reports of different
    /// applications do not wait for each other.
    pending: [Mutex<UsageBatch>; PENDING_SHARDS],
    shard_hasher: foldhash::fast::RandomState,
    polls: PollLog,
    metrics: Arc<Metrics>,
    /// Serialises flushes, so a batch put back after a failure is not flushed twice.
    flushing: tokio::sync::Mutex<()>,
    /// The flush part whose write failed unconfirmed, with its id and when it was written,
    /// until it is settled.
    in_doubt: Mutex<Option<(u64, Instant, UsageBatch)>>,
    /// When the configuration gauges were last computed.
    gauges_refreshed: Mutex<Option<Instant>>,
    /// Instances new to the aggregate since the last flush (reports, registrations).
    new_instances: AtomicUsize,
    /// Counter fields and seen toggles new to the aggregate since the last flush.
    new_counters: AtomicUsize,
    /// Wakes the flusher before its interval when much is pending.
    flush_early: tokio::sync::Notify,
    /// Whether an early flush was asked for since the aggregate was last taken.
    early_requested: std::sync::atomic::AtomicBool,
    /// Whether a reported name is a toggle (active or archived): only toggles are counted
    /// per hour. Unset (every name counted), until the replica sets it.
    is_toggle: std::sync::OnceLock<IsToggle>,
}

/// Tells a toggle's name from a made-up one (the replica's configuration answers).
pub type IsToggle = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Locks a mutex; a panic elsewhere while it was held leaves plain data worth keeping.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The value under `key`, created with `make` if missing (only then is the key copied), and
/// whether it was created.
fn slot<'a, V>(
    map: &'a mut FastMap<String, V>,
    key: &str,
    make: impl FnOnce() -> V,
) -> (&'a mut V, bool) {
    let created = !map.contains_key(key);
    if created {
        map.insert(key.to_string(), make());
    }
    (map.get_mut(key).expect("present: inserted above"), created)
}

/// The app's activity record, created on first use.
fn app_entry<'a>(batch: &'a mut UsageBatch, app: &str) -> &'a mut AppActivity {
    slot(&mut batch.apps, app, AppActivity::default).0
}

/// Notes a contact of `instance` at `at`; `added` counts it when it is new to the batch.
fn touch<'a>(
    app: &'a mut AppActivity,
    instance: &str,
    at: i64,
    client_ip: Option<&str>,
    added: Option<&AtomicUsize>,
) -> &'a mut InstanceActivity {
    app.last_seen = app.last_seen.max(at);
    let (entry, created) = slot(&mut app.instances, instance, || InstanceActivity {
        first_seen: at,
        ..InstanceActivity::default()
    });
    if let (true, Some(added)) = (created, added) {
        added.fetch_add(1, Ordering::Relaxed);
    }
    entry.first_seen = entry.first_seen.min(at);
    entry.last_seen = entry.last_seen.max(at);
    if let Some(ip) = client_ip {
        if entry.client_ip.as_deref() != Some(ip) {
            entry.client_ip = Some(ip.to_string());
        }
    }
    entry
}

impl UsageRecorder {
    /// A recorder flushing to `store`.
    pub fn new(store: UsageStore, metrics: Arc<Metrics>) -> Self {
        Self {
            store,
            pending: std::array::from_fn(|_| Mutex::new(UsageBatch::default())),
            shard_hasher: foldhash::fast::RandomState::default(),
            polls: PollLog::new(),
            metrics,
            flushing: tokio::sync::Mutex::new(()),
            in_doubt: Mutex::new(None),
            gauges_refreshed: Mutex::new(None),
            new_instances: AtomicUsize::new(0),
            new_counters: AtomicUsize::new(0),
            flush_early: tokio::sync::Notify::new(),
            early_requested: std::sync::atomic::AtomicBool::new(false),
            is_toggle: std::sync::OnceLock::new(),
        }
    }

    /// Counts per hour only the names `is_toggle` accepts (set once; later calls are ignored).
    pub fn count_hours_only_for(&self, is_toggle: IsToggle) {
        let _ = self.is_toggle.set(is_toggle);
    }

    /// Whether the caller should recompute the configuration gauges now (at most once per
    /// `ttl`); claims the refresh when it says yes.
    pub fn claim_gauge_refresh(&self, ttl: std::time::Duration) -> bool {
        let mut last = lock(&self.gauges_refreshed);
        if last.is_some_and(|at| at.elapsed() < ttl) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// The store the views read.
    pub fn store(&self) -> &UsageStore {
        &self.store
    }

    /// Adds a registration.
    pub fn record_registration(&self, registration: Registration, client_ip: Option<&str>) {
        let at = coarse_now_ms();
        let mut batch = self.shard(&registration.app_name);
        let app = app_entry(&mut batch, &registration.app_name);
        app.strategies = Some(registration.strategies);
        let instance = touch(
            app,
            &registration.instance_id,
            at,
            client_ip,
            Some(&self.new_instances),
        );
        instance.registration = Some(RegistrationRecord {
            sdk_version: registration.sdk_version,
            started: registration.started,
            interval: registration.interval,
            registered_at: at,
        });
        drop(batch);
        self.note_new_entries();
    }

    /// Adds a metrics report, counted in the minute it arrived (the service's clock, not the
    /// client's, so skewed clients cannot write into expired or future buckets). Names are
    /// copied only the first time this replica counts them between two flushes.
    pub fn record_metrics(&self, report: MetricsReport<'_>, client_ip: Option<&str>) {
        let at = coarse_now_ms();
        let evaluations = report.evaluations();
        let app_name: &str = &report.app_name;
        let mut batch = self.shard(app_name);
        let minute = batch.counts.entry(minute_of(at)).or_default();
        let toggles = slot(minute, app_name, FastMap::default).0;
        let mut added = 0;
        for (name, counts) in &report.toggles {
            let (total, created) = slot(toggles, name, Default::default);
            added += usize::from(created);
            total.yes = total.yes.saturating_add(counts.yes);
            total.no = total.no.saturating_add(counts.no);
            for (variant, n) in &counts.variants {
                let (v, created) = slot(&mut total.variants, variant, || 0);
                added += usize::from(created);
                *v = v.saturating_add(*n);
            }
        }
        let app = app_entry(&mut batch, app_name);
        app.metrics_count = app.metrics_count.saturating_add(evaluations);
        touch(
            app,
            &report.instance_id,
            at,
            client_ip,
            Some(&self.new_instances),
        );
        for (name, _) in &report.toggles {
            let (seen, created) = slot(&mut app.toggles, name, || at);
            added += usize::from(created);
            *seen = at;
        }
        drop(batch);
        self.new_counters.fetch_add(added, Ordering::Relaxed);
        self.note_new_entries();
    }

    /// Records a client-features poll (the hot path: no allocation for a known instance).
    pub fn record_poll(
        &self,
        app: &str,
        instance: &str,
        query: &str,
        etag: &axum::http::HeaderValue,
        version: u64,
    ) {
        let held = self
            .polls
            .record(app, instance, query, etag, version, coarse_now_ms());
        if held == FLUSH_EARLY_INSTANCES {
            self.flush_early.notify_one();
        }
    }

    /// Resolves when so much is pending that the flusher should not wait for its interval.
    pub async fn flush_requested(&self) {
        self.flush_early.notified().await
    }

    /// Wakes the flusher once when the new entries pass the threshold (again only after the
    /// aggregate was taken, so a store outage does not turn into a busy loop).
    fn note_new_entries(&self) {
        let full = self.new_instances.load(Ordering::Relaxed) >= FLUSH_EARLY_INSTANCES
            || self.new_counters.load(Ordering::Relaxed) >= FLUSH_EARLY_COUNTERS;
        if full && !self.early_requested.swap(true, Ordering::Relaxed) {
            self.flush_early.notify_one();
        }
    }

    /// The aggregate shard of `app`, locked.
    fn shard(&self, app: &str) -> MutexGuard<'_, UsageBatch> {
        let index = self.shard_hasher.hash_one(app) as usize % PENDING_SHARDS;
        lock(&self.pending[index])
    }

    /// Takes everything aggregated since the last call.
    fn take(&self) -> UsageBatch {
        // Reset before draining: a report racing with the drain errs towards an early flush.
        self.new_counters.store(0, Ordering::Relaxed);
        self.new_instances.store(0, Ordering::Relaxed);
        self.early_requested.store(false, Ordering::Relaxed);
        let mut batch = UsageBatch::default();
        for shard in &self.pending {
            // Shards hold disjoint applications: their maps only need joining.
            let part = std::mem::take(&mut *lock(shard));
            for (minute, apps) in part.counts {
                batch.counts.entry(minute).or_default().extend(apps);
            }
            batch.apps.extend(part.apps);
        }
        self.take_instances_into(&mut batch);
        batch
    }

    /// Takes only the instances (polls, and those of reports and registrations), leaving the
    /// counters for the regular flush: what an early flush writes, since counters are bounded
    /// by toggles × applications and instances are not.
    fn take_instances(&self) -> UsageBatch {
        self.new_instances.store(0, Ordering::Relaxed);
        self.early_requested.store(false, Ordering::Relaxed);
        let mut batch = UsageBatch::default();
        for shard in &self.pending {
            for (name, app) in lock(shard).apps.iter_mut() {
                if app.instances.is_empty() {
                    continue;
                }
                batch.apps.insert(
                    name.clone(),
                    AppActivity {
                        last_seen: app.last_seen,
                        instances: std::mem::take(&mut app.instances),
                        ..AppActivity::default()
                    },
                );
            }
        }
        self.take_instances_into(&mut batch);
        batch
    }

    /// Moves the poll log into `batch`.
    fn take_instances_into(&self, batch: &mut UsageBatch) {
        let (polls, dropped) = self.polls.take();
        self.metrics.usage.polls_dropped.inc_by(dropped);
        for poll in polls {
            let Ok(etag) = poll.etag.to_str() else {
                continue;
            };
            let app = app_entry(batch, &poll.app);
            let instance = touch(app, &poll.instance, poll.at, None, None);
            if instance.poll.as_ref().is_none_or(|p| p.at <= poll.at) {
                instance.poll = Some(PollRecord {
                    etag: etag.to_string(),
                    query: poll.query.to_string(),
                    version: poll.version,
                    at: poll.at,
                });
            }
        }
    }

    /// Puts a batch that could not be written back, to be retried with the next flush.
    fn restore(&self, failed: UsageBatch) {
        let oldest = minute_of(now_ms()).saturating_sub(KEEP_MINUTES);
        for (minute, apps) in failed.counts {
            if minute < oldest {
                continue;
            }
            for (app, toggles) in apps {
                let mut batch = self.shard(&app);
                let target = batch
                    .counts
                    .entry(minute)
                    .or_default()
                    .entry(app)
                    .or_default();
                for (toggle, counts) in toggles {
                    target.entry(toggle).or_default().add(&counts);
                }
            }
        }
        for (name, failed) in failed.apps {
            let mut batch = self.shard(&name);
            let app = app_entry(&mut batch, &name);
            app.last_seen = app.last_seen.max(failed.last_seen);
            if app.strategies.is_none() {
                app.strategies = failed.strategies;
            }
            app.metrics_count = app.metrics_count.saturating_add(failed.metrics_count);
            for (toggle, at) in failed.toggles {
                let slot = app.toggles.entry(toggle).or_insert(at);
                *slot = (*slot).max(at);
            }
            for (id, old) in failed.instances {
                let entry = touch(app, &id, old.first_seen, None, None);
                entry.first_seen = entry.first_seen.min(old.first_seen);
                entry.last_seen = entry.last_seen.max(old.last_seen);
                if entry.client_ip.is_none() {
                    entry.client_ip = old.client_ip;
                }
                if entry.registration.is_none() {
                    entry.registration = old.registration;
                }
                if entry.poll.is_none() {
                    entry.poll = old.poll;
                }
            }
        }
    }

    /// Writes what was aggregated since the last flush, in parts of bounded size, each applied
    /// atomically and at most once. The part whose write fails is held "in doubt" and the
    /// parts after it go back into the aggregate; the next flush first settles the part in
    /// doubt (merging it back if it was not applied, dropping it if it was), so a failure
    /// neither loses nor double-counts anything.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.flush_with(Self::take).await
    }

    /// Writes only the instances aggregated since the last flush (see `take_instances`).
    pub async fn flush_instances(&self) -> Result<(), StoreError> {
        self.flush_with(Self::take_instances).await
    }

    /// Whether so many counter fields are pending that the early flush must write them too.
    pub fn counters_pending_over_limit(&self) -> bool {
        self.new_counters.load(Ordering::Relaxed) >= FLUSH_EARLY_COUNTERS
    }

    async fn flush_with(&self, take: fn(&Self) -> UsageBatch) -> Result<(), StoreError> {
        let _flushing = self.flushing.lock().await;
        let doubtful = lock(&self.in_doubt).take();
        if let Some((id, written, part)) = doubtful {
            if written.elapsed() > IN_DOUBT_LIMIT {
                // Its marker may have expired: settling could no longer tell; drop it.
                tracing::error!("a usage flush part stayed unconfirmed too long; dropped");
                self.metrics.usage.operation(
                    "usage_flush",
                    std::time::Duration::ZERO,
                    Some(&StoreError::Uncertain("unconfirmed part dropped".into())),
                );
                return self.write_parts(take(self)).await;
            }
            let started = Instant::now();
            let settled = self.store.settle(id).await;
            self.metrics
                .usage
                .operation("usage_flush", started.elapsed(), settled.as_ref().err());
            match settled {
                // Applied after all: count it where a successful write is counted.
                Ok(true) => self
                    .metrics
                    .usage
                    .record_flush(&part, std::time::Duration::ZERO, None),
                Ok(false) => self.restore(part),
                Err(e) => {
                    *lock(&self.in_doubt) = Some((id, written, part));
                    return Err(e);
                }
            }
        }
        self.write_parts(take(self)).await
    }

    /// Writes a batch in parts, holding a failed part in doubt and restoring the rest.
    async fn write_parts(&self, mut batch: UsageBatch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(is_toggle) = self.is_toggle.get() {
            let not_toggles: crate::store::usage::FastSet<String> = batch
                .counts
                .values()
                .flat_map(|apps| apps.values())
                .flat_map(|toggles| toggles.keys())
                .filter(|name| !is_toggle(name))
                .cloned()
                .collect();
            batch.not_toggles = Arc::new(not_toggles);
        }
        let parts = batch.split(FLUSH_PART_ENTRIES);
        let span = tracing::debug_span!("usage.flush", parts = parts.len());
        self.write_split(parts).instrument(span).await
    }

    async fn write_split(&self, parts: Vec<UsageBatch>) -> Result<(), StoreError> {
        let mut parts = parts.into_iter();
        while let Some(part) = parts.next() {
            let id = crate::store::random_id();
            let started = Instant::now();
            let result = self.store.flush(id, &part).await;
            self.metrics
                .usage
                .record_flush(&part, started.elapsed(), result.as_ref().err());
            if let Err(e) = result {
                *lock(&self.in_doubt) = Some((id, started, part));
                parts.for_each(|rest| self.restore(rest));
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::usage::ClientHeaders;
    use crate::store::embedded::EmbeddedStore;

    fn report(app: &str, instance: &str) -> Vec<u8> {
        format!(
            r#"{{"appName":"{app}","instanceId":"{instance}","bucket":{{"start":"2026-11-22T10:00:00Z",
               "stop":"2026-11-22T10:00:10Z","toggles":{{"t":{{"yes":2,"no":1}}}}}}}}"#
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn an_early_flush_writes_instances_and_leaves_counters_for_the_interval() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = crate::store::usage::UsageStore::Embedded(
            EmbeddedStore::open(dir.path())
                .await
                .expect("store")
                .usage(),
        );
        let recorder = UsageRecorder::new(store.clone(), Arc::new(Metrics::default()));
        let headers = ClientHeaders::default();
        for instance in ["i-1", "i-2"] {
            let body = report("shop", instance);
            let parsed = MetricsReport::parse(&body, &headers).expect("valid");
            recorder.record_metrics(parsed, Some("10.0.0.1"));
        }
        let etag = axum::http::HeaderValue::from_static("W/\"1\"");
        recorder.record_poll("shop", "i-3", "", &etag, 7);

        recorder.flush_instances().await.expect("early flush");
        let instances = store
            .instances(&["shop".into()], 0)
            .await
            .expect("instances");
        assert_eq!(instances[0].len(), 3);
        let minute = minute_of(now_ms());
        let counted = store.counts(minute - 1, minute).await.expect("counts");
        assert!(counted.is_empty(), "counters wait for the regular flush");

        recorder.flush().await.expect("flush");
        let counted = store.counts(minute - 1, minute + 1).await.expect("counts");
        let total: u64 = counted
            .iter()
            .flat_map(|(_, c)| c.values())
            .map(|c| c.yes + c.no)
            .sum();
        assert_eq!(total, 6, "both reports, counted once");
        let apps = store.applications(0).await.expect("apps");
        assert_eq!(apps[0].metrics_count, 6);
    }
}
