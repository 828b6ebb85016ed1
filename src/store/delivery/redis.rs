//! The delivery queue on Redis (see `keys.rs` for the keys and `DELIVERY_GROUP`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use redis::streams::{
    StreamAutoClaimOptions, StreamAutoClaimReply, StreamId, StreamRangeReply, StreamReadOptions,
    StreamReadReply,
};
use redis::{AsyncCommands, Script};
use tokio::sync::Mutex;

use super::{
    corrupt, fresh_job, job_of, DeadLetter, QueueDepth, Receipt, Redelivery, Settlement, TakenJob,
    LOG_LENGTH,
};
use crate::domain::delivery::{DeliveryJob, DeliveryRecord};
use crate::store::keys::{Keys, DELIVERY_GROUP};
use crate::store::redis_conn::{Connector, RedisConn};
use crate::store::{Collection, StoreError};

/// How long one blocking read waits for new jobs.
const BLOCK: Duration = Duration::from_secs(1);

/// The Redis delivery queue; cheap to clone.
#[derive(Clone)]
pub struct RedisDeliveries {
    connector: Connector,
    conn: RedisConn,
    keys: Arc<Keys>,
    scripts: Arc<Scripts>,
    /// The connection blocking reads wait on: its own, so they hold up nothing else, with a
    /// response timeout longer than the block (the shared connection's would cut them); with
    /// the master generation it was opened in (sentinel mode: replaced after a switch).
    reader: Arc<Mutex<Option<(RedisConn, u64)>>>,
}

struct Scripts {
    settle: Script,
    promote: Script,
    redeliver: Script,
}

fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The job of one stream entry.
fn job_of_entry(entry: &StreamId) -> Result<DeliveryJob, StoreError> {
    let raw: String = entry
        .get("job")
        .ok_or_else(|| StoreError::Corrupt("delivery entry without job".into()))?;
    serde_json::from_str(&raw).map_err(|e| corrupt("delivery job", e))
}

impl RedisDeliveries {
    /// The queue of the installation `keys` names, on the shared connection of `connector`
    /// and one of its own for blocking reads.
    pub fn new(connector: Connector, keys: Arc<Keys>) -> Self {
        Self {
            conn: connector.conn(),
            connector,
            keys,
            scripts: Arc::new(Scripts {
                settle: Script::new(include_str!("settle.lua")),
                promote: Script::new(include_str!("promote.lua")),
                redeliver: Script::new(include_str!("redeliver.lua")),
            }),
            reader: Arc::new(Mutex::new(None)),
        }
    }

    /// Creates the consumer group (and the stream) unless it exists. From id 0: jobs queued
    /// before the first worker started, or before a Redis that lost the group came back,
    /// are read too.
    async fn ensure_group(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let created: Result<(), redis::RedisError> = conn
            .xgroup_create_mkstream(self.keys.deliveries(), DELIVERY_GROUP, "0")
            .await;
        match created {
            Err(e) if !e.to_string().contains("BUSYGROUP") => Err(unavailable(e)),
            _ => Ok(()),
        }
    }

    pub(super) async fn take(
        &self,
        consumer: &str,
        max: usize,
    ) -> Result<Vec<TakenJob>, StoreError> {
        let mut reader = self.reader.lock().await;
        let generation = self.connector.master_generation();
        let mut conn = match reader.take() {
            Some((conn, opened)) if opened == generation => conn,
            _ => self
                .connector
                .dedicated(BLOCK + Duration::from_secs(3))
                .await
                .map_err(unavailable)?,
        };
        let options = StreamReadOptions::default()
            .group(DELIVERY_GROUP, consumer)
            .count(max.max(1))
            .block(BLOCK.as_millis() as usize);
        let read: Result<Option<StreamReadReply>, _> = conn
            .xread_options(&[self.keys.deliveries()], &[">"], &options)
            .await;
        match read {
            Ok(reply) => {
                *reader = Some((conn, generation));
                drop(reader);
                let entries: Vec<StreamId> = reply
                    .into_iter()
                    .flat_map(|r| r.keys)
                    .flat_map(|k| k.ids)
                    .collect();
                Ok(self.readable(&entries).await)
            }
            Err(e) if e.to_string().contains("NOGROUP") => {
                *reader = Some((conn, generation));
                self.ensure_group().await?;
                Ok(Vec::new())
            }
            // The connection is dropped: the next read opens another.
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The jobs of `entries`. An entry that cannot be read (written by another version, or
    /// by hand) is acknowledged and deleted with an error log, so it cannot hold up the
    /// others for ever.
    async fn readable(&self, entries: &[StreamId]) -> Vec<TakenJob> {
        let taken_at = std::time::Instant::now();
        let mut jobs = Vec::with_capacity(entries.len());
        let mut unreadable = Vec::new();
        for entry in entries {
            match job_of_entry(entry) {
                Ok(job) => jobs.push(TakenJob {
                    job,
                    taken_at,
                    receipt: Receipt::Stream(entry.id.clone()),
                }),
                Err(e) => {
                    tracing::error!(entry = %entry.id, error = %e, "an unreadable delivery job was dropped");
                    unreadable.push(entry.id.clone());
                }
            }
        }
        if !unreadable.is_empty() {
            let mut conn = self.conn.clone();
            let removed: Result<(), _> = redis::pipe()
                .atomic()
                .xack(self.keys.deliveries(), DELIVERY_GROUP, &unreadable)
                .ignore()
                .xdel(self.keys.deliveries(), &unreadable)
                .ignore()
                .query_async(&mut conn)
                .await;
            // The readable jobs go on; the others come back with a later claim.
            if let Err(e) = removed {
                tracing::warn!(error = %e, "cannot remove unreadable delivery jobs yet");
            }
        }
        jobs
    }

    pub(super) async fn reclaim(
        &self,
        consumer: &str,
        idle: Duration,
        max: usize,
        cursor: &str,
    ) -> Result<(Vec<TakenJob>, String), StoreError> {
        let mut conn = self.conn.clone();
        let options = StreamAutoClaimOptions::default().count(max.max(1));
        let reply: Result<StreamAutoClaimReply, _> = conn
            .xautoclaim_options(
                self.keys.deliveries(),
                DELIVERY_GROUP,
                consumer,
                idle.as_millis() as u64,
                cursor,
                options,
            )
            .await;
        match reply {
            Ok(reply) => Ok((self.readable(&reply.claimed).await, reply.next_stream_id)),
            Err(e) if e.to_string().contains("NOGROUP") => {
                self.ensure_group().await?;
                Ok((Vec::new(), "0-0".into()))
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    pub(super) async fn settle(
        &self,
        taken: &TakenJob,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let Receipt::Stream(entry) = &taken.receipt else {
            return Err(StoreError::Corrupt("an outbox job settled on Redis".into()));
        };
        let encode = |job: &DeliveryJob| serde_json::to_string(job).map_err(|e| corrupt("job", e));
        let encode_record = |record: &DeliveryRecord| {
            serde_json::to_string(record).map_err(|e| corrupt("delivery record", e))
        };
        let (outcome, job, due, record, error) = match settlement {
            Settlement::Delivered(record) => ("delivered", String::new(), 0, Some(record), ""),
            Settlement::Retry { job, due, record } => {
                ("retry", encode(job)?, *due, Some(record), "")
            }
            Settlement::Dead { job, record } => (
                "dead",
                encode(job)?,
                0,
                Some(record),
                record.last_error.as_deref().unwrap_or(""),
            ),
            Settlement::Defer { due } => ("defer", encode(&taken.job)?, *due, None, ""),
            Settlement::Dropped(record) => ("dropped", String::new(), 0, record.as_ref(), ""),
        };
        let record = record.map(encode_record).transpose()?.unwrap_or_default();
        let addon = taken.job.addon;
        let mut conn = self.conn.clone();
        let settled: u8 = self
            .scripts
            .settle
            .key(self.keys.deliveries())
            .key(self.keys.delivery_retries())
            .key(self.keys.delivery_dead(addon))
            .key(self.keys.delivery_log(addon))
            .key(self.keys.delivery_recent(addon))
            .key(self.keys.delivery_dead_index(addon))
            .key(self.keys.collection(Collection::Addons))
            .arg(DELIVERY_GROUP)
            .arg(entry)
            .arg(outcome)
            .arg(job)
            .arg(due)
            .arg(record)
            .arg(&taken.job.delivery)
            .arg(taken.job.event)
            .arg(error)
            .arg(rfc3339(Utc::now()))
            .arg(LOG_LENGTH)
            .arg(addon)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(settled == 1)
    }

    pub(super) async fn promote_due(&self, now: i64) -> Result<usize, StoreError> {
        let mut conn = self.conn.clone();
        self.scripts
            .promote
            .key(self.keys.delivery_retries())
            .key(self.keys.deliveries())
            .arg(now)
            .arg(500)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)
    }

    pub(super) async fn records(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let mut conn = self.conn.clone();
        let ids: Vec<String> = conn
            .zrevrange(self.keys.delivery_recent(addon), 0, limit as isize - 1)
            .await
            .map_err(unavailable)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.keys.delivery_log(addon))
            .arg(&ids)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        raw.into_iter()
            .flatten()
            .map(|r| serde_json::from_str(&r).map_err(|e| corrupt("delivery record", e)))
            .collect()
    }

    /// The dead letters of `addon` with their entry ids, oldest first, from entry `start`
    /// (`-`: the first), at most `limit`.
    async fn dead_entries(
        &self,
        addon: u64,
        start: &str,
        limit: usize,
    ) -> Result<Vec<(String, DeadLetter)>, StoreError> {
        let mut conn = self.conn.clone();
        let reply: StreamRangeReply = conn
            .xrange_count(self.keys.delivery_dead(addon), start, "+", limit)
            .await
            .map_err(unavailable)?;
        reply
            .ids
            .iter()
            .map(|entry| {
                let job = job_of_entry(entry)?;
                let error: String = entry.get("error").unwrap_or_default();
                let at: String = entry.get("at").unwrap_or_default();
                let dead_at = DateTime::parse_from_rfc3339(&at)
                    .map_err(|e| corrupt("dead letter time", e))?
                    .with_timezone(&Utc);
                Ok((
                    entry.id.clone(),
                    DeadLetter {
                        job,
                        error,
                        dead_at,
                    },
                ))
            })
            .collect()
    }

    pub(super) async fn dead_letters(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<(Vec<DeadLetter>, u64), StoreError> {
        let letters = self.dead_entries(addon, "-", limit).await?;
        let mut conn = self.conn.clone();
        let total: u64 = conn
            .xlen(self.keys.delivery_dead(addon))
            .await
            .map_err(unavailable)?;
        Ok((letters.into_iter().map(|(_, l)| l).collect(), total))
    }

    /// Runs the redeliver script for `job` (from dead-letter `entry`, or from the log).
    async fn requeue(
        &self,
        entry: Option<&str>,
        job: &DeliveryJob,
        now: DateTime<Utc>,
    ) -> Result<Redelivery, StoreError> {
        let record = DeliveryRecord::queued(job, now);
        let mut conn = self.conn.clone();
        let outcome: i8 = self
            .scripts
            .redeliver
            .key(self.keys.delivery_dead(job.addon))
            .key(self.keys.deliveries())
            .key(self.keys.delivery_log(job.addon))
            .key(self.keys.delivery_recent(job.addon))
            .key(self.keys.delivery_dead_index(job.addon))
            .arg(entry.unwrap_or(""))
            .arg(serde_json::to_string(job).map_err(|e| corrupt("job", e))?)
            .arg(&job.delivery)
            .arg(serde_json::to_string(&record).map_err(|e| corrupt("delivery record", e))?)
            .arg(job.event)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(match outcome {
            1 => Redelivery::Queued,
            0 => Redelivery::Pending,
            _ => Redelivery::Unknown,
        })
    }

    pub(super) async fn redeliver(
        &self,
        addon: u64,
        id: &str,
        now: DateTime<Utc>,
        version: u64,
    ) -> Result<Redelivery, StoreError> {
        let mut conn = self.conn.clone();
        let (entry, raw): (Option<String>, Option<String>) = redis::pipe()
            .hget(self.keys.delivery_dead_index(addon), id)
            .hget(self.keys.delivery_log(addon), id)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if let Some(entry) = entry {
            let letter = self.dead_entries(addon, &entry, 1).await?;
            if let Some((found, letter)) = letter.into_iter().find(|(e, _)| *e == entry) {
                let job = fresh_job(letter.job, true, now, version);
                return self.requeue(Some(&found), &job, now).await;
            }
        }
        let Some(raw) = raw else {
            return Ok(Redelivery::Unknown);
        };
        let record: DeliveryRecord =
            serde_json::from_str(&raw).map_err(|e| corrupt("delivery record", e))?;
        let job = fresh_job(job_of(&record), false, now, version);
        self.requeue(None, &job, now).await
    }

    pub(super) async fn redeliver_dead(
        &self,
        addon: u64,
        now: DateTime<Utc>,
        version: u64,
        max: usize,
    ) -> Result<(usize, u64), StoreError> {
        let mut queued = 0;
        for (entry, letter) in self.dead_entries(addon, "-", max).await? {
            let job = fresh_job(letter.job, true, now, version);
            if self.requeue(Some(&entry), &job, now).await? == Redelivery::Queued {
                queued += 1;
            }
        }
        let mut conn = self.conn.clone();
        let left: u64 = conn
            .xlen(self.keys.delivery_dead(addon))
            .await
            .map_err(unavailable)?;
        Ok((queued, left))
    }

    pub(super) async fn forget(&self, addon: u64) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        conn.del::<_, ()>(&[
            self.keys.delivery_dead(addon),
            self.keys.delivery_dead_index(addon),
            self.keys.delivery_log(addon),
            self.keys.delivery_recent(addon),
        ])
        .await
        .map_err(unavailable)
    }

    pub(super) async fn depth(&self, addons: &[u64]) -> Result<QueueDepth, StoreError> {
        let mut pipe = redis::pipe();
        pipe.xlen(self.keys.deliveries())
            .zcard(self.keys.delivery_retries());
        for addon in addons {
            pipe.xlen(self.keys.delivery_dead(*addon));
        }
        let mut conn = self.conn.clone();
        let counts: Vec<u64> = pipe.query_async(&mut conn).await.map_err(unavailable)?;
        Ok(QueueDepth {
            backlog: counts.iter().take(2).sum(),
            dead: counts.iter().skip(2).sum(),
        })
    }
}
