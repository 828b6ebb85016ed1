//! The per-replica snapshot: the whole configuration in memory, refreshed from the change
//! sets of version announcements or the store's change log, with the client documents built
//! from it.
//!
//! Client reads never touch the store. Writers apply their own commit before answering
//! (read-your-writes); other replicas learn of new versions by pub/sub (which carries small
//! change sets along) and by a periodic version check, and then read from the change log only
//! the change sets they do not have.

pub mod client_document;
mod decode;
pub mod followers;
pub mod refresh_loop;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tracing::Instrument;

use arc_swap::ArcSwap;
use tokio::sync::{watch, Mutex};
use tokio_util::sync::CancellationToken;

pub use client_document::{
    no_match, ClientDocumentForms, ClientDocuments, ClientResponse, DocumentForm,
};

use crate::domain::config_state::ConfigState;
use crate::store::{Change, ChangeSet, Position, Store, StoreError};
use followers::Followers;

/// The replica's view of the configuration.
pub struct Snapshot {
    store: Store,
    current: ArcSwap<ConfigState>,
    client: Arc<ClientDocumentForms>,
    /// Serialises updates so change sets are applied in order, exactly once.
    update: Mutex<()>,
    loaded: AtomicBool,
    /// Whether the current configuration holds segments (then SDKs without
    /// `Unleash-Client-Spec` 4.2.0 get another form: read on the hot path without a load of
    /// the configuration).
    has_segments: AtomicBool,
    /// Moves on whenever the stored API tokens change (see `tokens_generation`).
    tokens_generation: AtomicU64,
    /// Loaded and seeded: requests may be served.
    ready: AtomicBool,
    store_reachable: AtomicBool,
    /// When the snapshot last confirmed it matches the store.
    confirmed: std::sync::Mutex<std::time::Instant>,
    updates: UpdateCounters,
    /// The head of an own commit a check found in the store before its committer installed
    /// it: left to the committer once (see `check`).
    deferred_own_commit: AtomicU64,
    /// The version of each configuration installed, for those who follow it (the streams,
    /// the evaluation engines).
    installed: watch::Sender<u64>,
    /// What writers wait for besides the client documents (the evaluation engines).
    followers: Followers,
}

/// How often the snapshot moved to other replicas' writes, by where it read them.
#[derive(Default)]
struct UpdateCounters {
    announced: AtomicU64,
    change_log: AtomicU64,
    reloads: AtomicU64,
}

/// How many times the snapshot took in other replicas' writes (with its own rebased commits,
/// when the writes under them had to be read), by where it read them, since the replica
/// started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateCounts {
    /// From the change sets version announcements carried (no round trip).
    pub announced: u64,
    /// From the store's change log.
    pub change_log: u64,
    /// By reading every record (first load, a change log that does not reach back).
    pub reloads: u64,
}

impl Snapshot {
    /// An empty, not yet loaded snapshot over `store`.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            current: ArcSwap::from_pointee(ConfigState::default()),
            client: Arc::new(ClientDocumentForms::default()),
            update: Mutex::new(()),
            loaded: AtomicBool::new(false),
            has_segments: AtomicBool::new(false),
            tokens_generation: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            store_reachable: AtomicBool::new(false),
            confirmed: std::sync::Mutex::new(std::time::Instant::now()),
            updates: UpdateCounters::default(),
            deferred_own_commit: AtomicU64::new(0),
            installed: watch::Sender::new(0),
            followers: Followers::default(),
        }
    }

    /// How the snapshot took in writes so far (see `UpdateCounts`).
    pub fn update_counts(&self) -> UpdateCounts {
        let UpdateCounters {
            announced,
            change_log,
            reloads,
        } = &self.updates;
        UpdateCounts {
            announced: announced.load(Ordering::Relaxed),
            change_log: change_log.load(Ordering::Relaxed),
            reloads: reloads.load(Ordering::Relaxed),
        }
    }

    /// The current configuration.
    pub fn state(&self) -> Arc<ConfigState> {
        self.current.load_full()
    }

    /// Reads the current configuration without taking a reference to it (for the hot path:
    /// a reference count every core bumps costs more than the read).
    pub fn peek<R>(&self, read: impl FnOnce(&ConfigState) -> R) -> R {
        read(&self.current.load())
    }

    /// Follows the configuration: changes whenever the snapshot installs a new one (its
    /// version; a reload may install the same version again).
    pub fn installed(&self) -> watch::Receiver<u64> {
        self.installed.subscribe()
    }

    /// The client documents built from the configuration (they may be one build behind it).
    pub fn client(&self) -> &ClientDocumentForms {
        &self.client
    }

    /// The generation of the stored API tokens: it moves on after the snapshot installs
    /// tokens that differ, so tokens read after it are of this generation or a newer one
    /// (what a token checked once may be remembered under: one atomic load, no
    /// configuration).
    pub fn tokens_generation(&self) -> u64 {
        self.tokens_generation.load(Ordering::Acquire)
    }

    /// Whether the current configuration holds segments (one atomic load).
    pub fn has_segments(&self) -> bool {
        self.has_segments.load(Ordering::Acquire)
    }

    /// Waits until the client documents are built from the snapshot's current version, so that
    /// every client request started afterwards serves what the snapshot holds now (a writer
    /// waits for this before it is answered: read-your-writes on the client API).
    pub async fn client_documents_current(&self) {
        let version = self.current.load().version;
        let newest = || self.current.load().version;
        self.client.reach(version, &newest).await;
        self.followers.reach(version, &newest).await;
    }

    /// The builders besides the client documents that writers wait for.
    pub fn followers(&self) -> &Followers {
        &self.followers
    }

    /// Builds the client documents of every new version until `stop`.
    pub async fn run_client_builder(self: Arc<Self>, stop: CancellationToken) {
        let snapshot = self.clone();
        self.client
            .run_builders(Arc::new(move || snapshot.state()), stop)
            .await;
    }

    /// Whether the first load from the store has happened.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Whether requests may be served: loaded, and a new store seeded.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Declares the snapshot ready to serve (after the first load and seeding).
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether the last contact with the store succeeded.
    pub fn store_reachable(&self) -> bool {
        self.store_reachable.load(Ordering::Acquire)
    }

    /// How long ago the snapshot last confirmed it matches the store (its refresh lag).
    pub fn since_confirmed(&self) -> std::time::Duration {
        self.confirmed
            .lock()
            .map_or(std::time::Duration::ZERO, |at| at.elapsed())
    }

    fn note(&self, result: &Result<(), StoreError>) {
        self.store_reachable
            .store(result.is_ok(), Ordering::Release);
        if result.is_ok() {
            if let Ok(mut at) = self.confirmed.lock() {
                *at = std::time::Instant::now();
            }
        }
    }

    /// Brings the snapshot up to the store's current version.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let _guard = self.update.lock().await;
        let result = self.refresh_locked().await;
        self.note(&result);
        result
    }

    /// Brings the snapshot up to at least `target` (a commit this replica made, or one a
    /// version announcement named), unless it holds it already: a refresh running meanwhile
    /// may have brought it, and then this costs no round trip to the store.
    pub async fn refresh_to(&self, target: Position) -> Result<(), StoreError> {
        if self.holds(target) {
            return Ok(());
        }
        let _guard = self.update.lock().await;
        if self.holds(target) {
            return Ok(());
        }
        if self.apply_announced(target) {
            return Ok(());
        }
        let result = self.refresh_locked().await;
        self.note(&result);
        result
    }

    /// Brings the snapshot to `target` from the change sets announcements carried, when they
    /// lead there from the snapshot's position; whether it did. (An announcement is the store's
    /// word that it committed `target`: the snapshot counts as confirmed.)
    fn apply_announced(&self, target: Position) -> bool {
        if !self.is_loaded() {
            return false;
        }
        let current = self.current.load_full();
        match self.announced_state(&current, target) {
            Some(state) => {
                self.install(state);
                self.updates.announced.fetch_add(1, Ordering::Relaxed);
                self.note(&Ok(()));
                true
            }
            None => false,
        }
    }

    /// `current` brought to `target` by the change sets announcements carried, when they lead
    /// there.
    fn announced_state(&self, current: &ConfigState, target: Position) -> Option<ConfigState> {
        let sets = match self.store.announced_changes(position_of(current), target) {
            Some(Ok(sets)) => sets,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "unreadable announcement; reading the change log");
                return None;
            }
            None => return None,
        };
        let _span = tracing::debug_span!(
            "snapshot.refresh",
            from_version = position_of(current).version,
            change_sets = sets.len(),
            source = "announcement"
        )
        .entered();
        with_sets(current, &sets)
            .inspect_err(|e| {
                tracing::warn!(error = %e, "announced changes do not apply; reading the change log")
            })
            .ok()
    }

    /// Whether the snapshot holds the store at `target`: it is there, or past it. Past is
    /// judged by the version alone; should the store have started another history (flushed,
    /// failed over to a lagging replica), the periodic position check finds it.
    pub fn holds(&self, target: Position) -> bool {
        let current = position_of(&self.current.load());
        self.is_loaded() && (current == target || current.version > target.version)
    }

    async fn refresh_locked(&self) -> Result<(), StoreError> {
        let current = self.current.load_full();
        if !self.is_loaded() {
            return self.reload().await;
        }
        let base = position_of(&current);
        let sets = match self.store.changes_since(base).await {
            // A change set this version cannot read (written by a newer one): the records
            // it can read are still in the store.
            Err(StoreError::Corrupt(cause)) => {
                tracing::warn!(%cause, "unreadable change set; reloading everything");
                return self.reload().await;
            }
            other => other?,
        };
        match sets {
            Some(sets) if sets.is_empty() => Ok(()),
            Some(sets) => {
                let _span = tracing::debug_span!(
                    "snapshot.refresh",
                    from_version = base.version,
                    change_sets = sets.len(),
                    source = "change_log"
                )
                .entered();
                self.install(with_sets(&current, &sets)?);
                self.updates.change_log.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            None => {
                tracing::info!(
                    from = ?base,
                    "change log does not reach back; reloading everything"
                );
                self.reload().await
            }
        }
    }

    async fn reload(&self) -> Result<(), StoreError> {
        let records = self
            .store
            .load()
            .instrument(tracing::debug_span!("store.load"))
            .await?;
        let mut state = ConfigState {
            version: records.position.version,
            head: records.position.head,
            ..ConfigState::default()
        };
        for (collection, key, value) in &records.records {
            decode::apply_record(&mut state, *collection, key, Some(value))?;
        }
        let previous = self.current.load_full();
        // Behind the snapshot, or at its version by another commit: a history other than the
        // one served. (Ahead is what a reload is for: a change set too large for the log.)
        let went_back = records.position.version < previous.version
            || (records.position.version == previous.version
                && records.position.head != previous.head);
        if self.is_loaded() && went_back {
            tracing::error!(
                had = ?position_of(&previous),
                store = ?records.position,
                "the store started over or went back (data lost in the store?); serving the store's data"
            );
        }
        self.install(state);
        self.updates.reloads.fetch_add(1, Ordering::Relaxed);
        self.loaded.store(true, Ordering::Release);
        Ok(())
    }

    /// Installs a commit this replica just made: it took the store from `base` to `to`, and
    /// `committed` is the state at `base` with its changes applied (the writer has it already;
    /// decoding the changes again would double the cost of a write). Falls back to a refresh
    /// when the snapshot is not at `base`, unless a refresh already brought it past `to`.
    pub async fn apply_commit(
        &self,
        base: Position,
        to: Position,
        mut committed: ConfigState,
    ) -> Result<(), StoreError> {
        let _guard = self.update.lock().await;
        let current = self.current.load_full();
        if position_of(&current) != base || !self.is_loaded() {
            if self.holds(to) {
                return Ok(());
            }
            let result = self.refresh_locked().await;
            self.note(&result);
            return result;
        }
        committed.version = to.version;
        committed.head = to.head;
        self.install(committed);
        self.store_reachable.store(true, Ordering::Release);
        Ok(())
    }

    /// Installs a commit this replica made on top of writes its state lacks (after a rebase):
    /// the store went from `previous` to `to` by `changes`. Takes the snapshot to `previous`
    /// (with the change sets announcements carried, when it is not there) and applies
    /// `changes`, so it needs neither the commit's own announcement nor a change-log read.
    /// Returns whether the snapshot holds `to` now; the caller refreshes otherwise.
    pub async fn apply_rebased_commit(
        &self,
        previous: Position,
        to: Position,
        changes: &[Change],
    ) -> bool {
        let _guard = self.update.lock().await;
        if self.holds(to) {
            return true;
        }
        if !self.is_loaded() {
            return false;
        }
        let current = self.current.load_full();
        let took_others = position_of(&current) != previous;
        let state = match took_others {
            false => Some((*current).clone()),
            true => self.announced_state(&current, previous),
        };
        let Some(mut state) = state else {
            return false;
        };
        if let Err(e) = apply_changes(&mut state, changes) {
            tracing::warn!(error = %e, "a commit's own changes do not apply; reading the change log");
            return false;
        }
        state.version = to.version;
        state.head = to.head;
        self.install(state);
        if took_others {
            self.updates.announced.fetch_add(1, Ordering::Relaxed);
        }
        self.note(&Ok(()));
        true
    }

    fn install(&self, state: ConfigState) {
        self.has_segments
            .store(!state.segments.is_empty(), Ordering::Release);
        let version = state.version;
        let tokens_changed = !self.current.load().api_tokens.ptr_eq(&state.api_tokens);
        self.current.store(Arc::new(state));
        // After the tokens: see `tokens_generation`.
        if tokens_changed {
            self.tokens_generation.fetch_add(1, Ordering::AcqRel);
        }
        self.client.configuration_moved();
        self.installed.send_replace(version);
    }

    /// A cheap position check, followed by a refresh only when the store moved.
    pub async fn check(&self) -> Result<(), StoreError> {
        let position = self.store.position().await;
        let result = match position {
            Ok(p) if self.is_loaded() && p == position_of(&self.state()) => Ok(()),
            // This replica's own commit, which its committer is installing (the check ran
            // between the store's reply and the install): reading it back would reload
            // everything when its change set was too large for the log, as an import's is.
            // Once: should the committer fail, the next check reads it.
            Ok(p)
                if p.version > self.state().version
                    && self.store.is_own_commit(p.head)
                    && self.deferred_own_commit.swap(p.head, Ordering::Relaxed) != p.head =>
            {
                Ok(())
            }
            // Ahead: perhaps with its announcements already in hand.
            Ok(p) if p.version > self.state().version => return self.refresh_to(p).await,
            Ok(_) => return self.refresh().await,
            Err(e) => Err(e),
        };
        self.note(&result);
        result
    }
}

/// `state` with the change sets `sets` applied in order.
fn with_sets(state: &ConfigState, sets: &[ChangeSet]) -> Result<ConfigState, StoreError> {
    let mut state = state.clone();
    for set in sets {
        apply_changes(&mut state, &set.changes)?;
        state.version = set.version;
        state.head = set.head;
    }
    Ok(state)
}

/// Applies `changes` to `state` in order, as a commit of them would.
pub fn apply_changes(state: &mut ConfigState, changes: &[Change]) -> Result<(), StoreError> {
    changes
        .iter()
        .try_for_each(|change| decode::apply(state, change))
}

/// The store position a state was read at.
pub fn position_of(state: &ConfigState) -> Position {
    Position {
        head: state.head,
        version: state.version,
    }
}
