//! Where client usage lives: per-minute and per-hour evaluation counters, the applications
//! registry, their instances (with the configuration each one holds) and the toggles each
//! application uses.
//! Written only by the flush of `usage::UsageRecorder`, a batch at a time, never per report.
//! Kept apart from the configuration: no versions, no change log, no events.

pub mod embedded;
pub mod redis;
mod redis_fields;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

/// The maps of the usage aggregate: hashed with foldhash, keyed per map (names come from
/// clients), several times faster than SipHash on the short names ingestion looks up.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The sets of the usage aggregate (hashed as `FastMap`).
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Minutes since the Unix epoch: the unit of the counters.
pub type Minute = u64;

/// How long applications, instances and seen toggles are kept after they were last seen
/// (spec §8: the applications listing covers two days).
pub const REGISTRY_RETENTION_MS: i64 = 2 * 24 * 60 * 60 * 1000;
/// Minute counters are kept this many minutes after their minute ended (the views read the
/// last 61 minutes).
pub const COUNTS_RETENTION_MINUTES: u64 = 65;

/// Hours since the Unix epoch: the unit of the hourly counters.
pub type Hour = u64;

/// Hour counters are kept this many hours after their hour ended (the views read the current
/// hour and the 47 before it; one hour more is margin for clocks and late flushes).
pub const HOURLY_RETENTION_HOURS: u64 = 49;

/// The minute an epoch-milliseconds time falls in.
pub fn minute_of(ms: i64) -> Minute {
    (ms.max(0) / 60_000) as Minute
}

/// The hour a minute falls in.
pub fn hour_of(minute: Minute) -> Hour {
    minute / 60
}

/// The first epoch millisecond of an hour.
pub fn hour_start_ms(hour: Hour) -> i64 {
    (hour as i64).saturating_mul(3_600_000)
}

/// One toggle as counted for one application.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountKey {
    pub toggle: String,
    pub app: String,
}

/// Evaluations counted: `yes`/`no` once each, `variants` as a breakdown of the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub yes: u64,
    pub no: u64,
    pub variants: FastMap<String, u64>,
}

impl Counts {
    /// Adds `other` to these counts (saturating; counts are bounded per report).
    pub fn add(&mut self, other: &Counts) {
        self.yes = self.yes.saturating_add(other.yes);
        self.no = self.no.saturating_add(other.no);
        for (variant, n) in &other.variants {
            let slot = self.variants.entry(variant.clone()).or_default();
            *slot = slot.saturating_add(*n);
        }
    }
}

/// What an instance said when it registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationRecord {
    pub sdk_version: Option<String>,
    pub started: Option<chrono::DateTime<chrono::Utc>>,
    pub interval: Option<u64>,
    /// Epoch milliseconds.
    pub registered_at: i64,
}

/// The configuration an instance holds: the ETag it was last sent or confirmed (304), the
/// configuration version that response was built from, and when it polled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollRecord {
    pub etag: String,
    /// The query string of the poll (its filter), `""` for none.
    #[serde(default)]
    pub query: String,
    pub version: u64,
    /// Epoch milliseconds.
    pub at: i64,
}

/// What one flush learned about one instance.
#[derive(Debug, Clone, Default)]
pub struct InstanceActivity {
    /// Epoch milliseconds of the first and the last contact in the batch.
    pub first_seen: i64,
    pub last_seen: i64,
    pub client_ip: Option<String>,
    pub registration: Option<RegistrationRecord>,
    pub poll: Option<PollRecord>,
}

/// What one flush learned about one application.
#[derive(Debug, Clone, Default)]
pub struct AppActivity {
    /// Epoch milliseconds of the last contact.
    pub last_seen: i64,
    /// The strategies of the latest registration in the batch.
    pub strategies: Option<Vec<String>>,
    /// Evaluations reported (yes + no) in the batch.
    pub metrics_count: u64,
    pub instances: FastMap<String, InstanceActivity>,
    /// Toggle name → epoch milliseconds it was last reported.
    pub toggles: FastMap<String, i64>,
}

/// Counts of one minute: application → toggle → counts.
pub type MinuteCounts = FastMap<String, FastMap<String, Counts>>;

/// Counts of one hour: toggle → application → counts (toggle first: a toggle's page reads
/// one toggle's hours).
pub type HourCounts = FastMap<String, FastMap<String, Counts>>;

impl AppActivity {
    /// The earliest contact in the batch: the application's creation time when it is new.
    pub fn first_seen(&self) -> i64 {
        self.instances
            .values()
            .map(|i| i.first_seen)
            .min()
            .unwrap_or(self.last_seen)
            .min(self.last_seen)
    }
}

/// Everything one replica aggregated between two flushes.
#[derive(Debug, Clone, Default)]
pub struct UsageBatch {
    pub counts: FastMap<Minute, MinuteCounts>,
    pub apps: FastMap<String, AppActivity>,
    /// Reported names that are no toggle: counted per minute, not per hour (an hour's
    /// counters are a key per toggle kept two days, which made-up names would multiply).
    pub not_toggles: Arc<FastSet<String>>,
}

impl UsageBatch {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.apps.is_empty()
    }

    /// The batch's minute counters added up per hour: what the same flush adds to the hourly
    /// counters.
    pub fn hourly(&self) -> FastMap<Hour, HourCounts> {
        let mut hours: FastMap<Hour, HourCounts> = FastMap::default();
        for (minute, apps) in &self.counts {
            let hour = hours.entry(hour_of(*minute)).or_default();
            for (app, toggles) in apps {
                for (toggle, counts) in toggles {
                    if self.not_toggles.contains(toggle) {
                        continue;
                    }
                    hour.entry(toggle.clone())
                        .or_default()
                        .entry(app.clone())
                        .or_default()
                        .add(counts);
                }
            }
        }
        hours
    }

    /// Splits the batch into parts of at most about `max` entries (counter fields, instances,
    /// seen toggles) each, so that no single write (one script, one transaction) grows with
    /// the fleet; each part is written atomically on its own.
    pub fn split(self, max: usize) -> Vec<UsageBatch> {
        let max = max.max(1);
        let mut parts = Vec::new();
        let mut current = UsageBatch::default();
        let mut size = 0;
        let mut push = |current: &mut UsageBatch, size: &mut usize, added: usize| {
            *size += added;
            if *size >= max {
                parts.push(std::mem::take(current));
                *size = 0;
            }
        };
        for (minute, apps) in self.counts {
            for (app, toggles) in apps {
                for (toggle, counts) in toggles {
                    let variants = counts.variants.len();
                    current
                        .counts
                        .entry(minute)
                        .or_default()
                        .entry(app.clone())
                        .or_default()
                        .insert(toggle, counts);
                    push(&mut current, &mut size, 1 + variants);
                }
            }
        }
        for (name, activity) in self.apps {
            let AppActivity {
                last_seen,
                strategies,
                metrics_count,
                instances,
                toggles,
            } = activity;
            // The application's own fields go with its first part; its instances and seen
            // toggles are spread over as many parts as they need.
            let mut head = Some((strategies, metrics_count));
            let mut instances = instances.into_iter().peekable();
            let mut toggles = toggles.into_iter().peekable();
            loop {
                let room = max.saturating_sub(size).max(1);
                let chunk: FastMap<String, InstanceActivity> =
                    instances.by_ref().take(room).collect();
                let room = room.saturating_sub(chunk.len()).max(1);
                let seen: FastMap<String, i64> = toggles.by_ref().take(room).collect();
                let app = current.apps.entry(name.clone()).or_default();
                app.last_seen = app.last_seen.max(last_seen);
                if let Some((strategies, metrics_count)) = head.take() {
                    app.strategies = strategies;
                    app.metrics_count = metrics_count;
                }
                let added = (chunk.len() + seen.len()).max(1);
                app.instances.extend(chunk);
                app.toggles.extend(seen);
                push(&mut current, &mut size, added);
                if instances.peek().is_none() && toggles.peek().is_none() {
                    break;
                }
            }
        }
        if !current.is_empty() {
            parts.push(current);
        }
        for part in &mut parts {
            part.not_toggles = self.not_toggles.clone();
        }
        parts
    }
}

/// An application of the registry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppRecord {
    pub name: String,
    /// Epoch milliseconds.
    pub created_at: i64,
    pub last_seen: i64,
    pub strategies: Vec<String>,
    pub metadata: AppMetadata,
    /// Evaluations reported since the application was first seen.
    pub metrics_count: u64,
}

/// What people say about an application (`POST /api/admin/metrics/applications/:app`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppMetadata {
    pub description: Option<String>,
    pub url: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
}

/// One instance of an application.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceRecord {
    pub instance_id: String,
    /// Epoch milliseconds.
    pub first_seen: i64,
    pub last_seen: i64,
    pub client_ip: Option<String>,
    pub registration: Option<RegistrationRecord>,
    pub poll: Option<PollRecord>,
}

/// The usage side of a store.
#[derive(Clone)]
pub enum UsageStore {
    Redis(redis::RedisUsage),
    Embedded(embedded::EmbeddedUsage),
}

impl Store {
    /// The usage side of this store.
    pub fn usage(&self) -> UsageStore {
        match self {
            Store::Redis(s) => UsageStore::Redis(s.usage()),
            Store::Embedded(s) => UsageStore::Embedded(s.usage()),
        }
    }
}

impl UsageStore {
    /// Adds one flush part to the store, all of it or nothing, at most once per `id` however
    /// often it is retried. On an error the part may or may not have been applied: `settle`
    /// tells which.
    pub async fn flush(&self, id: u64, part: &UsageBatch) -> Result<(), StoreError> {
        match self {
            UsageStore::Redis(s) => s.flush(id, part).await,
            UsageStore::Embedded(s) => s.flush(part).await,
        }
    }

    /// Decides the fate of a part whose flush went unconfirmed: `true` if it was applied,
    /// `false` if it was not and now never will be (so it can be merged into the next flush).
    pub async fn settle(&self, id: u64) -> Result<bool, StoreError> {
        match self {
            UsageStore::Redis(s) => s.settle(id).await,
            // A redb transaction that failed wrote nothing.
            UsageStore::Embedded(_) => Ok(false),
        }
    }

    /// Forgets what retention no longer covers: counters of old minutes and hours (where they
    /// do not expire by themselves) and applications, instances and seen toggles not seen for two
    /// days.
    pub async fn trim(&self, now_ms: i64) -> Result<(), StoreError> {
        match self {
            UsageStore::Redis(s) => s.trim(now_ms).await,
            UsageStore::Embedded(s) => s.trim(now_ms).await,
        }
    }

    /// The counters of the minutes `from..=to`, per minute.
    pub async fn counts(
        &self,
        from: Minute,
        to: Minute,
    ) -> Result<Vec<(Minute, HashMap<CountKey, Counts>)>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.counts(from, to).await,
            UsageStore::Embedded(s) => s.counts(from, to).await,
        }
    }

    /// One toggle's hourly counters of the hours `from..=to`, per hour (hours without any are
    /// left out): application → counts.
    pub async fn hourly_counts(
        &self,
        toggle: &str,
        from: Hour,
        to: Hour,
    ) -> Result<Vec<(Hour, HashMap<String, Counts>)>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.hourly_counts(toggle, from, to).await,
            UsageStore::Embedded(s) => s.hourly_counts(toggle, from, to).await,
        }
    }

    /// Applications last seen at or after `since_ms`, by name.
    pub async fn applications(&self, since_ms: i64) -> Result<Vec<AppRecord>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.applications(since_ms).await,
            UsageStore::Embedded(s) => s.applications(since_ms).await,
        }
    }

    /// One application, if it was seen (or described) at or after `since_ms`.
    pub async fn application(
        &self,
        name: &str,
        since_ms: i64,
    ) -> Result<Option<AppRecord>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.application(name, since_ms).await,
            UsageStore::Embedded(s) => s.application(name, since_ms).await,
        }
    }

    /// The instances of each of `apps` seen at or after `since_ms`, most recently seen first
    /// (one round trip for all of them).
    pub async fn instances(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<InstanceRecord>>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.instances(apps, since_ms).await,
            UsageStore::Embedded(s) => s.instances(apps, since_ms).await,
        }
    }

    /// The toggles each of `apps` reported at or after `since_ms`, by name (one round trip).
    pub async fn seen_toggles(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        match self {
            UsageStore::Redis(s) => s.seen_toggles(apps, since_ms).await,
            UsageStore::Embedded(s) => s.seen_toggles(apps, since_ms).await,
        }
    }

    /// Sets an application's metadata, registering the application if it is new.
    pub async fn set_metadata(
        &self,
        app: &str,
        metadata: &AppMetadata,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        match self {
            UsageStore::Redis(s) => s.set_metadata(app, metadata, now_ms).await,
            UsageStore::Embedded(s) => s.set_metadata(app, metadata, now_ms).await,
        }
    }

    /// Forgets an application with its instances and seen toggles (its counters expire).
    pub async fn delete_application(&self, app: &str) -> Result<(), StoreError> {
        match self {
            UsageStore::Redis(s) => s.delete_application(app).await,
            UsageStore::Embedded(s) => s.delete_application(app).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(yes: u64, no: u64, variant: Option<(&str, u64)>) -> Counts {
        let mut c = Counts {
            yes,
            no,
            ..Counts::default()
        };
        if let Some((name, n)) = variant {
            c.variants.insert(name.to_string(), n);
        }
        c
    }

    #[test]
    fn minutes_add_up_in_the_hour_they_fall_in() {
        // 10:00 and 10:59 are one hour; 11:00 is the next (hours since the epoch).
        let ten = minute_of(hour_start_ms(490_000));
        let mut batch = UsageBatch::default();
        for (minute, app, c) in [
            (ten, "shop", counts(1, 2, Some(("blue", 1)))),
            (ten + 59, "shop", counts(3, 0, Some(("blue", 2)))),
            (ten + 59, "billing", counts(5, 0, None)),
            (ten + 60, "shop", counts(0, 7, None)),
        ] {
            batch
                .counts
                .entry(minute)
                .or_default()
                .entry(app.into())
                .or_default()
                .entry("t".into())
                .or_default()
                .add(&c);
        }
        let hours = batch.hourly();
        assert_eq!(hour_of(ten), 490_000);
        assert_eq!(hours.len(), 2);
        let first = &hours[&490_000]["t"];
        assert_eq!(first["shop"], counts(4, 2, Some(("blue", 3))));
        assert_eq!(first["billing"], counts(5, 0, None));
        assert_eq!(hours[&490_001]["t"]["shop"], counts(0, 7, None));
        assert_eq!(
            hour_start_ms(hour_of(minute_of(hour_start_ms(7) + 3_599_999))),
            hour_start_ms(7)
        );
    }

    #[test]
    fn split_keeps_every_entry_once_and_bounds_parts() {
        let mut batch = UsageBatch::default();
        for t in 0..25 {
            batch
                .counts
                .entry(7)
                .or_default()
                .entry("app".into())
                .or_default()
                .insert(
                    format!("t{t}"),
                    Counts {
                        yes: 1,
                        ..Counts::default()
                    },
                );
        }
        let app = batch.apps.entry("app".into()).or_default();
        app.metrics_count = 25;
        for t in 0..17 {
            app.toggles.insert(format!("seen{t}"), 1);
        }
        for i in 0..23 {
            app.instances
                .insert(format!("i{i}"), InstanceActivity::default());
        }
        let parts = batch.split(10);
        assert!(parts.len() >= 5);
        let counters: usize = parts
            .iter()
            .flat_map(|p| p.counts.values())
            .flat_map(|apps| apps.values())
            .map(|t| t.len())
            .sum();
        let instances: usize = parts
            .iter()
            .flat_map(|p| p.apps.values())
            .map(|a| a.instances.len())
            .sum();
        let seen: usize = parts
            .iter()
            .flat_map(|p| p.apps.values())
            .map(|a| a.toggles.len())
            .sum();
        assert_eq!(seen, 17);
        let metrics: u64 = parts
            .iter()
            .flat_map(|p| p.apps.values())
            .map(|a| a.metrics_count)
            .sum();
        assert_eq!((counters, instances, metrics), (25, 23, 25));
        for part in &parts {
            let size: usize = part
                .counts
                .values()
                .flat_map(|a| a.values())
                .map(|t| t.len())
                .sum::<usize>()
                + part.apps.values().map(|a| a.instances.len()).sum::<usize>();
            assert!(size <= 10, "part of {size}");
        }
    }
}
