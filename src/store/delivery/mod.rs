//! The delivery queue: addon jobs written in the same commit as their events, taken by the
//! delivery workers of every replica, settled after each attempt (delivered, retried later,
//! dead-lettered, dropped), and the per-addon log of how each delivery went.
//!
//! Redis: a stream read through one consumer group shared by all replicas (a job goes to one
//! replica; the jobs of a replica that died are claimed by the others after a visibility
//! timeout), a sorted set of jobs waiting for their retry, a dead-letter stream per addon.
//! Embedded: an outbox table in the same redb file, ordered by due time.

pub mod embedded;
pub mod redis;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::domain::delivery::{DeliveryJob, DeliveryRecord};

/// A job to queue with a commit: event `event` (an index into the commit's events) for
/// addon `addon`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub event: usize,
    pub addon: u64,
    /// The W3C trace context of the write that queues it (see `telemetry::traces`).
    pub traceparent: Option<String>,
}

/// How many deliveries each addon's log keeps (the oldest go first).
pub const LOG_LENGTH: usize = 1000;

/// A job taken from the queue, with what the backend needs to settle it.
#[derive(Debug, Clone)]
pub struct TakenJob {
    pub job: DeliveryJob,
    /// When this replica took it (the visibility timeout runs from here).
    pub taken_at: std::time::Instant,
    receipt: Receipt,
}

/// Which queue entry a taken job is.
#[derive(Debug, Clone)]
enum Receipt {
    /// Redis: the stream entry id.
    Stream(String),
    /// Embedded: the outbox key (due time, sequence number).
    Outbox(u64, u64),
}

/// What became of an attempt.
#[derive(Debug, Clone)]
pub enum Settlement {
    /// Accepted by the receiver.
    Delivered(DeliveryRecord),
    /// Failed; `job` (its attempts counted) is due again at `due` (epoch ms).
    Retry {
        job: DeliveryJob,
        due: i64,
        record: DeliveryRecord,
    },
    /// Failed for good: `job` becomes a dead letter.
    Dead {
        job: DeliveryJob,
        record: DeliveryRecord,
    },
    /// Not attempted now (the addon is busy, or this replica is behind): due again at `due`,
    /// nothing counted.
    Defer { due: i64 },
    /// Not sent and never will be; the record, when the addon still exists.
    Dropped(Option<DeliveryRecord>),
}

/// A dead letter: the job, why it died and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    pub job: DeliveryJob,
    pub error: String,
    pub dead_at: DateTime<Utc>,
}

/// The outcome of a redelivery request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// Queued again.
    Queued,
    /// The delivery is not in the addon's log (nor a dead letter).
    Unknown,
    /// It is queued or waiting for a retry already.
    Pending,
}

/// Jobs waiting (queued, in flight or due for a retry) and dead letters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub backlog: u64,
    pub dead: u64,
}

/// The queue of one store.
#[derive(Clone)]
pub enum DeliveryQueue {
    Redis(redis::RedisDeliveries),
    Embedded(embedded::EmbeddedDeliveries),
}

impl DeliveryQueue {
    /// Takes up to `max` new jobs for `consumer`, waiting up to about a second for some.
    pub async fn take(&self, consumer: &str, max: usize) -> Result<Vec<TakenJob>, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.take(consumer, max).await,
            DeliveryQueue::Embedded(q) => q.take(max).await,
        }
    }

    /// Takes over up to `max` jobs another consumer took more than `idle` ago and never
    /// settled (it died, or lost its connection), scanning on from `cursor` (`0-0` at first);
    /// returns them and where the next round goes on.
    pub async fn reclaim(
        &self,
        consumer: &str,
        idle: std::time::Duration,
        max: usize,
        cursor: &str,
    ) -> Result<(Vec<TakenJob>, String), StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.reclaim(consumer, idle, max, cursor).await,
            // One process: a job in flight is never abandoned while the process lives.
            DeliveryQueue::Embedded(_) => Ok((Vec::new(), cursor.to_string())),
        }
    }

    /// Settles a taken job atomically (the job leaves the queue, its successor or dead letter
    /// and its record are written together). `false`: the job was no longer this
    /// consumer's to settle (another one claimed and settled it); nothing was written.
    pub async fn settle(
        &self,
        taken: &TakenJob,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.settle(taken, settlement).await,
            DeliveryQueue::Embedded(q) => q.settle(taken, settlement).await,
        }
    }

    /// Gives a taken job back unsettled (the store could not be read or written): it is
    /// attempted again after a while — Redis: claimed after the visibility timeout; embedded:
    /// after `RELEASE_DELAY`.
    pub fn release(&self, taken: &TakenJob) {
        if let DeliveryQueue::Embedded(q) = self {
            q.release(taken);
        }
    }

    /// Moves jobs whose retry is due back into the queue; how many.
    pub async fn promote_due(&self, now: i64) -> Result<usize, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.promote_due(now).await,
            // The outbox is ordered by due time: nothing to move.
            DeliveryQueue::Embedded(_) => Ok(0),
        }
    }

    /// The addon's latest deliveries, newest first, at most `limit`.
    pub async fn records(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.records(addon, limit).await,
            DeliveryQueue::Embedded(q) => q.records(addon, limit).await,
        }
    }

    /// The addon's oldest dead letters, at most `limit`, and how many it has.
    pub async fn dead_letters(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<(Vec<DeadLetter>, u64), StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.dead_letters(addon, limit).await,
            DeliveryQueue::Embedded(q) => q.dead_letters(addon, limit).await,
        }
    }

    /// Queues delivery `id` of `addon` again: a dead letter with its attempts reset, or a
    /// delivery that was delivered or dropped, from scratch. `version` is the configuration
    /// version it is judged against at least (the one the caller knows of).
    pub async fn redeliver(
        &self,
        addon: u64,
        id: &str,
        now: DateTime<Utc>,
        version: u64,
    ) -> Result<Redelivery, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.redeliver(addon, id, now, version).await,
            DeliveryQueue::Embedded(q) => q.redeliver(addon, id, now, version).await,
        }
    }

    /// Queues the oldest `max` dead letters of `addon` again; how many were queued and how
    /// many are left.
    pub async fn redeliver_dead(
        &self,
        addon: u64,
        now: DateTime<Utc>,
        version: u64,
        max: usize,
    ) -> Result<(usize, u64), StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.redeliver_dead(addon, now, version, max).await,
            DeliveryQueue::Embedded(q) => q.redeliver_dead(addon, now, version, max).await,
        }
    }

    /// Deletes the log and the dead letters of a deleted addon.
    pub async fn forget(&self, addon: u64) -> Result<(), StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.forget(addon).await,
            DeliveryQueue::Embedded(q) => q.forget(addon).await,
        }
    }

    /// The backlog and the dead letters of `addons`.
    pub async fn depth(&self, addons: &[u64]) -> Result<QueueDepth, StoreError> {
        match self {
            DeliveryQueue::Redis(q) => q.depth(addons).await,
            DeliveryQueue::Embedded(q) => q.depth(addons).await,
        }
    }
}

/// The job a redelivery queues: from scratch (no attempts, nothing sent), unless it comes from
/// a dead letter, whose accepted requests are not sent again.
fn fresh_job(
    mut job: DeliveryJob,
    keep_sent: bool,
    now: DateTime<Utc>,
    version: u64,
) -> DeliveryJob {
    job.attempts = 0;
    if !keep_sent {
        job.sent = 0;
    }
    // A fix of the addon made before the redelivery was asked for is seen by the attempt.
    job.version = version;
    job.queued = now.timestamp_millis();
    job
}

/// A job rebuilt from its log record.
fn job_of(record: &DeliveryRecord) -> DeliveryJob {
    DeliveryJob {
        delivery: record.id.clone(),
        event: record.event_id,
        addon: record.addon_id,
        kind: record.kind.clone(),
        version: 0,
        attempts: 0,
        sent: 0,
        queued: 0,
        traceparent: None,
    }
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}
