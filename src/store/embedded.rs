//! Embedded backend: a single-node durable store in one redb file. Every commit is one redb
//! write transaction (records, version, change log and events together), made durable before
//! it returns.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redb::{Builder, Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::delivery::{self, embedded::EmbeddedDeliveries, NewDelivery};
use super::redb_file::{failed, run_blocking, RECORDS};
use super::stream_log::{covering, StreamLogEntry, StreamLogRetention, Touched};
use super::{
    changes_size, decode_event, encode_event, random_id, Change, ChangeSet, Collection,
    CommitCheck, CommitOutcome, Position, Records, StoreError, CHANGE_LOG_LENGTH,
    LOGGED_CHANGES_MAX,
};
use crate::config::DEFAULT_EMBEDDED_CACHE_MIB;
use crate::domain::delivery::{delivery_id, DeliveryJob, DeliveryRecord};
use crate::domain::event::{Event, NewEvent};

/// Named numbers: `version`, `head` (id of the latest commit), `event_seq`.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// version → `LoggedChanges` as JSON (the last `CHANGE_LOG_LENGTH` versions).
const CHANGES: TableDefinition<u64, &str> = TableDefinition::new("changes");
/// event id → JSON event record.
const EVENTS: TableDefinition<u64, &str> = TableDefinition::new("events");
/// version → (epoch ms of the commit, JSON `stream_log::Touched`): the stream log.
const STREAM_LOG: TableDefinition<u64, (u64, &str)> = TableDefinition::new("stream_log");
/// (toggle name, event id) → (): the events about each toggle.
const TOGGLE_EVENTS: TableDefinition<(&str, u64), ()> = TableDefinition::new("toggle_events");

/// How long opening waits for another process to release the database file.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The embedded backend; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    deliveries: EmbeddedDeliveries,
    /// What commits keep of the stream log.
    stream_log: StreamLogRetention,
}

/// One change-log entry: the commit's id and its changes.
#[derive(serde::Serialize, serde::Deserialize)]
struct LoggedChanges<'a> {
    head: u64,
    /// `None` for a change set too large to log (`LOGGED_CHANGES_MAX`).
    changes: Option<Cow<'a, [Change]>>,
}

/// The position recorded in the meta table.
fn read_position(meta: &impl ReadableTable<&'static str, u64>) -> Result<Position, StoreError> {
    let read = |name: &str| -> Result<u64, StoreError> {
        Ok(meta.get(name).map_err(failed)?.map_or(0, |v| v.value()))
    };
    Ok(Position {
        head: read("head")?,
        version: read("version")?,
    })
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `data_dir`. The file is locked by one process at a time;
    /// while another holds it (a predecessor still shutting down) opening is retried for up to
    /// `LOCK_WAIT`.
    pub async fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(data_dir, DEFAULT_EMBEDDED_CACHE_MIB).await
    }

    /// Opens the store like `open`, letting redb cache at most `cache_mib` MiB of the file (the
    /// rest is read from the file, through the kernel's page cache, when needed).
    pub async fn open_with_cache(data_dir: &Path, cache_mib: u32) -> Result<Self, StoreError> {
        let cache_bytes = usize::try_from(u64::from(cache_mib) << 20).unwrap_or(usize::MAX);
        std::fs::create_dir_all(data_dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", data_dir.display())))?;
        let path = data_dir.join("flagpole.redb");
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        let db = loop {
            let attempt = {
                let path = path.clone();
                tokio::task::spawn_blocking(move || {
                    Builder::new().set_cache_size(cache_bytes).create(&path)
                })
                .await
                .map_err(failed)?
            };
            match attempt {
                Ok(db) => break db,
                Err(redb::DatabaseError::DatabaseAlreadyOpen)
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => {
                    return Err(failed(format!("cannot open {}: {e}", path.display())));
                }
            }
        };
        let txn = db.begin_write().map_err(failed)?;
        {
            txn.open_table(RECORDS).map_err(failed)?;
            txn.open_table(META).map_err(failed)?;
            txn.open_table(CHANGES).map_err(failed)?;
            txn.open_table(EVENTS).map_err(failed)?;
            txn.open_table(TOGGLE_EVENTS).map_err(failed)?;
            txn.open_table(STREAM_LOG).map_err(failed)?;
        }
        super::usage::embedded::create_tables(&txn)?;
        super::delivery::embedded::create_tables(&txn)?;
        txn.commit().map_err(failed)?;
        let db = Arc::new(db);
        Ok(Self {
            deliveries: EmbeddedDeliveries::new(db.clone()),
            db,
            stream_log: StreamLogRetention::default(),
        })
    }

    /// This store with commits keeping `retention` of the stream log.
    pub fn with_stream_log_retention(mut self, retention: StreamLogRetention) -> Self {
        self.stream_log = retention;
        self
    }

    pub(super) async fn stream_log(
        &self,
        after: u64,
        upto: u64,
    ) -> Result<Option<Vec<StreamLogEntry>>, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(STREAM_LOG).map_err(failed)?;
            let rows = table.range(after + 1..=upto).map_err(failed)?;
            covering(
                after,
                upto,
                rows.map(|row| {
                    let (version, value) = row.map_err(failed)?;
                    Ok(StreamLogEntry {
                        version: version.value(),
                        touched: Touched::decode(value.value().1)?,
                    })
                }),
            )
        })
        .await
    }

    /// Runs blocking redb work off the async runtime.
    async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    {
        run_blocking(&self.db, work).await
    }

    /// The delivery queue of this backend (same database file).
    pub fn deliveries(&self) -> EmbeddedDeliveries {
        self.deliveries.clone()
    }

    /// The usage side of this backend (same database file).
    pub fn usage(&self) -> super::usage::embedded::EmbeddedUsage {
        super::usage::embedded::EmbeddedUsage::new(self.db.clone())
    }

    pub(super) async fn load(&self) -> Result<Records, StoreError> {
        self.blocking(|db| {
            let txn = db.begin_read().map_err(failed)?;
            let position = read_position(&txn.open_table(META).map_err(failed)?)?;
            let table = txn.open_table(RECORDS).map_err(failed)?;
            let mut records = Vec::new();
            for row in table.iter().map_err(failed)? {
                let (key, value) = row.map_err(failed)?;
                let (collection, key) = key.value();
                let collection = Collection::from_name(collection)
                    .ok_or_else(|| StoreError::Corrupt(format!("collection {collection}")))?;
                records.push((collection, key.to_string(), value.value().to_string()));
            }
            Ok(Records { position, records })
        })
        .await
    }

    pub(super) async fn position(&self) -> Result<Position, StoreError> {
        self.blocking(|db| {
            let txn = db.begin_read().map_err(failed)?;
            read_position(&txn.open_table(META).map_err(failed)?)
        })
        .await
    }

    pub(super) async fn changes_since(
        &self,
        from: Position,
    ) -> Result<Option<Vec<ChangeSet>>, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let current = read_position(&txn.open_table(META).map_err(failed)?)?;
            if current == from {
                return Ok(Some(Vec::new()));
            }
            if current.version < from.version {
                return Ok(None);
            }
            let table = txn.open_table(CHANGES).map_err(failed)?;
            let mut sets = Vec::new();
            let mut last = Position::default();
            // The range starts at `from` itself: its entry proves `from` is in the history.
            for row in table.range(from.version..).map_err(failed)? {
                let (v, raw) = row.map_err(failed)?;
                let logged: LoggedChanges = serde_json::from_str(raw.value())
                    .map_err(|e| StoreError::Corrupt(format!("change set: {e}")))?;
                let position = Position {
                    head: logged.head,
                    version: v.value(),
                };
                if position.version == from.version {
                    if position != from {
                        return Ok(None);
                    }
                } else {
                    if position.version != last.version + 1 {
                        return Ok(None);
                    }
                    // Logged without its changes (too large): reload everything.
                    let Some(changes) = logged.changes else {
                        return Ok(None);
                    };
                    sets.push(ChangeSet {
                        version: position.version,
                        head: position.head,
                        changes: changes.into_owned(),
                    });
                }
                last = position;
            }
            Ok((last == current).then_some(sets))
        })
        .await
    }

    /// Commits when the store is at `check.expected`. One process writes an embedded store, so
    /// nothing is ever committed by a rebase (`CommitCheck::rebase` is not looked at).
    pub(super) async fn commit(
        &self,
        check: &CommitCheck,
        changes: &Arc<[Change]>,
        events: &Arc<[NewEvent]>,
        deliveries: &[NewDelivery],
    ) -> Result<CommitOutcome, StoreError> {
        let head = random_id();
        let logged = serde_json::to_string(&LoggedChanges {
            head,
            changes: (changes_size(changes) <= LOGGED_CHANGES_MAX)
                .then_some(Cow::Borrowed(&changes[..])),
        })
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let touched = Touched::of(changes).encode()?;
        let retention = self.stream_log;
        let changes = changes.clone();
        // Encoded one at a time as they are written, not all beforehand.
        let events = events.clone();
        let deliveries = deliveries.to_vec();
        let queues_jobs = !deliveries.is_empty();
        let expected = check.expected;
        let committed = self
            .blocking(move |db| {
                let txn = db.begin_write().map_err(failed)?;
                let (position, previous);
                {
                    let mut meta = txn.open_table(META).map_err(failed)?;
                    let current = read_position(&meta)?;
                    if Some(current) != expected {
                        return Ok(CommitOutcome::Conflict { current });
                    }
                    let version = current.version + 1;
                    position = Position { head, version };
                    previous = current;
                    meta.insert("version", version).map_err(failed)?;
                    meta.insert("head", head).map_err(failed)?;
                    let mut records = txn.open_table(RECORDS).map_err(failed)?;
                    for change in changes.iter() {
                        let key = (change.collection.as_str(), change.key.as_str());
                        match &change.value {
                            Some(value) => records.insert(key, value.as_str()).map(|_| ()),
                            None => records.remove(key).map(|_| ()),
                        }
                        .map_err(failed)?;
                    }
                    let mut log = txn.open_table(CHANGES).map_err(failed)?;
                    log.insert(version, logged.as_str()).map_err(failed)?;
                    if version > CHANGE_LOG_LENGTH {
                        let cutoff = version - CHANGE_LOG_LENGTH;
                        log.retain_in(..cutoff, |_, _| false).map_err(failed)?;
                    }
                    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
                    append_stream_log(&txn, version, now_ms, &touched, retention)?;
                    let mut seq = meta
                        .get("event_seq")
                        .map_err(failed)?
                        .map_or(0, |v| v.value());
                    let mut table = txn.open_table(EVENTS).map_err(failed)?;
                    let mut index = txn.open_table(TOGGLE_EVENTS).map_err(failed)?;
                    let now = chrono::Utc::now();
                    for (i, new_event) in events.iter().enumerate() {
                        seq += 1;
                        let event = encode_event(new_event)?;
                        let record = format!("{{\"id\":{seq},{}", &event[1..]);
                        table.insert(seq, record.as_str()).map_err(failed)?;
                        if let Some(name) = new_event.toggle_name() {
                            index.insert((name, seq), ()).map_err(failed)?;
                        }
                        let kind = new_event.kind_name();
                        for d in deliveries.iter().filter(|d| d.event == i) {
                            let job = DeliveryJob {
                                delivery: delivery_id(seq, d.addon),
                                event: seq,
                                addon: d.addon,
                                kind: kind.clone(),
                                version,
                                attempts: 0,
                                sent: 0,
                                queued: now.timestamp_millis(),
                                traceparent: d.traceparent.clone(),
                            };
                            let record = DeliveryRecord::queued(&job, now);
                            delivery::embedded::queue(&txn, &job, job.queued, &record)?;
                        }
                    }
                    meta.insert("event_seq", seq).map_err(failed)?;
                }
                txn.commit().map_err(failed)?;
                Ok(CommitOutcome::Committed {
                    position,
                    previous,
                    rebased: false,
                })
            })
            .await;
        if queues_jobs && matches!(committed, Ok(CommitOutcome::Committed { .. })) {
            self.deliveries.wake();
        }
        committed
    }

    pub(super) async fn event(&self, id: u64) -> Result<Option<Event>, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(EVENTS).map_err(failed)?;
            let raw = table.get(id).map_err(failed)?;
            raw.map(|raw| decode_event(raw.value())).transpose()
        })
        .await
    }

    pub(super) async fn events(
        &self,
        limit: usize,
        toggle: Option<&str>,
    ) -> Result<Vec<Event>, StoreError> {
        let toggle = toggle.map(str::to_string);
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(EVENTS).map_err(failed)?;
            let ids: Vec<u64> = match &toggle {
                None => table
                    .iter()
                    .map_err(failed)?
                    .rev()
                    .take(limit)
                    .map(|row| row.map(|(id, _)| id.value()).map_err(failed))
                    .collect::<Result<_, _>>()?,
                Some(name) => txn
                    .open_table(TOGGLE_EVENTS)
                    .map_err(failed)?
                    .range((name.as_str(), 0)..=(name.as_str(), u64::MAX))
                    .map_err(failed)?
                    .rev()
                    .take(limit)
                    .map(|row| row.map(|(key, _)| key.value().1).map_err(failed))
                    .collect::<Result<_, _>>()?,
            };
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(raw) = table.get(id).map_err(failed)? {
                    out.push(decode_event(raw.value())?);
                }
            }
            Ok(out)
        })
        .await
    }
}

/// Appends version `version`'s stream-log entry and trims the log to `retention`.
fn append_stream_log(
    txn: &redb::WriteTransaction,
    version: u64,
    now_ms: u64,
    touched: &str,
    retention: StreamLogRetention,
) -> Result<(), StoreError> {
    let mut log = txn.open_table(STREAM_LOG).map_err(failed)?;
    log.insert(version, (now_ms, touched)).map_err(failed)?;
    let by_length = version.saturating_sub(retention.max_entries.max(1)) + 1;
    let cutoff = now_ms.saturating_sub(u64::try_from(retention.max_age.as_millis()).unwrap_or(0));
    // The first version younger than the age limit, among the oldest few (each commit adds
    // one entry, so trimming a few per commit keeps up).
    let mut by_age = version;
    for row in log.range(..version).map_err(failed)?.take(64) {
        let (v, value) = row.map_err(failed)?;
        if value.value().0 >= cutoff {
            by_age = v.value();
            break;
        }
        by_age = v.value() + 1;
    }
    let keep_from = by_length.max(by_age);
    log.retain_in(..keep_from, |_, _| false).map_err(failed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget reaches redb: 4 MiB written and read back through a 1 MiB cache evict pages
    /// and never hold more than the budget (with redb's 1 GiB default, or 16 MiB, nothing
    /// would be evicted).
    #[tokio::test]
    async fn redb_caches_at_most_the_budget() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = EmbeddedStore::open_with_cache(dir.path(), 1)
            .await
            .expect("open");
        let value = "v".repeat(4096);
        let keys: Vec<String> = (0..1024).map(|i| format!("toggle-{i}")).collect();
        let txn = store.db.begin_write().expect("write");
        {
            let mut table = txn.open_table(RECORDS).expect("table");
            for key in &keys {
                table
                    .insert(("test", key.as_str()), value.as_str())
                    .expect("insert");
            }
        }
        txn.commit().expect("commit");
        let read = store.db.begin_read().expect("read");
        let table = read.open_table(RECORDS).expect("table");
        for key in &keys {
            let stored = table.get(("test", key.as_str())).expect("get");
            assert_eq!(stored.map(|v| v.value().len()), Some(value.len()));
        }
        let stats = store.db.cache_stats();
        assert!(stats.evictions() > 0, "{stats:?}");
        assert!(stats.used_bytes() <= 1 << 20, "{stats:?}");
    }
}
