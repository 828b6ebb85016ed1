//! The store interface: one enum over two backends, Redis (many replicas) and embedded
//! (single node, redb). Backends are thin: they persist records, apply a change set
//! atomically under an optimistic version check, keep a change log and the audit log.
//! Domain rules live above, in `service/`.

pub mod announced;
pub mod committer_lease;
pub mod delivery;
pub mod embedded;
pub mod keys;
pub mod rate_limit;
mod redb_file;
pub mod redis;
pub mod redis_conn;
pub mod stream_log;
pub mod usage;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::domain::event::{Event, NewEvent};
use delivery::{DeliveryQueue, NewDelivery};

/// A named set of records (one Redis hash, one slice of the embedded table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collection {
    Features,
    Archive,
    Strategies,
    TagTypes,
    Tags,
    Projects,
    ContextFields,
    Addons,
    ApiTokens,
    Environments,
    Segments,
    Counters,
}

impl Collection {
    /// Every collection, in a fixed order.
    pub const ALL: [Collection; 12] = [
        Collection::Features,
        Collection::Archive,
        Collection::Strategies,
        Collection::TagTypes,
        Collection::Tags,
        Collection::Projects,
        Collection::ContextFields,
        Collection::Addons,
        Collection::ApiTokens,
        Collection::Environments,
        Collection::Segments,
        Collection::Counters,
    ];

    /// The collection's stable name (used in keys and change logs).
    pub fn as_str(self) -> &'static str {
        match self {
            Collection::Features => "features",
            Collection::Archive => "archive",
            Collection::Strategies => "strategies",
            Collection::TagTypes => "tag_types",
            Collection::Tags => "tags",
            Collection::Projects => "projects",
            Collection::ContextFields => "context_fields",
            Collection::Addons => "addons",
            Collection::ApiTokens => "api_tokens",
            Collection::Environments => "environments",
            Collection::Segments => "segments",
            Collection::Counters => "counters",
        }
    }

    /// The collection with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// One record written or deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    #[serde(rename = "c")]
    pub collection: Collection,
    #[serde(rename = "k")]
    pub key: String,
    /// The record's JSON document; `None` deletes it.
    #[serde(rename = "v")]
    pub value: Option<String>,
}

/// Where a store stands: its version and the random id of the commit that made it (`head`).
/// Version numbers alone can repeat with other content (a flushed store, a failover to a
/// lagging Redis replica, a restored dump); the commit id tells such histories apart, so a
/// replica reloads instead of applying change sets to content the store no longer has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    /// Id of the commit that made `version`; 0 for a store never written.
    pub head: u64,
    pub version: u64,
}

/// A random, non-zero 64-bit number (commit ids, retry jitter).
pub(crate) fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.finish().max(1)
}

/// What the last version announcement said (Redis pub/sub, one per commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announcement {
    /// Some announcement may have been missed (a reconnect), or one could not be read (a
    /// replica of an older release announces the version alone): check the store.
    Unknown,
    /// A commit took the store to this position.
    At(Position),
}

impl Announcement {
    /// Reads an announcement's payload: `<version> <head>`, possibly followed by the previous
    /// head and the changes (see `announced`).
    pub fn parse(payload: &str) -> Self {
        let mut fields = payload.splitn(3, ' ').map(str::parse::<u64>);
        match (fields.next(), fields.next()) {
            (Some(Ok(version)), Some(Ok(head))) => Announcement::At(Position { head, version }),
            _ => Announcement::Unknown,
        }
    }
}

/// The changes one committed version made.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeSet {
    pub version: u64,
    /// Id of the commit (see `Position`).
    pub head: u64,
    pub changes: Vec<Change>,
}

/// Every record at one position.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub position: Position,
    pub records: Vec<(Collection, String, String)>,
}

/// What a commit is checked against before it writes anything.
#[derive(Debug, Clone)]
pub struct CommitCheck {
    /// Commit if the store is exactly here (the writes were decided on the store's state at
    /// this position). `None`: only `rebase` can let the commit through.
    pub expected: Option<Position>,
    /// Otherwise, commit on top of whatever other replicas wrote since, on these terms.
    pub rebase: Option<Rebase>,
}

/// Terms on which writes are committed on top of other replicas' writes made after they were
/// decided: the writes read, of the toggle records, only those of `toggles`, and any records
/// of other collections. They come out the same, and may be committed, if since `seen` no
/// other replica wrote a record of `toggles` nor any record of another collection. The Redis
/// store checks this inside its commit script; the embedded store, with a single writer,
/// never needs to and refuses.
#[derive(Debug, Clone)]
pub struct Rebase {
    /// The writes were decided on a state holding every write up to this position (or one
    /// that agrees with such a state on everything they read)...
    pub seen: Position,
    /// ...and this replica's own commits since, oldest first (at most `REBASE_OWN_MAX`).
    pub own: Vec<Position>,
    /// The toggles (active or archived) whose records the writes read and write.
    pub toggles: Vec<String>,
}

/// The most own commits a `Rebase` may list (bounds the commit script's checks).
pub const REBASE_OWN_MAX: usize = 64;

/// How a commit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Written; the store is now at `position` and was at `previous` just before. Unless
    /// `rebased`, `previous` is the expected position; `rebased`: committed on top of other
    /// replicas' writes (see `Rebase`), which the writing replica's state does not hold yet.
    /// (A batch that writes nothing is confirmed with `previous == position`.)
    Committed {
        position: Position,
        previous: Position,
        rebased: bool,
    },
    /// The store was not at the expected position; nothing was written.
    Conflict { current: Position },
}

/// Failures of the store itself (never of the caller's input).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The backing store cannot be reached or answered with an error.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A write was sent but not confirmed (timeout, connection lost mid-request): it may or
    /// may not have been applied.
    #[error("store did not confirm the write: {0}")]
    Uncertain(String),
    /// Stored data is undecodable or inconsistent.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// Which backend a replica runs on.
#[derive(Clone)]
pub enum Store {
    Redis(redis::RedisStore),
    Embedded(embedded::EmbeddedStore),
}

impl Store {
    /// Every record and the version they belong to, read atomically.
    pub async fn load(&self) -> Result<Records, StoreError> {
        match self {
            Store::Redis(s) => s.load().await,
            Store::Embedded(s) => s.load().await,
        }
    }

    /// The current position.
    pub async fn position(&self) -> Result<Position, StoreError> {
        match self {
            Store::Redis(s) => s.position().await,
            Store::Embedded(s) => s.position().await,
        }
    }

    /// The change sets after `from`, oldest first; `None` when the log no longer reaches back
    /// that far or `from` is not part of the store's history (the caller reloads everything).
    pub async fn changes_since(
        &self,
        from: Position,
    ) -> Result<Option<Vec<ChangeSet>>, StoreError> {
        match self {
            Store::Redis(s) => s.changes_since(from).await,
            Store::Embedded(s) => s.changes_since(from).await,
        }
    }

    /// The change sets from `from` to `to` that version announcements carried, without asking
    /// the store; `None` when they are not all at hand (see `announced`).
    pub fn announced_changes(
        &self,
        from: Position,
        to: Position,
    ) -> Option<Result<Vec<ChangeSet>, StoreError>> {
        match self {
            Store::Redis(s) => s.announced_changes(from, to),
            Store::Embedded(_) => None,
        }
    }

    /// Whether `head` is one of this replica's latest commits (its committer brings the
    /// snapshot there itself).
    pub fn is_own_commit(&self, head: u64) -> bool {
        match self {
            Store::Redis(s) => s.is_own_commit(head),
            Store::Embedded(_) => false,
        }
    }

    /// Applies `changes`, bumps the version, logs the change set and what it touched (the stream
    /// log), appends `events` and queues their `deliveries`, all in one atomic step, provided
    /// `check` passes. The changes and events are shared, not copied: an import's are tens of
    /// megabytes, and the embedded store writes them on a blocking thread.
    pub async fn commit(
        &self,
        check: &CommitCheck,
        changes: &Arc<[Change]>,
        events: &Arc<[NewEvent]>,
        deliveries: &[NewDelivery],
    ) -> Result<CommitOutcome, StoreError> {
        match self {
            Store::Redis(s) => s.commit(check, changes, events, deliveries).await,
            Store::Embedded(s) => s.commit(check, changes, events, deliveries).await,
        }
    }

    /// The stream-log entries of versions `after + 1 ..= upto`, oldest first; `None` when the
    /// log does not reach back that far (see `stream_log`).
    pub async fn stream_log(
        &self,
        after: u64,
        upto: u64,
    ) -> Result<Option<Vec<stream_log::StreamLogEntry>>, StoreError> {
        if after >= upto {
            return Ok(Some(Vec::new()));
        }
        match self {
            Store::Redis(s) => s.stream_log(after, upto).await,
            Store::Embedded(s) => s.stream_log(after, upto).await,
        }
    }

    /// The store with commits keeping `retention` of the stream log.
    pub fn with_stream_log_retention(self, retention: stream_log::StreamLogRetention) -> Self {
        match self {
            Store::Redis(s) => Store::Redis(s.with_stream_log_retention(retention)),
            Store::Embedded(s) => Store::Embedded(s.with_stream_log_retention(retention)),
        }
    }

    /// The recorded event `id`, if any.
    pub async fn event(&self, id: u64) -> Result<Option<Event>, StoreError> {
        match self {
            Store::Redis(s) => s.event(id).await,
            Store::Embedded(s) => s.event(id).await,
        }
    }

    /// The addon delivery queue.
    pub fn deliveries(&self) -> DeliveryQueue {
        match self {
            Store::Redis(s) => DeliveryQueue::Redis(s.deliveries()),
            Store::Embedded(s) => DeliveryQueue::Embedded(s.deliveries()),
        }
    }

    /// Recorded events, newest first: at most `limit`, only those about `toggle` if given.
    pub async fn events(
        &self,
        limit: usize,
        toggle: Option<&str>,
    ) -> Result<Vec<Event>, StoreError> {
        match self {
            Store::Redis(s) => s.events(limit, toggle).await,
            Store::Embedded(s) => s.events(limit, toggle).await,
        }
    }

    /// A short name of the backend for logs and `/health`.
    pub fn backend_name(&self) -> &'static str {
        match self {
            Store::Redis(_) => "redis",
            Store::Embedded(_) => "embedded",
        }
    }
}

/// How many change sets the log keeps; a replica further behind reloads everything.
pub const CHANGE_LOG_LENGTH: u64 = 1000;

/// A change set whose JSON is larger than this (a large import) is logged without its
/// changes, and replicas that meet it reload everything: the change log is bounded by
/// entries, and entries of several MiB each would make it unbounded in bytes.
pub const LOGGED_CHANGES_MAX: usize = 256 << 10;

/// The bytes of a change set's keys and records, which decide whether it is logged (its JSON
/// is a little larger): known before anything is serialised, and an import's set is megabytes.
pub(crate) fn changes_size(changes: &[Change]) -> usize {
    changes
        .iter()
        .map(|c| c.key.len() + c.value.as_ref().map_or(0, String::len))
        .sum()
}

/// Serialises an event for storage, without its id (the store assigns it).
pub(crate) fn encode_event(event: &NewEvent) -> Result<String, StoreError> {
    serde_json::to_string(event).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Decodes a stored event document.
pub(crate) fn decode_event(raw: &str) -> Result<Event, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("event: {e}")))
}

#[cfg(test)]
mod tests {
    use super::{Announcement, Position};

    #[test]
    fn announcements_name_a_position_or_ask_for_a_check() {
        assert_eq!(
            Announcement::parse("42 1234567890123"),
            Announcement::At(Position {
                version: 42,
                head: 1234567890123
            })
        );
        // With the previous head, and with the changes.
        for payload in ["42 7 6", "42 7 6 [{\"c\":\"features\"}]"] {
            assert_eq!(
                Announcement::parse(payload),
                Announcement::At(Position {
                    version: 42,
                    head: 7
                })
            );
        }
        // An older release announces the version alone; anything unreadable asks for a check.
        for payload in ["42", "", "42 x", "42 x 2", "-1 3", "42  7"] {
            assert_eq!(
                Announcement::parse(payload),
                Announcement::Unknown,
                "{payload:?}"
            );
        }
    }
}
