//! Redis backend: collections are hashes, commits are one Lua script, new versions are
//! announced on a pub/sub channel (see `keys.rs` for the layout).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::streams::StreamRangeReply;
use redis::{AsyncCommands, ErrorKind, RedisWrite, Script, ServerErrorKind};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::announced::{AnnouncedChanges, ANNOUNCED_CHANGES_MAX};
use super::delivery::{redis::RedisDeliveries, NewDelivery};
use super::keys::Keys;
use super::redis_conn::{Connector, RedisConn, RedisOptions};
use super::stream_log::{covering, StreamLogEntry, StreamLogRetention, Touched};
use super::{
    changes_size, decode_event, encode_event, random_id, Announcement, Change, ChangeSet,
    Collection, CommitCheck, CommitOutcome, Position, Records, StoreError, CHANGE_LOG_LENGTH,
    LOGGED_CHANGES_MAX,
};
use crate::domain::event::{Event, NewEvent};

/// The Redis backend of one installation (one key prefix).
#[derive(Clone)]
pub struct RedisStore {
    connector: Connector,
    conn: RedisConn,
    keys: Arc<Keys>,
    commit_script: Arc<Script>,
    own_commits: Arc<OwnCommits>,
    announced: Arc<AnnouncedChanges>,
    /// What commits keep of the stream log.
    stream_log: StreamLogRetention,
}

/// The ids of this replica's latest commits. Their announcements are not passed on: the
/// committer brings the snapshot to its own commit itself, and an announcement arriving
/// first would read and decode that commit again from the store.
#[derive(Default)]
struct OwnCommits(std::sync::Mutex<([u64; OWN_COMMITS_KEPT], usize)>);

/// More than the commits one replica has in flight at a time (one, plus stragglers).
const OWN_COMMITS_KEPT: usize = 8;

impl OwnCommits {
    fn record(&self, head: u64) {
        if let Ok(mut own) = self.0.lock() {
            let (heads, next) = &mut *own;
            heads[*next] = head;
            *next = (*next + 1) % OWN_COMMITS_KEPT;
        }
    }

    fn contains(&self, head: u64) -> bool {
        self.0.lock().is_ok_and(|own| own.0.contains(&head))
    }
}

fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// Decodes one entry of the audit stream.
fn stream_event(entry: &redis::streams::StreamId) -> Result<Event, StoreError> {
    let raw: String = entry
        .get("event")
        .ok_or_else(|| StoreError::Corrupt("event entry without event".into()))?;
    decode_event(&raw)
}

/// Classifies a failed commit: a request that timed out may still run in Redis; one that
/// could not be sent wrote nothing. (A connection lost between sending and answering is also
/// reported as unavailable: redis-rs does not tell the two apart.)
fn commit_failure(e: redis::RedisError) -> StoreError {
    let text = e.to_string();
    if text.contains("FLAGPOLE_INCONSISTENT") {
        StoreError::Corrupt(text)
    } else if e.is_timeout() {
        StoreError::Uncertain(text)
    } else {
        StoreError::Unavailable(text)
    }
}

/// Classifies a failed commit-and-wait. Unlike `commit_failure`, a connection lost on the way
/// counts as uncertain: in these modes it is usually a failover, which may come after the
/// script ran.
fn wait_failure(e: redis::RedisError) -> StoreError {
    if e.is_connection_dropped() && !e.is_connection_refusal() {
        StoreError::Uncertain(e.to_string())
    } else {
        commit_failure(e)
    }
}

/// The commit script's reply: committed (0/1), version, head, rebased (0/1), the head before.
type CommitReply = (u8, u64, u64, u8, u64);

/// The commit script's rebase terms (`ARGV[11]`, see `commit.lua`): '' for none.
fn rebase_terms(check: &CommitCheck) -> Result<String, StoreError> {
    let Some(rebase) = &check.rebase else {
        return Ok(String::new());
    };
    // Numbers as strings: Lua's numbers cannot hold every 64-bit commit id.
    serde_json::to_string(&serde_json::json!({
        "seen": [rebase.seen.version.to_string(), rebase.seen.head.to_string()],
        "own": rebase.own.iter().map(|p| p.version.to_string()).collect::<Vec<_>>(),
        "own_head": rebase.own.last().map(|p| p.head.to_string()).unwrap_or_default(),
        "toggles": rebase.toggles,
    }))
    .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The commit script (see `commit.lua`).
const COMMIT_SCRIPT: &str = include_str!("commit.lua");

impl RedisStore {
    /// Connects as `options` say (see `redis_conn::Connector::connect`: a standalone Redis
    /// that is down is retried in the background, so the replica starts anyway).
    pub async fn connect(options: &RedisOptions, prefix: &str) -> Result<Self, StoreError> {
        let connector = Connector::connect(options).await?;
        let keys = match options.mode {
            crate::config::RedisMode::Cluster => Keys::for_cluster(prefix),
            _ => Keys::new(prefix),
        };
        Ok(Self {
            conn: connector.conn(),
            connector,
            keys: Arc::new(keys),
            commit_script: Arc::new(Script::new(COMMIT_SCRIPT)),
            own_commits: Arc::default(),
            announced: Arc::default(),
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
        let mut conn = self.conn.clone();
        let reply: StreamRangeReply = conn
            .xrange(
                self.keys.stream_log(),
                format!("{}-0", after + 1),
                format!("{upto}-0"),
            )
            .await
            .map_err(unavailable)?;
        covering(
            after,
            upto,
            reply.ids.iter().map(|entry| {
                let version = entry
                    .id
                    .split('-')
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| StoreError::Corrupt(format!("stream log id {}", entry.id)))?;
                let raw: String = entry.get("touched").ok_or_else(|| {
                    StoreError::Corrupt("stream log entry without touched".into())
                })?;
                Ok(StreamLogEntry {
                    version,
                    touched: Touched::decode(&raw)?,
                })
            }),
        )
    }

    /// The shared rate-limit buckets of this installation.
    pub fn rate_buckets(&self) -> super::rate_limit::SharedBuckets {
        super::rate_limit::SharedBuckets::new(self.conn.clone(), self.keys.clone())
    }

    /// The committer lease of this installation.
    pub fn committer_lease(&self) -> super::committer_lease::CommitterLease {
        super::committer_lease::CommitterLease::new(self.conn.clone(), self.keys.clone())
    }

    /// The delivery queue of this installation.
    pub fn deliveries(&self) -> RedisDeliveries {
        RedisDeliveries::new(self.connector.clone(), self.keys.clone())
    }

    pub(super) async fn event(&self, id: u64) -> Result<Option<Event>, StoreError> {
        let mut conn = self.conn.clone();
        let entry = format!("{id}-0");
        let reply: StreamRangeReply = conn
            .xrange(self.keys.events(), &entry, &entry)
            .await
            .map_err(unavailable)?;
        reply.ids.first().map(stream_event).transpose()
    }

    /// The usage side of this backend (same connection, same key prefix).
    pub fn usage(&self) -> super::usage::redis::RedisUsage {
        super::usage::redis::RedisUsage::new(self.conn.clone(), self.keys.clone())
    }

    pub(super) async fn load(&self) -> Result<Records, StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic().get(self.keys.version()).get(self.keys.head());
        for c in Collection::ALL {
            pipe.hgetall(self.keys.collection(c));
        }
        let mut conn = self.conn.clone();
        let (position, hashes): (Position, Vec<HashMap<String, String>>) = {
            let mut values: Vec<redis::Value> =
                pipe.query_async(&mut conn).await.map_err(unavailable)?;
            if values.len() != Collection::ALL.len() + 2 {
                return Err(StoreError::Corrupt("unexpected reply to load".into()));
            }
            let version: Option<u64> = redis::from_redis_value(values.remove(0))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let head: Option<u64> = redis::from_redis_value(values.remove(0))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let hashes = values
                .into_iter()
                .map(|v| redis::from_redis_value(v).map_err(|e| StoreError::Corrupt(e.to_string())))
                .collect::<Result<_, _>>()?;
            let position = Position {
                head: head.unwrap_or(0),
                version: version.unwrap_or(0),
            };
            (position, hashes)
        };
        let mut records = Vec::new();
        for (c, hash) in Collection::ALL.into_iter().zip(hashes) {
            records.extend(hash.into_iter().map(|(k, v)| (c, k, v)));
        }
        Ok(Records { position, records })
    }

    pub(super) async fn position(&self) -> Result<Position, StoreError> {
        let mut conn = self.conn.clone();
        let (version, head): (Option<u64>, Option<u64>) = conn
            .mget(&[self.keys.version(), self.keys.head()])
            .await
            .map_err(unavailable)?;
        Ok(Position {
            head: head.unwrap_or(0),
            version: version.unwrap_or(0),
        })
    }

    pub(super) async fn changes_since(
        &self,
        from: Position,
    ) -> Result<Option<Vec<ChangeSet>>, StoreError> {
        let mut conn = self.conn.clone();
        // The range starts at `from` itself: its entry proves `from` is in the store's history.
        let start = if from.version == 0 {
            "-".to_string()
        } else {
            format!("{}-0", from.version)
        };
        let (version, head, reply): (Option<u64>, Option<u64>, StreamRangeReply) = redis::pipe()
            .atomic()
            .get(self.keys.version())
            .get(self.keys.head())
            .xrange(self.keys.changes(), start, "+")
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let current = Position {
            head: head.unwrap_or(0),
            version: version.unwrap_or(0),
        };
        if current == from {
            return Ok(Some(Vec::new()));
        }
        if current.version < from.version {
            return Ok(None);
        }
        let mut entries = reply.ids.into_iter().map(|entry| {
            let version = entry
                .id
                .split('-')
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| StoreError::Corrupt(format!("change id {}", entry.id)))?;
            let head: u64 = entry.get("head").unwrap_or(0);
            Ok::<_, StoreError>((version, head, entry))
        });
        if from.version > 0 {
            match entries.next().transpose()? {
                Some((v, h, _)) if v == from.version && h == from.head => {}
                // Trimmed away, or another history with the same version number.
                _ => return Ok(None),
            }
        }
        let mut sets = Vec::new();
        let mut last = from;
        for entry in entries {
            let (version, head, entry) = entry?;
            if version != last.version + 1 {
                return Ok(None);
            }
            let raw: String = entry
                .get("changes")
                .ok_or_else(|| StoreError::Corrupt("change entry without changes".into()))?;
            let changes: Option<Vec<Change>> = serde_json::from_str(&raw)
                .map_err(|e| StoreError::Corrupt(format!("change set: {e}")))?;
            // Logged without its changes (too large): reload everything.
            let Some(changes) = changes else {
                return Ok(None);
            };
            sets.push(ChangeSet {
                version,
                head,
                changes,
            });
            last = Position { head, version };
        }
        // The log must lead exactly to the current position.
        Ok((last == current).then_some(sets))
    }

    pub(super) fn announced_changes(
        &self,
        from: Position,
        to: Position,
    ) -> Option<Result<Vec<ChangeSet>, StoreError>> {
        self.announced.between(from, to)
    }

    pub(super) fn is_own_commit(&self, head: u64) -> bool {
        self.own_commits.contains(head)
    }

    pub(super) async fn commit(
        &self,
        check: &CommitCheck,
        changes: &[Change],
        events: &[NewEvent],
        deliveries: &[NewDelivery],
    ) -> Result<CommitOutcome, StoreError> {
        // Per-toggle index lists and per-addon delivery logs are declared as keys after the
        // collections (KEYS is 1-based: 8 fixed keys, then the collections). A map from key to
        // position: an import writes one index list per toggle, 10,000 of them.
        let mut extra_keys: Vec<String> = Vec::new();
        let mut positions: HashMap<String, usize> = HashMap::new();
        let mut slot_of = |key: String| {
            let position = *positions.entry(key).or_insert_with_key(|key| {
                extra_keys.push(key.clone());
                extra_keys.len() - 1
            });
            8 + Collection::ALL.len() + position + 1
        };
        // Per event: its index list's slot and its deliveries' (addon, log slot, recent slot,
        // traceparent).
        let mut event_slots = Vec::with_capacity(events.len());
        for (i, event) in events.iter().enumerate() {
            let slot = event
                .toggle_name()
                .map_or(0, |name| slot_of(self.keys.toggle_events(name)));
            let jobs: Vec<(String, usize, usize, &str)> = deliveries
                .iter()
                .filter(|d| d.event == i)
                .map(|d| {
                    (
                        d.addon.to_string(),
                        slot_of(self.keys.delivery_log(d.addon)),
                        slot_of(self.keys.delivery_recent(d.addon)),
                        d.traceparent.as_deref().unwrap_or(""),
                    )
                })
                .collect();
            event_slots.push((slot, jobs));
        }
        let mut keys = vec![
            self.keys.version(),
            self.keys.changes(),
            self.keys.events(),
            self.keys.event_seq(),
            self.keys.head(),
            self.keys.deliveries(),
            self.keys.commit_marks(),
            self.keys.stream_log(),
        ];
        keys.extend(Collection::ALL.map(|c| self.keys.collection(c)));
        keys.extend(extra_keys);
        let now = chrono::Utc::now();
        let (expected_version, expected_head) = match check.expected {
            Some(p) => (p.version.to_string(), p.head.to_string()),
            None => ("-1".to_string(), String::new()),
        };
        let head = random_id();
        self.own_commits.record(head);
        // The command is written argument by argument, the change set and the events
        // serialised straight into it: an import's megabytes are held once, not three times.
        let wait = self.connector.wait();
        let mut command = redis::Cmd::new();
        match wait {
            None => command.arg("EVALSHA").arg(self.commit_script.get_hash()),
            // `WAIT` goes in the same pipeline: no second round trip for a missing script.
            Some(_) => command.arg("EVAL").arg(COMMIT_SCRIPT),
        };
        command
            .arg(keys.len())
            .arg(&keys)
            .arg(expected_version)
            .arg(expected_head);
        serde_json::to_writer(command.writer_for_next_arg(), changes)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let log_changes = match changes_size(changes) {
            n if n > LOGGED_CHANGES_MAX => "0",
            n if n > ANNOUNCED_CHANGES_MAX => "1",
            _ => "2",
        };
        command
            .arg(events.len())
            .arg(CHANGE_LOG_LENGTH)
            .arg(self.keys.notify_channel())
            .arg(head)
            .arg(log_changes)
            .arg(now.timestamp_millis())
            .arg(now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .arg(rebase_terms(check)?)
            .arg(Touched::of(changes).encode()?)
            .arg(self.stream_log.max_entries)
            .arg(self.stream_log.max_age.as_millis().to_string());
        // Four arguments per event (see `commit.lua`); the script writes the id before the
        // rest of the document, so each goes without its opening brace.
        for (event, (slot, jobs)) in events.iter().zip(event_slots) {
            let document = encode_event(event)?;
            let Some(rest) = document.strip_prefix('{') else {
                return Err(StoreError::Corrupt("an event is not a JSON object".into()));
            };
            command.arg(rest).arg(slot).arg(event.kind_name());
            match jobs.is_empty() {
                true => command.arg(""),
                false => command.arg(
                    serde_json::to_string(&jobs).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                ),
            };
        }
        command.arg(&Collection::ALL.map(|c| c.as_str())[..]);
        let reply: CommitReply = match wait {
            None => {
                let mut conn = self.conn.clone();
                match command.query_async(&mut conn).await {
                    Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                        self.commit_script
                            .load_async(&mut conn)
                            .await
                            .map_err(commit_failure)?;
                        command.query_async(&mut conn).await
                    }
                    reply => reply,
                }
                .map_err(commit_failure)?
            }
            Some(wait) => self.commit_and_wait(command, wait).await?,
        };
        let (committed, version, head, rebased, previous_head) = reply;
        let position = Position { head, version };
        Ok(if committed == 1 {
            CommitOutcome::Committed {
                position,
                previous: Position {
                    head: previous_head,
                    version: version.saturating_sub(1),
                },
                rebased: rebased == 1,
            }
        } else {
            CommitOutcome::Conflict { current: position }
        })
    }

    /// Runs the commit script and `WAIT` in one pipeline on one connection, so the WAIT
    /// counts the replicas that hold this very write (in cluster mode the pipeline goes to
    /// the master of the configuration slot, routed by the script's first key). A commit
    /// that fewer replicas confirm in time is uncertain: a failover could still lose it.
    async fn commit_and_wait(
        &self,
        command: redis::Cmd,
        (replicas, timeout): (u32, Duration),
    ) -> Result<CommitReply, StoreError> {
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        pipe.add_command(command)
            .cmd("WAIT")
            .arg(replicas)
            .arg(timeout_ms);
        let mut conn = self.conn.clone();
        let (reply, confirmed): (CommitReply, u32) =
            pipe.query_async(&mut conn).await.map_err(wait_failure)?;
        if reply.0 == 1 && confirmed < replicas {
            return Err(StoreError::Uncertain(format!(
                "{confirmed} of {replicas} Redis replicas confirmed the commit within {timeout_ms} ms"
            )));
        }
        Ok(reply)
    }

    pub(super) async fn events(
        &self,
        limit: usize,
        toggle: Option<&str>,
    ) -> Result<Vec<Event>, StoreError> {
        let mut conn = self.conn.clone();
        let Some(name) = toggle else {
            let reply: StreamRangeReply = conn
                .xrevrange_count(self.keys.events(), "+", "-", limit)
                .await
                .map_err(unavailable)?;
            return reply.ids.iter().map(stream_event).collect();
        };
        // The toggle's index holds its event ids, oldest first.
        let ids: Vec<u64> = conn
            .lrange(self.keys.toggle_events(name), -(limit as isize), -1)
            .await
            .map_err(unavailable)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids.iter().rev() {
            pipe.xrange(self.keys.events(), format!("{id}-0"), format!("{id}-0"));
        }
        let replies: Vec<StreamRangeReply> =
            pipe.query_async(&mut conn).await.map_err(unavailable)?;
        replies
            .iter()
            .flat_map(|reply| reply.ids.iter())
            .map(stream_event)
            .collect()
    }

    /// Listens for version announcements and hands each to `announce` (but those of this
    /// replica's own commits), reconnecting after failures until `shutdown`.
    pub async fn listen_for_versions(
        &self,
        announce: watch::Sender<Announcement>,
        shutdown: CancellationToken,
    ) {
        let channel = self.keys.notify_channel();
        let mut failures = 0u32;
        // Sentinel mode: a session on a demoted master is moved to the new one.
        let mut switches = self.connector.master_switches();
        loop {
            let session = async {
                let mut pubsub = self.connector.pubsub().await?;
                pubsub.subscribe(&channel).await?;
                failures = 0;
                // A reconnect may have missed announcements: ask for a check right away.
                self.announced.clear();
                announce.send_replace(Announcement::Unknown);
                let mut messages = pubsub.on_message();
                let switched = async {
                    match switches.as_mut() {
                        Some(switches) => {
                            let _ = switches.changed().await;
                        }
                        None => std::future::pending().await,
                    }
                };
                tokio::pin!(switched);
                loop {
                    tokio::select! {
                        message = messages.next() => match message {
                            Some(message) => {
                                let payload: String = message.get_payload().unwrap_or_default();
                                // This replica's own commits too: one rebased onto other
                                // replicas' writes may be caught up from here (when this
                                // arrives before the commit's reply).
                                self.announced.record(&payload);
                                match Announcement::parse(&payload) {
                                    Announcement::At(position)
                                        if self.own_commits.contains(position.head) => {}
                                    announced => {
                                        announce.send_replace(announced);
                                    }
                                }
                            }
                            None => break,
                        },
                        _ = &mut switched => break,
                    }
                }
                Ok::<(), redis::RedisError>(())
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = session => {
                    // Logged once per outage; the periodic version check covers the gap.
                    if let Err(e) = result {
                        if failures == 0 {
                            tracing::warn!(error = %e, "version subscription failed; retrying");
                        }
                        failures += 1;
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
