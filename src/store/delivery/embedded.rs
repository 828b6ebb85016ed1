//! The delivery queue in the embedded store: an outbox table in the same redb file as the
//! configuration, written in the commit's transaction, ordered by due time. One process uses
//! the file, so a job in flight is simply remembered in memory; after a crash every job in the
//! outbox is due again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    WriteTransaction,
};
use tokio::sync::Notify;

use super::{
    corrupt, fresh_job, job_of, DeadLetter, QueueDepth, Receipt, Redelivery, Settlement, TakenJob,
    LOG_LENGTH,
};
use crate::domain::delivery::{DeliveryJob, DeliveryRecord, DeliveryStatus};
use crate::store::redb_file::{failed, run_blocking, RECORDS};
use crate::store::{Collection, StoreError};

/// (due epoch ms, sequence number) → JSON `DeliveryJob`: jobs waiting or in flight.
const OUTBOX: TableDefinition<(u64, u64), &str> = TableDefinition::new("delivery_outbox");
/// (addon id, sequence number) → JSON `DeadLetter`.
const DEAD: TableDefinition<(u64, u64), &str> = TableDefinition::new("delivery_dead");
/// (addon id, event id) → JSON `DeliveryRecord`: each addon's log, trimmed to `LOG_LENGTH`.
const LOG: TableDefinition<(u64, u64), &str> = TableDefinition::new("delivery_log");
/// `seq` → the last sequence number given to an outbox or dead-letter entry.
const SEQUENCE: TableDefinition<&str, u64> = TableDefinition::new("delivery_sequence");

/// Creates the queue's tables (in the store's opening transaction).
pub(crate) fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(OUTBOX).map_err(failed)?;
    txn.open_table(DEAD).map_err(failed)?;
    txn.open_table(LOG).map_err(failed)?;
    txn.open_table(SEQUENCE).map_err(failed)?;
    Ok(())
}

fn next_seq(txn: &WriteTransaction) -> Result<u64, StoreError> {
    let mut table = txn.open_table(SEQUENCE).map_err(failed)?;
    let seq = table.get("seq").map_err(failed)?.map_or(0, |v| v.value()) + 1;
    table.insert("seq", seq).map_err(failed)?;
    Ok(seq)
}

fn due_key(due: i64) -> u64 {
    u64::try_from(due).unwrap_or(0)
}

/// How long a job given back unsettled waits before it is taken again.
const RELEASE_DELAY: Duration = Duration::from_secs(5);

/// Writes a record into its addon's log; with `trim`, drops the oldest beyond `LOG_LENGTH`
/// (settles trim; queueing does not, so a commit queueing many jobs stays cheap).
fn write_record(
    txn: &WriteTransaction,
    record: &DeliveryRecord,
    trim: bool,
) -> Result<(), StoreError> {
    let raw = serde_json::to_string(record).map_err(|e| corrupt("delivery record", e))?;
    let mut log = txn.open_table(LOG).map_err(failed)?;
    let addon = record.addon_id;
    log.insert((addon, record.event_id), raw.as_str())
        .map_err(failed)?;
    if !trim {
        return Ok(());
    }
    let beyond = log
        .range((addon, 0)..=(addon, u64::MAX))
        .map_err(failed)?
        .rev()
        .nth(LOG_LENGTH)
        .transpose()
        .map_err(failed)?
        .map(|(key, _)| key.value().1);
    if let Some(oldest_kept) = beyond {
        log.retain_in((addon, 0)..=(addon, oldest_kept), |_, _| false)
            .map_err(failed)?;
    }
    Ok(())
}

/// Queues `job`, due at `due`, with its record (in the caller's transaction).
pub(crate) fn queue(
    txn: &WriteTransaction,
    job: &DeliveryJob,
    due: i64,
    record: &DeliveryRecord,
) -> Result<(), StoreError> {
    let seq = next_seq(txn)?;
    let raw = serde_json::to_string(job).map_err(|e| corrupt("job", e))?;
    txn.open_table(OUTBOX)
        .map_err(failed)?
        .insert((due_key(due), seq), raw.as_str())
        .map_err(failed)?;
    write_record(txn, record, false)
}

/// The embedded delivery queue; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedDeliveries {
    db: Arc<Database>,
    /// Outbox entries taken and not yet settled (by sequence number).
    in_flight: Arc<Mutex<HashSet<u64>>>,
    /// Signalled when jobs are queued.
    queued: Arc<Notify>,
}

impl EmbeddedDeliveries {
    /// The queue in `db`.
    pub fn new(db: Arc<Database>) -> Self {
        Self {
            db,
            in_flight: Arc::default(),
            queued: Arc::new(Notify::new()),
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, HashSet<u64>> {
        match self.in_flight.lock() {
            Ok(set) => set,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Wakes a waiting `take`: jobs were queued.
    pub fn wake(&self) {
        self.queued.notify_one();
    }

    /// Due jobs not in flight, at most `max`, marked in flight; and when the next one is due.
    async fn take_due(&self, max: usize) -> Result<(Vec<TakenJob>, Option<u64>), StoreError> {
        let busy: HashSet<u64> = self.in_flight().clone();
        let now = due_key(Utc::now().timestamp_millis());
        let taken_at = std::time::Instant::now();
        let (jobs, next) = run_blocking(&self.db, move |db| {
            let mut jobs = Vec::new();
            let mut next = None;
            let mut unreadable = Vec::new();
            {
                let txn = db.begin_read().map_err(failed)?;
                let table = txn.open_table(OUTBOX).map_err(failed)?;
                for row in table.iter().map_err(failed)? {
                    let (key, raw) = row.map_err(failed)?;
                    let (due, seq) = key.value();
                    if busy.contains(&seq) {
                        continue;
                    }
                    if due > now || jobs.len() >= max {
                        next = Some(due);
                        break;
                    }
                    match serde_json::from_str::<DeliveryJob>(raw.value()) {
                        Ok(job) => jobs.push(TakenJob {
                            job,
                            taken_at,
                            receipt: Receipt::Outbox(due, seq),
                        }),
                        Err(e) => {
                            tracing::error!(seq, error = %e, "an unreadable delivery job was dropped");
                            unreadable.push((due, seq));
                        }
                    }
                }
            }
            // So that it cannot hold up the others for ever.
            if !unreadable.is_empty() {
                let txn = db.begin_write().map_err(failed)?;
                {
                    let mut table = txn.open_table(OUTBOX).map_err(failed)?;
                    for key in unreadable {
                        table.remove(key).map_err(failed)?;
                    }
                }
                txn.commit().map_err(failed)?;
            }
            Ok((jobs, next))
        })
        .await?;
        let mut in_flight = self.in_flight();
        let jobs: Vec<TakenJob> = jobs
            .into_iter()
            .filter(|t| match t.receipt {
                Receipt::Outbox(_, seq) => in_flight.insert(seq),
                Receipt::Stream(_) => false,
            })
            .collect();
        Ok((jobs, next))
    }

    pub(super) async fn take(&self, max: usize) -> Result<Vec<TakenJob>, StoreError> {
        let (jobs, next) = self.take_due(max.max(1)).await?;
        if !jobs.is_empty() {
            return Ok(jobs);
        }
        let now = due_key(Utc::now().timestamp_millis());
        let wait = next.map_or(1000, |due| due.saturating_sub(now).min(1000));
        tokio::select! {
            _ = self.queued.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
        }
        Ok(self.take_due(max.max(1)).await?.0)
    }

    pub(super) async fn settle(
        &self,
        taken: &TakenJob,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let Receipt::Outbox(due, seq) = taken.receipt else {
            return Err(StoreError::Corrupt(
                "a stream job settled in the outbox".into(),
            ));
        };
        let requeued = matches!(
            settlement,
            Settlement::Retry { .. } | Settlement::Defer { .. }
        );
        let settlement = settlement.clone();
        let job = taken.job.clone();
        let settled = run_blocking(&self.db, move |db| {
            let txn = db.begin_write().map_err(failed)?;
            {
                let mut outbox = txn.open_table(OUTBOX).map_err(failed)?;
                if outbox.remove((due, seq)).map_err(failed)?.is_none() {
                    return Ok(false);
                }
                // Nothing of an addon deleted meanwhile is written: the job only leaves.
                let addon = job.addon.to_string();
                let records = txn.open_table(RECORDS).map_err(failed)?;
                let exists = records
                    .get((Collection::Addons.as_str(), addon.as_str()))
                    .map_err(failed)?
                    .is_some();
                drop(records);
                if !exists {
                    drop(outbox);
                    txn.commit().map_err(failed)?;
                    return Ok(true);
                }
                match &settlement {
                    Settlement::Retry { job, due, .. } => {
                        let raw = serde_json::to_string(job).map_err(|e| corrupt("job", e))?;
                        outbox
                            .insert((due_key(*due), seq), raw.as_str())
                            .map_err(failed)?;
                    }
                    Settlement::Defer { due } => {
                        let raw = serde_json::to_string(&job).map_err(|e| corrupt("job", e))?;
                        outbox
                            .insert((due_key(*due), seq), raw.as_str())
                            .map_err(failed)?;
                    }
                    Settlement::Dead { job, record } => {
                        let letter = DeadLetter {
                            job: job.clone(),
                            error: record.last_error.clone().unwrap_or_default(),
                            dead_at: record.updated_at,
                        };
                        let raw = serde_json::to_string(&letter)
                            .map_err(|e| corrupt("dead letter", e))?;
                        txn.open_table(DEAD)
                            .map_err(failed)?
                            .insert((job.addon, seq), raw.as_str())
                            .map_err(failed)?;
                    }
                    Settlement::Delivered(_) | Settlement::Dropped(_) => {}
                }
            }
            let record = match &settlement {
                Settlement::Delivered(r)
                | Settlement::Retry { record: r, .. }
                | Settlement::Dead { record: r, .. } => Some(r),
                Settlement::Dropped(r) => r.as_ref(),
                Settlement::Defer { .. } => None,
            };
            if let Some(record) = record {
                write_record(&txn, record, true)?;
            }
            txn.commit().map_err(failed)?;
            Ok(true)
        })
        .await;
        // Unsettled, it stays in flight: the caller still holds it (it retries, or releases).
        if settled.is_ok() {
            self.in_flight().remove(&seq);
            if requeued {
                // It may be due before the taker's next look.
                self.wake();
            }
        }
        settled
    }

    /// Forgets, after `RELEASE_DELAY`, that a job is in flight: it is taken again then.
    pub(super) fn release(&self, taken: &TakenJob) {
        if let Receipt::Outbox(_, seq) = taken.receipt {
            let in_flight = self.in_flight.clone();
            let queued = self.queued.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RELEASE_DELAY).await;
                match in_flight.lock() {
                    Ok(mut set) => set.remove(&seq),
                    Err(poisoned) => poisoned.into_inner().remove(&seq),
                };
                queued.notify_one();
            });
        }
    }

    pub(super) async fn records(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        run_blocking(&self.db, move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let log = txn.open_table(LOG).map_err(failed)?;
            let rows = log.range((addon, 0)..=(addon, u64::MAX)).map_err(failed)?;
            rows.rev()
                .take(limit)
                .map(|row| {
                    let (_, raw) = row.map_err(failed)?;
                    serde_json::from_str(raw.value()).map_err(|e| corrupt("delivery record", e))
                })
                .collect()
        })
        .await
    }

    pub(super) async fn dead_letters(
        &self,
        addon: u64,
        limit: usize,
    ) -> Result<(Vec<DeadLetter>, u64), StoreError> {
        run_blocking(&self.db, move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let dead = txn.open_table(DEAD).map_err(failed)?;
            let mut letters = Vec::new();
            let mut total = 0;
            for row in dead.range((addon, 0)..=(addon, u64::MAX)).map_err(failed)? {
                let (_, raw) = row.map_err(failed)?;
                total += 1;
                if letters.len() < limit {
                    letters.push(
                        serde_json::from_str(raw.value()).map_err(|e| corrupt("dead letter", e))?,
                    );
                }
            }
            Ok((letters, total))
        })
        .await
    }

    /// Requeues the dead letters of `addon` that `pick` selects (at most `max`), or else
    /// (with `from_log`) the settled delivery `from_log` names; how it went, how many were
    /// queued and how many dead letters are left.
    async fn requeue(
        &self,
        addon: u64,
        pick: impl Fn(&DeliveryJob) -> bool + Send + 'static,
        from_log: Option<String>,
        (now, version, max): (DateTime<Utc>, u64, usize),
    ) -> Result<(Redelivery, usize, u64), StoreError> {
        let outcome = run_blocking(&self.db, move |db| {
            let txn = db.begin_write().map_err(failed)?;
            let mut jobs = Vec::new();
            let left;
            {
                let mut dead = txn.open_table(DEAD).map_err(failed)?;
                let mut picked = Vec::new();
                let mut total = 0u64;
                for row in dead.range((addon, 0)..=(addon, u64::MAX)).map_err(failed)? {
                    let (key, raw) = row.map_err(failed)?;
                    total += 1;
                    if picked.len() >= max {
                        continue;
                    }
                    let letter: DeadLetter =
                        serde_json::from_str(raw.value()).map_err(|e| corrupt("dead letter", e))?;
                    if pick(&letter.job) {
                        picked.push((key.value(), letter.job));
                    }
                }
                left = total - picked.len() as u64;
                for (key, job) in picked {
                    dead.remove(key).map_err(failed)?;
                    jobs.push(fresh_job(job, true, now, version));
                }
            }
            let outcome = match (&from_log, jobs.is_empty()) {
                (Some(id), true) => {
                    let event = id.split('.').next().and_then(|e| e.parse::<u64>().ok());
                    let log = txn.open_table(LOG).map_err(failed)?;
                    let record: Option<DeliveryRecord> = match event {
                        Some(event) => log
                            .get((addon, event))
                            .map_err(failed)?
                            .map(|raw| serde_json::from_str(raw.value()))
                            .transpose()
                            .map_err(|e| corrupt("delivery record", e))?,
                        None => None,
                    };
                    match record.filter(|r| r.id == *id) {
                        None => Redelivery::Unknown,
                        Some(r)
                            if matches!(
                                r.status,
                                DeliveryStatus::Delivered | DeliveryStatus::Dropped
                            ) =>
                        {
                            jobs.push(fresh_job(job_of(&r), false, now, version));
                            Redelivery::Queued
                        }
                        Some(_) => Redelivery::Pending,
                    }
                }
                _ => Redelivery::Queued,
            };
            let queued = jobs.len();
            for job in &jobs {
                queue(
                    &txn,
                    job,
                    now.timestamp_millis(),
                    &DeliveryRecord::queued(job, now),
                )?;
            }
            txn.commit().map_err(failed)?;
            Ok((outcome, queued, left))
        })
        .await?;
        if outcome.1 > 0 {
            self.wake();
        }
        Ok(outcome)
    }

    pub(super) async fn redeliver(
        &self,
        addon: u64,
        id: &str,
        now: DateTime<Utc>,
        version: u64,
    ) -> Result<Redelivery, StoreError> {
        let wanted = id.to_string();
        let pick = move |job: &DeliveryJob| job.delivery == wanted;
        let context = (now, version, usize::MAX);
        Ok(self
            .requeue(addon, pick, Some(id.to_string()), context)
            .await?
            .0)
    }

    pub(super) async fn redeliver_dead(
        &self,
        addon: u64,
        now: DateTime<Utc>,
        version: u64,
        max: usize,
    ) -> Result<(usize, u64), StoreError> {
        let (_, queued, left) = self
            .requeue(addon, |_| true, None, (now, version, max))
            .await?;
        Ok((queued, left))
    }

    pub(super) async fn forget(&self, addon: u64) -> Result<(), StoreError> {
        run_blocking(&self.db, move |db| {
            let txn = db.begin_write().map_err(failed)?;
            {
                let range = (addon, 0)..=(addon, u64::MAX);
                let mut log = txn.open_table(LOG).map_err(failed)?;
                log.retain_in(range.clone(), |_, _| false).map_err(failed)?;
                let mut dead = txn.open_table(DEAD).map_err(failed)?;
                dead.retain_in(range, |_, _| false).map_err(failed)?;
            }
            txn.commit().map_err(failed)
        })
        .await
    }

    pub(super) async fn depth(&self, addons: &[u64]) -> Result<QueueDepth, StoreError> {
        let addons: HashSet<u64> = addons.iter().copied().collect();
        run_blocking(&self.db, move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let backlog = txn
                .open_table(OUTBOX)
                .map_err(failed)?
                .len()
                .map_err(failed)?;
            let dead = txn.open_table(DEAD).map_err(failed)?;
            let mut dead_count = 0;
            for row in dead.iter().map_err(failed)? {
                let (key, _) = row.map_err(failed)?;
                dead_count += u64::from(addons.contains(&key.value().0));
            }
            Ok(QueueDepth {
                backlog,
                dead: dead_count,
            })
        })
        .await
    }
}
