//! The delivery worker of one replica: takes jobs from the store's queue (shared by all
//! replicas), makes one attempt per job, and settles it: delivered, retried later, dead, or
//! dropped. Also claims the jobs of replicas that died, moves due retries back into the queue
//! and samples the queue's depth for the metrics.

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use chrono::{DateTime, Utc};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::backoff;
use super::lanes::Lanes;
use super::request::requests;
use super::send::{client, send_all, Failure};
use crate::config::DeliverySettings;
use crate::domain::delivery::{subscribes, DeliveryJob, DeliveryRecord, DeliveryStatus};
use crate::snapshot::Snapshot;
use crate::store::delivery::{DeliveryQueue, Settlement, TakenJob};
use crate::store::{random_id, Store};
use crate::telemetry::metrics::Metrics;

/// The worker's settings (see `config.rs`).
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    pub max_attempts: u32,
    pub timeout: Duration,
    pub backoff: Duration,
    pub backoff_max: Duration,
    pub visibility: Duration,
    pub concurrency: usize,
    pub per_addon: usize,
    pub public_url: Option<String>,
}

impl WorkerSettings {
    /// The worker's settings from its section, with the service's `public_url` (chat messages
    /// link to toggles under it).
    pub fn from_settings(settings: &DeliverySettings, public_url: Option<&url::Url>) -> Self {
        Self {
            max_attempts: settings.delivery_max_attempts,
            timeout: Duration::from_millis(settings.delivery_timeout_ms),
            backoff: Duration::from_millis(settings.delivery_backoff_ms),
            backoff_max: Duration::from_millis(settings.delivery_backoff_max_ms),
            visibility: Duration::from_millis(settings.delivery_visibility_timeout_ms),
            concurrency: settings.delivery_concurrency as usize,
            per_addon: settings.delivery_concurrency_per_addon as usize,
            public_url: public_url.map(|u| u.to_string()),
        }
    }
}

/// One replica's delivery worker.
pub struct DeliveryWorker {
    queue: DeliveryQueue,
    store: Store,
    snapshot: Arc<Snapshot>,
    metrics: Arc<Metrics>,
    settings: WorkerSettings,
    http: reqwest::Client,
    /// This replica's name in the consumer group.
    consumer: String,
    /// Jobs held and attempts in flight, overall and per addon.
    lanes: Lanes,
}

/// The result of one attempt: the settlement, and the provider and outcome for the metrics.
struct Attempted {
    settlement: Settlement,
    provider: String,
    outcome: &'static str,
}

impl DeliveryWorker {
    /// A worker over `store`'s queue; fails when the HTTP client cannot be built.
    pub fn new(
        store: Store,
        snapshot: Arc<Snapshot>,
        metrics: Arc<Metrics>,
        settings: WorkerSettings,
    ) -> Result<Self, String> {
        let http = client(settings.timeout).map_err(|e| format!("delivery HTTP client: {e}"))?;
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "replica".into());
        Ok(Self {
            queue: store.deliveries(),
            store,
            snapshot,
            metrics,
            // A job waits for room at most a quarter of the visibility timeout, and its attempt
            // ends by three quarters of it: another replica does not claim a job still held.
            lanes: Lanes::new(
                settings.concurrency,
                settings.per_addon,
                settings.visibility / 4,
            ),
            settings,
            http,
            consumer: format!("{host}-{:016x}", random_id()),
        })
    }

    /// Delivers until `shutdown`, then puts back the jobs waiting for room and lets the
    /// attempts in flight finish and settle (for about one request timeout).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        while !self.snapshot.is_ready() {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let mut chores = JoinSet::new();
        chores.spawn(self.clone().promote_due(shutdown.clone()));
        chores.spawn(self.clone().sample_depth(shutdown.clone()));
        let mut attempts = JoinSet::new();
        let mut failing = false;
        // Claims of jobs other replicas left: every quarter of the visibility timeout,
        // scanning the pending jobs on from where the last round stopped.
        let reclaim_every = (self.settings.visibility / 4).max(Duration::from_millis(100));
        let mut last_reclaim = tokio::time::Instant::now();
        let mut cursor = "0-0".to_string();
        loop {
            // Take only what may be held.
            let permit = tokio::select! {
                _ = shutdown.cancelled() => break,
                permit = self.lanes.hold() => permit,
            };
            let Some(first) = permit else { break };
            let room = (self.lanes.room() + 1).min(64);
            let taken = if last_reclaim.elapsed() >= reclaim_every {
                last_reclaim = tokio::time::Instant::now();
                let visibility = self.settings.visibility;
                let claimed = self
                    .queue
                    .reclaim(&self.consumer, visibility, room, &cursor)
                    .await;
                claimed.map(|(jobs, next)| {
                    cursor = next;
                    for job in &jobs {
                        tracing::info!(delivery = %job.job.delivery, "claimed a delivery another replica left");
                    }
                    jobs
                })
            } else {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    taken = self.queue.take(&self.consumer, room) => taken,
                }
            };
            match taken {
                Ok(jobs) => {
                    if failing {
                        tracing::info!("delivery queue reachable again");
                        failing = false;
                    }
                    let mut first = Some(first);
                    for job in jobs {
                        let permit = match first.take() {
                            Some(p) => p,
                            None => match self.lanes.hold().await {
                                Some(p) => p,
                                None => break,
                            },
                        };
                        attempts.spawn(self.clone().process(job, permit));
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "delivery queue unreachable; retrying");
                    }
                    failing = true;
                    drop(first);
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                }
            }
            // Reap finished attempts so the set does not grow.
            while attempts.try_join_next().is_some() {}
        }
        chores.shutdown().await;
        self.lanes.close();
        // Attempts in flight finish and settle, for as long as one request may take; any
        // still running then stay queued (Redis: claimed by another replica later).
        let drain = async { while attempts.join_next().await.is_some() {} };
        if tokio::time::timeout(self.settings.timeout + Duration::from_secs(2), drain)
            .await
            .is_err()
        {
            tracing::warn!("deliveries still in flight at shutdown are left for later");
        }
    }

    /// Attempts one job and settles it; the job counts as held throughout.
    async fn process(self: Arc<Self>, taken: TakenJob, _permit: OwnedSemaphorePermit) {
        // A trace of its own, linked to the write's (a delivery may run much later).
        let span = tracing::debug_span!(
            parent: None,
            "delivery.attempt",
            delivery.id = %taken.job.delivery,
            addon.id = taken.job.addon,
            event.type = %taken.job.kind,
            attempt = taken.job.attempts + 1,
            outcome = tracing::field::Empty,
        );
        crate::telemetry::traces::link_to(&span, taken.job.traceparent.as_deref());
        let attempted = self.attempt(&taken).instrument(span.clone()).await;
        if let Some(attempted) = &attempted {
            span.record("outcome", attempted.outcome);
        }
        let Some(attempted) = attempted else {
            // The store could not be read: the job stays queued (Redis: until the visibility
            // timeout lets a replica claim it).
            self.queue.release(&taken);
            return;
        };
        // Settling is retried (a store outage) for as long as no other replica may claim the
        // job, and tried at least once.
        let give_up = taken.taken_at + self.settings.visibility * 9 / 10;
        let mut delay = Duration::from_millis(100);
        loop {
            match self.queue.settle(&taken, &attempted.settlement).await {
                Ok(true) => {
                    self.metrics
                        .deliveries
                        .settled(&attempted.provider, attempted.outcome);
                    if let Settlement::Delivered(record) = &attempted.settlement {
                        let seconds = record.latency_ms.unwrap_or(0) as f64 / 1000.0;
                        self.metrics
                            .deliveries
                            .delivered_after(&attempted.provider, seconds);
                    }
                    return;
                }
                Ok(false) => {
                    tracing::debug!(delivery = %taken.job.delivery, "settled by another replica");
                    return;
                }
                Err(e) => {
                    tracing::warn!(delivery = %taken.job.delivery, error = %e, "cannot settle a delivery yet");
                    if std::time::Instant::now() + delay >= give_up {
                        break;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
        // Still unsettled: it is attempted again later (a delivered job may then be sent twice,
        // which its idempotency key lets the receiver see).
        self.queue.release(&taken);
    }

    /// One attempt at a job; `None` when the store cannot be read.
    async fn attempt(&self, taken: &TakenJob) -> Option<Attempted> {
        let job = &taken.job;
        let now = Utc::now();
        if self.snapshot.state().version < job.version {
            // Queued by a commit this replica has not seen yet.
            let _ = self.snapshot.refresh().await;
            if self.snapshot.state().version < job.version {
                return Some(deferred("", now, Duration::from_millis(500)));
            }
        }
        let state = self.snapshot.state();
        let Some(addon) = state.addons.get(&job.addon.to_string()).cloned() else {
            return Some(Attempted {
                settlement: Settlement::Dropped(None),
                provider: String::new(),
                outcome: "dropped",
            });
        };
        let provider = addon.provider.clone();
        if !subscribes(&addon, &job.kind) {
            let why = "the addon was disabled or no longer subscribes to this event";
            return Some(dropped(job, provider, why, now));
        }
        let mut admission = match self.lanes.admit(job.addon).await {
            Ok(admission) => admission,
            // The addon has no room: put the job back rather than hold room others need.
            Err(wait) => return Some(deferred(&provider, Utc::now(), wait)),
        };
        let event = match self.store.event(job.event).await {
            Ok(Some(event)) => event,
            Ok(None) => return Some(dropped(job, provider, "the event no longer exists", now)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the event of a delivery");
                return None;
            }
        };
        let public_url = self.settings.public_url.as_deref();
        let requests = match requests(&addon, &event, &job.delivery, now, public_url) {
            Ok(requests) => requests,
            Err(e) => {
                let failure = Failure {
                    error: e.to_string(),
                    status: None,
                    retryable: false,
                    retry_after: None,
                };
                return Some(self.failed(job, provider, failure, job.sent, now));
            }
        };
        let skip = (job.sent as usize).min(requests.len());
        admission.sending();
        // Waiting for room took at most a quarter of the visibility timeout; the attempt ends
        // by three quarters, so no other replica claims the job while it runs.
        let deadline = Instant::from_std(taken.taken_at + self.settings.visibility * 3 / 4);
        let send = send_all(
            &self.http,
            &requests[skip..],
            (self.settings.timeout, deadline),
            || self.metrics.deliveries.attempted(&provider),
        );
        let (sent, failure) = send.await;
        let sent = job.sent + u32::try_from(sent).unwrap_or(u32::MAX);
        let now = Utc::now();
        Some(match failure {
            None => {
                let mut record = record_of(job, DeliveryStatus::Delivered, now);
                record.attempts = job.attempts + 1;
                record.latency_ms = u64::try_from(now.timestamp_millis() - job.queued).ok();
                Attempted {
                    settlement: Settlement::Delivered(record),
                    provider,
                    outcome: "delivered",
                }
            }
            Some(failure) => self.failed(job, provider, failure, sent, now),
        })
    }

    /// A failed attempt: retried later, or dead when it cannot succeed or ran out of attempts.
    fn failed(
        &self,
        job: &DeliveryJob,
        provider: String,
        failure: Failure,
        sent: u32,
        now: DateTime<Utc>,
    ) -> Attempted {
        let next = DeliveryJob {
            attempts: job.attempts + 1,
            sent,
            ..job.clone()
        };
        let exhausted = next.attempts >= self.settings.max_attempts;
        let status = if failure.retryable && !exhausted {
            DeliveryStatus::Retrying
        } else {
            DeliveryStatus::Dead
        };
        let mut record = record_of(&next, status, now);
        record.last_status_code = failure.status;
        record.last_error = Some(if failure.retryable && exhausted {
            format!(
                "gave up after {} attempts: {}",
                next.attempts, failure.error
            )
        } else {
            failure.error.clone()
        });
        if status == DeliveryStatus::Dead {
            return Attempted {
                settlement: Settlement::Dead { job: next, record },
                provider,
                outcome: "dead",
            };
        }
        let wait = backoff(
            next.attempts,
            self.settings.backoff,
            self.settings.backoff_max,
        )
        .max(failure.retry_after.unwrap_or(Duration::ZERO));
        let due = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::zero());
        record.next_attempt_at = Some(due);
        Attempted {
            settlement: Settlement::Retry {
                job: next,
                due: due.timestamp_millis(),
                record,
            },
            provider,
            outcome: "retried",
        }
    }

    /// Moves due retries back into the queue, a few times a second.
    async fn promote_due(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            // Failures show in the take loop's log; the next round tries again.
            let _ = self.queue.promote_due(Utc::now().timestamp_millis()).await;
        }
    }

    /// Samples the queue's depth into the metrics every few seconds.
    async fn sample_depth(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let addons: Vec<u64> = self
                .snapshot
                .state()
                .addons
                .values()
                .map(|a| a.id)
                .collect();
            if let Ok(depth) = self.queue.depth(&addons).await {
                self.metrics.deliveries.depth(depth);
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
    }
}

/// The record of `job` with `status` at `now`.
fn record_of(job: &DeliveryJob, status: DeliveryStatus, now: DateTime<Utc>) -> DeliveryRecord {
    DeliveryRecord {
        status,
        ..DeliveryRecord::queued(job, now)
    }
}

/// Not attempted now: due again in `wait`/2 to `wait` (jittered), nothing counted.
fn deferred(provider: &str, now: DateTime<Utc>, wait: Duration) -> Attempted {
    let wait = i64::try_from(wait.as_millis()).unwrap_or(1000).max(2);
    let jitter = i64::try_from(random_id() % (wait as u64 / 2 + 1)).unwrap_or(0);
    Attempted {
        settlement: Settlement::Defer {
            due: now.timestamp_millis() + wait / 2 + jitter,
        },
        provider: provider.to_string(),
        outcome: "deferred",
    }
}

/// A job that will never be sent.
fn dropped(job: &DeliveryJob, provider: String, why: &str, now: DateTime<Utc>) -> Attempted {
    let mut record = record_of(job, DeliveryStatus::Dropped, now);
    record.last_error = Some(why.into());
    Attempted {
        settlement: Settlement::Dropped(Some(record)),
        provider,
        outcome: "dropped",
    }
}
