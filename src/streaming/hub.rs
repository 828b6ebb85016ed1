//! `StreamHub`: the streams of one replica, grouped by what they show (`View`), and the task
//! that follows the snapshot and fans each new version out.
//!
//! For each new configuration the hub computes what changed once (`Update`), renders each
//! changed toggle once per environment, encodes one frame per group and hands every stream of
//! the group a reference to it. Streams take frames from small bounded queues: a stream whose
//! queue is full is a slow reader and is ended (its client reconnects with its Last-Event-ID
//! and resumes), so it never holds the others back. The same task sends heartbeats and ends
//! streams at their lifetime and at shutdown.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::events::{hydration_document, replay, Update, View};
use super::frame;
use super::queue::{FrameQueue, PushError};
use crate::domain::config_state::ConfigState;
use crate::snapshot::Snapshot;
use crate::store::stream_log::StreamLogEntry;
use crate::store::Store;
use crate::telemetry::stream_metrics::StreamMetrics;

/// The most versions a resumption replays from the stream log; a client further behind gets a
/// hydration, which costs no more than reading and replaying that many entries.
const REPLAY_MAX_VERSIONS: u64 = 1_000;

/// What the hub allows and how often it acts (from `config::StreamingSettings`).
#[derive(Debug, Clone)]
pub struct StreamLimits {
    /// Whether streams are served at all.
    pub enabled: bool,
    /// Open streams this replica holds at most; more are refused with 429.
    pub max_connections: usize,
    /// Frames a stream may have waiting before it counts as a slow reader.
    pub queue_frames: usize,
    /// Interval of the heartbeat comments.
    pub heartbeat: Duration,
    /// How long a stream lasts at most (each stream up to a fifth less, at random).
    pub max_lifetime: Duration,
    /// The `retry:` delay sent with a stream's last frame, in milliseconds.
    pub reconnect_ms: u64,
    /// How long a version stays resumable (the stream log's age limit, which the hub's memory
    /// of its publications keeps too).
    pub resumable_for: Duration,
}

impl StreamLimits {
    /// The limits the settings ask for.
    pub fn from_settings(settings: &crate::config::StreamingSettings) -> Self {
        Self {
            enabled: settings.enabled,
            max_connections: usize::try_from(settings.streaming_max_connections)
                .unwrap_or(usize::MAX),
            queue_frames: usize::try_from(settings.streaming_queue_frames).unwrap_or(16),
            heartbeat: Duration::from_millis(settings.streaming_heartbeat_ms),
            max_lifetime: Duration::from_millis(settings.streaming_max_lifetime_ms),
            reconnect_ms: settings.streaming_reconnect_ms,
            resumable_for: Duration::from_secs(settings.stream_log_max_age_secs),
        }
    }
}

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Streaming is turned off (`--streaming false`).
    Disabled,
    /// The replica holds `max_connections` streams.
    Full,
    /// The replica is shutting down.
    Stopping,
}

/// The streams of one replica.
pub struct StreamHub {
    snapshot: Arc<Snapshot>,
    store: Store,
    limits: StreamLimits,
    registry: Mutex<Registry>,
    open: AtomicUsize,
    next_id: AtomicU64,
    stopping: AtomicBool,
    metrics: StreamMetrics,
}

/// The groups, and the configuration they were last sent (new streams start from it).
struct Registry {
    published: Arc<ConfigState>,
    groups: HashMap<View, Arc<Group>>,
    /// What the latest publications touched, oldest first: resumptions within it are answered
    /// without reading the store's stream log.
    recent: VecDeque<Publication>,
    /// Whether `published` is a configuration read from the store (the first one the hub
    /// sees is the empty one before the first load: what follows it is no change).
    loaded: bool,
}

/// One publication: from version `from` (exclusive) to `entry.version`, what it touched.
struct Publication {
    from: u64,
    entry: StreamLogEntry,
    at: Instant,
}

/// How many publications the hub remembers.
const RECENT_PUBLICATIONS: usize = 1024;

/// The streams that show one view.
struct Group {
    view: View,
    subscribers: Mutex<HashMap<u64, Subscriber>>,
    /// The view's hydration document at one version, shared by the streams that start then.
    hydration: Mutex<Option<(u64, Bytes)>>,
}

struct Subscriber {
    queue: Arc<FrameQueue>,
    ends_at: Instant,
    /// The SHA-256 of the store token the stream was opened with: the stream ends when that
    /// token is deleted or expires (tokens from the settings and open access never do).
    token: Option<Arc<str>>,
    /// When that token expires.
    token_expires: Option<Instant>,
}

/// Why the hub ends a stream other than for a slow reader or at shutdown (the farewell's
/// comment and the metric's label).
#[derive(Debug, Clone, Copy)]
enum Ending {
    Lifetime,
    TokenRevoked,
}

impl Ending {
    fn reason(self) -> &'static str {
        match self {
            Ending::Lifetime => "lifetime reached",
            Ending::TokenRevoked => "token deleted or expired",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Ending::Lifetime => "lifetime",
            Ending::TokenRevoked => "token",
        }
    }
}

/// What the fan-out does with one stream.
enum Offer {
    /// Queue this frame.
    Frame(Bytes),
    /// Leave it as it is.
    Nothing,
    /// End it after a farewell.
    End(Ending),
}

/// One open stream's membership of its group; leaving happens on drop.
pub struct Subscription {
    hub: Arc<StreamHub>,
    group: Arc<Group>,
    id: u64,
    queue: Arc<FrameQueue>,
    /// The configuration the stream starts from: later frames carry what came after it.
    published: Arc<ConfigState>,
}

impl Subscription {
    /// The stream's queue.
    pub fn queue(&self) -> &FrameQueue {
        &self.queue
    }

    /// The version the stream starts at.
    pub fn version(&self) -> u64 {
        self.published.version
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.queue.close_with(None);
        self.hub.leave(&self.group, self.id);
        self.hub.open.fetch_sub(1, Ordering::AcqRel);
        self.hub.metrics.open.dec();
    }
}

/// When the store token with SHA-256 `hash` expires, as an instant of this process's clock
/// (now when it has already expired).
fn expiry_of(state: &ConfigState, hash: &str) -> Option<Instant> {
    let at = state.api_tokens.get(hash)?.expires_at?;
    let left = (at - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
    Some(Instant::now() + left)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: keep using it.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl StreamHub {
    /// A hub following `snapshot`, resuming streams from `store`'s stream log.
    pub fn new(
        snapshot: Arc<Snapshot>,
        store: Store,
        limits: StreamLimits,
        metrics: StreamMetrics,
    ) -> Arc<Self> {
        let loaded = snapshot.is_loaded();
        Arc::new(Self {
            registry: Mutex::new(Registry {
                published: snapshot.state(),
                groups: HashMap::new(),
                recent: VecDeque::new(),
                loaded,
            }),
            snapshot,
            store,
            limits,
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            metrics,
        })
    }

    /// The hub's limits.
    pub fn limits(&self) -> &StreamLimits {
        &self.limits
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Whether a stream opened now would be accepted as far as the connection cap goes.
    pub fn has_room(&self) -> bool {
        self.open_streams() < self.limits.max_connections
    }

    /// How many groups (distinct views) the open streams form.
    pub fn groups(&self) -> usize {
        lock(&self.registry).groups.len()
    }

    /// Opens a stream of `view`, unless streaming is off, the replica is full or stopping.
    /// `token` is the SHA-256 of the store token the caller was identified by, if any: the
    /// stream ends when it is deleted or expires.
    pub fn subscribe(
        self: &Arc<Self>,
        view: View,
        token: Option<&str>,
    ) -> Result<Subscription, Refusal> {
        if !self.limits.enabled {
            return Err(Refusal::Disabled);
        }
        if self.stopping.load(Ordering::Acquire) {
            return Err(Refusal::Stopping);
        }
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.limits.max_connections {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.metrics.refused.inc();
            return Err(Refusal::Full);
        }
        let queue = Arc::new(FrameQueue::new(self.limits.queue_frames));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut registry = lock(&self.registry);
        // Again under the lock: `run` ends the streams under it once `stopping` is set, and a
        // stream registered after that would never be ended.
        if self.stopping.load(Ordering::Acquire) {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Stopping);
        }
        // Whatever the snapshot holds now is where the stream starts.
        self.advance(&mut registry);
        let group = registry
            .groups
            .entry(view.clone())
            .or_insert_with(|| {
                Arc::new(Group {
                    view,
                    subscribers: Mutex::new(HashMap::new()),
                    hydration: Mutex::new(None),
                })
            })
            .clone();
        let published = registry.published.clone();
        let token = token.map(Arc::<str>::from);
        // A token deleted between the caller's check and now ends the stream at once.
        let token_expires =
            token
                .as_deref()
                .and_then(|hash| match published.api_tokens.contains_key(hash) {
                    true => expiry_of(&published, hash),
                    false => Some(Instant::now()),
                });
        lock(&group.subscribers).insert(
            id,
            Subscriber {
                queue: queue.clone(),
                ends_at: Instant::now() + self.lifetime(),
                token,
                token_expires,
            },
        );
        self.metrics.groups.set(registry.groups.len() as i64);
        drop(registry);
        self.metrics.opened.inc();
        self.metrics.open.inc();
        Ok(Subscription {
            hub: self.clone(),
            group,
            id,
            queue,
            published,
        })
    }

    /// A stream's lifetime: the maximum, less up to a fifth at random, so streams opened
    /// together do not all end together.
    fn lifetime(&self) -> Duration {
        let fraction = (crate::store::random_id() % 1000) as f64 / 5000.0;
        self.limits.max_lifetime.mul_f64(1.0 - fraction)
    }

    fn leave(&self, group: &Arc<Group>, id: u64) {
        let mut registry = lock(&self.registry);
        let mut subscribers = lock(&group.subscribers);
        subscribers.remove(&id);
        if subscribers.is_empty() {
            if let Some(current) = registry.groups.get(&group.view) {
                if Arc::ptr_eq(current, group) {
                    registry.groups.remove(&group.view);
                    self.metrics.groups.set(registry.groups.len() as i64);
                }
            }
        }
    }

    /// The first frame of `subscription`'s stream: `unleash-connected` with a hydration, or,
    /// when `last_event_id` names a version the stream log still covers, the events since.
    /// An id ahead of the configuration, unknown or unreadable gets a hydration.
    pub async fn first_frame(
        &self,
        subscription: &Subscription,
        last_event_id: Option<u64>,
    ) -> Bytes {
        let state = &subscription.published;
        let version = state.version;
        let data = match self
            .catch_up(state, &subscription.group.view, last_event_id)
            .await
        {
            Some(events) => Bytes::from(events),
            None => self.hydration(&subscription.group, state),
        };
        frame::event(frame::CONNECTED, version, &data)
    }

    /// The events a client of `view` at version `last` missed up to `state` (a document,
    /// possibly of no event), when the stream log can tell them: `None` when only a hydration
    /// will do.
    pub async fn catch_up(
        &self,
        state: &ConfigState,
        view: &View,
        last: impl Into<Option<u64>>,
    ) -> Option<Vec<u8>> {
        let last = last.into()?;
        let version = state.version;
        if last == version {
            return Some(br#"{"events":[]}"#.to_vec());
        }
        // Ahead of this replica, or so far behind that reading the log costs more than a
        // hydration (and any client token could ask for it): a hydration.
        if last > version || version - last > REPLAY_MAX_VERSIONS {
            return None;
        }
        if let Some(entries) = self.remembered(last, version) {
            return replay(state, view, &entries);
        }
        match self.store.stream_log(last, version).await {
            Ok(Some(entries)) => replay(state, view, &entries),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "stream log unreadable; the stream starts with a hydration");
                None
            }
        }
    }

    /// The configuration the hub last published (brought up to the snapshot's first).
    pub fn published(&self) -> Arc<ConfigState> {
        let mut registry = lock(&self.registry);
        self.advance(&mut registry);
        registry.published.clone()
    }

    /// What the publications after version `after` up to `upto` touched, when the hub still
    /// remembers all of them (each as one entry, with the version it published).
    fn remembered(&self, after: u64, upto: u64) -> Option<Vec<StreamLogEntry>> {
        let registry = lock(&self.registry);
        let (first, last) = (registry.recent.front()?, registry.recent.back()?);
        if first.from > after || last.entry.version != upto {
            return None;
        }
        // As the stream log, forget versions past their age.
        let missed = registry.recent.iter().find(|p| p.entry.version > after)?;
        if missed.at.elapsed() > self.limits.resumable_for {
            return None;
        }
        Some(
            registry
                .recent
                .iter()
                .filter(|p| p.entry.version > after)
                .map(|p| p.entry.clone())
                .collect(),
        )
    }

    /// The hydration document of `group` at `state`, built once per version.
    fn hydration(&self, group: &Group, state: &ConfigState) -> Bytes {
        let mut cached = lock(&group.hydration);
        if let Some((version, document)) = &*cached {
            if *version == state.version {
                return document.clone();
            }
        }
        let document = Bytes::from(hydration_document(state, &group.view));
        *cached = Some((state.version, document.clone()));
        document
    }

    /// Publishes the snapshot's configuration, if newer than the last published.
    fn advance(&self, registry: &mut Registry) {
        let after = self.snapshot.state();
        let before = registry.published.clone();
        if Arc::ptr_eq(&before, &after) {
            return;
        }
        registry.published = after.clone();
        if after.version < before.version {
            // The store went back (flushed, restored): ids clients hold mean nothing now.
            tracing::warn!(
                from = before.version,
                to = after.version,
                "configuration version went back; ending every stream"
            );
            self.end_streams(registry, "configuration reloaded");
            registry.recent.clear();
            return;
        }
        if !std::mem::replace(&mut registry.loaded, true) {
            return;
        }
        if !before.api_tokens.ptr_eq(&after.api_tokens) {
            self.follow_tokens(registry, &after);
        }
        let mut update = Update::between(before.clone(), after.clone());
        if registry.recent.len() == RECENT_PUBLICATIONS {
            registry.recent.pop_front();
        }
        registry.recent.push_back(Publication {
            at: Instant::now(),
            from: before.version,
            entry: StreamLogEntry {
                version: after.version,
                touched: update.touched(),
            },
        });
        if update.is_empty() {
            return;
        }
        for group in registry.groups.values() {
            let data = match update.events_for(&group.view) {
                None => self.hydration(group, &after),
                Some(list) if list.is_empty() => continue,
                Some(list) => Bytes::from(list.finish()),
            };
            let event = frame::event(frame::UPDATED, after.version, &data);
            self.fan_out(group, |_| Offer::Frame(event.clone()), true);
        }
    }

    /// Offers each stream of `group` what `offer` says; ends the streams whose queue is full.
    fn fan_out(&self, group: &Group, mut offer: impl FnMut(&Subscriber) -> Offer, counted: bool) {
        let mut subscribers = lock(&group.subscribers);
        subscribers.retain(|_, subscriber| match offer(&*subscriber) {
            Offer::Nothing => true,
            Offer::Frame(frame) => match subscriber.queue.push(frame) {
                Ok(()) => {
                    if counted {
                        self.metrics.frames.inc();
                    }
                    true
                }
                Err(PushError::Full) => {
                    self.metrics.ended("slow");
                    subscriber
                        .queue
                        .close_with(Some(frame::farewell("too slow", self.limits.reconnect_ms)));
                    false
                }
                Err(PushError::Closed) => false,
            },
            Offer::End(ending) => {
                self.metrics.ended(ending.label());
                subscriber.queue.close_with(Some(frame::farewell(
                    ending.reason(),
                    self.limits.reconnect_ms,
                )));
                false
            }
        });
    }

    /// Ends the streams past their lifetime or their token's expiry; with `beat`, sends the
    /// others a heartbeat.
    fn sweep(&self, beat: bool) {
        let mut registry = lock(&self.registry);
        self.advance(&mut registry);
        let now = Instant::now();
        let heartbeat = frame::heartbeat();
        for group in registry.groups.values() {
            self.fan_out(
                group,
                |subscriber| {
                    if subscriber.token_expires.is_some_and(|at| at <= now) {
                        Offer::End(Ending::TokenRevoked)
                    } else if subscriber.ends_at <= now {
                        Offer::End(Ending::Lifetime)
                    } else if beat {
                        Offer::Frame(heartbeat.clone())
                    } else {
                        Offer::Nothing
                    }
                },
                false,
            );
        }
    }

    /// After the API tokens changed: ends the streams whose token is gone and follows changes
    /// of the others' expiry.
    fn follow_tokens(&self, registry: &Registry, state: &ConfigState) {
        for group in registry.groups.values() {
            lock(&group.subscribers).retain(|_, subscriber| {
                let Some(hash) = subscriber.token.as_deref() else {
                    return true;
                };
                if state.api_tokens.contains_key(hash) {
                    subscriber.token_expires = expiry_of(state, hash);
                    return true;
                }
                self.metrics.ended(Ending::TokenRevoked.label());
                subscriber.queue.close_with(Some(frame::farewell(
                    Ending::TokenRevoked.reason(),
                    self.limits.reconnect_ms,
                )));
                false
            });
        }
    }

    fn end_streams(&self, registry: &mut Registry, reason: &str) {
        let farewell = frame::farewell(reason, self.limits.reconnect_ms);
        for group in registry.groups.values() {
            for (_, subscriber) in lock(&group.subscribers).drain() {
                subscriber.queue.close_with(Some(farewell.clone()));
                self.metrics.ended("shutdown");
            }
        }
        registry.groups.clear();
        self.metrics.groups.set(0);
    }

    /// Follows the snapshot and fans out each new configuration, sends heartbeats and ends
    /// streams at their lifetime, until `stop`; then ends every stream with a hint to
    /// reconnect (to another replica: this one no longer accepts connections).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut installed = self.snapshot.installed();
        // Lifetimes are checked a few times per lifetime at least, heartbeats sent at their
        // interval.
        let tick = self.limits.heartbeat.min(self.limits.max_lifetime / 5);
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_beat = Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = installed.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    self.advance(&mut lock(&self.registry));
                }
                _ = ticks.tick() => {
                    let beat = last_beat.elapsed() + tick / 2 >= self.limits.heartbeat;
                    if beat {
                        last_beat = Instant::now();
                    }
                    self.sweep(beat);
                }
            }
        }
        self.stopping.store(true, Ordering::Release);
        let mut registry = lock(&self.registry);
        self.end_streams(&mut registry, "shutting down");
    }
}
