//! `ClientDocuments`: the `GET /api/client/features` responses of a replica, built off the
//! request path by one builder task and published for requests to pick up.
//!
//! Each toggle's client form is hashed once (`piece`); a version reassembles its documents
//! from groups of toggles, re-serialising only the toggles that changed and recompressing
//! their groups and the groups whose dictionary reaches into them (`assemble`). Builds
//! coalesce (`builder`): requests are answered from the newest built document and never wait
//! for a rebuild; only the very first request for a filter waits for
//! that filter's first build, and filters beyond the cache's size are built one at a time.
//!
//! Writers wait instead (`reach`): a write is answered once every document is built from it,
//! so every client request the replica starts afterwards serves it (read-your-writes).

mod assemble;
mod body;
mod builder;
mod form;
mod forms;
mod gzip;
mod piece;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::sync::{watch, Notify, OnceCell};

pub use assemble::{ClientResponse, Effort};
pub use body::DocumentBody;
pub use form::{DocumentForm, FormContext};
pub use forms::ClientDocumentForms;
pub use piece::{ClientPiece, PieceEntry, PieceList};

use crate::domain::filter::FeatureFilter;

/// At most this many filtered documents are kept; odd queries beyond it are built per
/// request rather than grow memory without bound.
const MAX_FILTERED_ENTRIES: usize = 256;
/// How long a request waits for the replica's first build (it comes within milliseconds of
/// the first load; longer means the builder is not running).
const FIRST_BUILD_WAIT: Duration = Duration::from_secs(10);
/// How long a writer waits for the documents to hold its write before it is answered anyway
/// (only a builder that stopped, at shutdown, takes that long).
const REACH_WAIT: Duration = Duration::from_secs(5);
/// A filtered document nobody asked for in this long is dropped instead of rebuilt.
const FILTER_IDLE: Duration = Duration::from_secs(600);

/// The built client documents of one form (see `DocumentForm`) on this replica.
pub struct ClientDocuments {
    /// The environment and segment form of these documents.
    form: DocumentForm,
    /// The pieces of the newest built version.
    pieces: ArcSwapOption<PieceList>,
    /// The unfiltered document of the newest built version.
    unfiltered: ArcSwapOption<ClientResponse>,
    /// Whether the registry held the form's environment at the newest built version (else
    /// its name is served `UNKNOWN_ENVIRONMENT`'s form, see `DocumentForm::requested`).
    environment_registered: AtomicBool,
    filtered: Mutex<HashMap<FeatureFilter, Arc<FilteredDocument>>>,
    /// Wakes the builder: the configuration moved, or a filtered document is behind.
    wake: Notify,
    /// Whether a first version has been built (requests arriving before wait for it).
    built: watch::Sender<bool>,
    /// The version the builder last brought every document up to (a filter's first build
    /// still running may be older: such a document is built again before it is served).
    settled: watch::Sender<u64>,
    /// The newest version a writer waits for; while it is not settled, the builder skips its
    /// coalescing pause.
    wanted: AtomicU64,
    /// Cuts the builder's pause short: a writer started waiting.
    urgent: Notify,
    totals: Mutex<BuildTotals>,
    /// Builds of filters beyond the cache's size, one at a time (each is a whole build).
    uncached_builds: tokio::sync::Semaphore,
    /// What an unfiltered poll of these documents is recorded under (see `recorded_query`).
    recorded: Box<str>,
}

/// How many builds ran and how long they took in all, since the replica started.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildTotals {
    pub builds: u64,
    pub seconds: f64,
}

/// A filtered document, rebuilt by the builder while it is asked for.
struct FilteredDocument {
    document: ArcSwapOption<ClientResponse>,
    first_build: OnceCell<()>,
    /// Milliseconds since `epoch()` of the last request.
    last_requested: AtomicU64,
}

impl FilteredDocument {
    fn touch(&self) {
        let now = since_epoch();
        // Skip the shared write while the stored time is recent enough.
        if now.saturating_sub(self.last_requested.load(Ordering::Relaxed)) > 1_000 {
            self.last_requested.store(now, Ordering::Relaxed);
        }
    }

    fn idle(&self) -> bool {
        since_epoch().saturating_sub(self.last_requested.load(Ordering::Relaxed))
            > FILTER_IDLE.as_millis() as u64
    }
}

fn since_epoch() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Default for ClientDocuments {
    fn default() -> Self {
        Self::new(DocumentForm::default())
    }
}

impl ClientDocuments {
    /// No documents yet, of `form`.
    pub fn new(form: DocumentForm) -> Self {
        Self {
            recorded: form.recorded_query().into_boxed_str(),
            form,
            pieces: ArcSwapOption::empty(),
            unfiltered: ArcSwapOption::empty(),
            environment_registered: AtomicBool::new(false),
            filtered: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            built: watch::Sender::new(false),
            settled: watch::Sender::new(0),
            wanted: AtomicU64::new(0),
            urgent: Notify::new(),
            totals: Mutex::new(BuildTotals::default()),
            uncached_builds: tokio::sync::Semaphore::new(1),
        }
    }

    /// The form of these documents.
    pub fn form(&self) -> &DocumentForm {
        &self.form
    }
}

impl ClientDocuments {
    /// Tells the builder the configuration moved.
    pub fn configuration_moved(&self) {
        self.wake.notify_one();
    }

    /// The newest unfiltered document, if one is built (the hot path: no reference count).
    pub fn unfiltered(&self) -> arc_swap::Guard<Option<Arc<ClientResponse>>> {
        self.unfiltered.load()
    }

    /// Answers from the newest unfiltered document when one is built and the registry held
    /// the form's environment then (the hot path: no state read, no reference count).
    /// `answer` gets the document and what a poll of it is recorded under.
    pub fn answer_unfiltered<R>(
        &self,
        answer: impl FnOnce(&ClientResponse, &str) -> R,
    ) -> Option<R> {
        if !self.environment_registered.load(Ordering::Acquire) {
            return None;
        }
        let built = self.unfiltered.load();
        Some(answer(built.as_deref()?, &self.recorded))
    }

    /// The configuration version of the newest build (0 before the first).
    pub fn built_version(&self) -> u64 {
        self.pieces.load().as_ref().map_or(0, |p| p.version)
    }

    /// The configuration version all documents were last brought up to: the client API
    /// serves this version (or a newer one) until the next build.
    pub fn settled_version(&self) -> u64 {
        *self.settled.borrow()
    }

    /// Waits until every document is built from `version` or a newer one, no newer than
    /// `newest()` (the snapshot's version now), so that every request started afterwards
    /// serves it; the builder starts at once rather than after its pause. Gives up after
    /// `REACH_WAIT` (a stopped builder), saying so in the log.
    ///
    /// The upper bound matters when the store started over (versions begin again at 1): the
    /// documents of the old history are then built from a version above the new one, and
    /// must not count as holding it.
    pub async fn reach(&self, version: u64, newest: &(dyn Fn() -> u64 + Send + Sync)) {
        let holds = |settled: u64| version <= settled && settled <= newest();
        if holds(self.settled_version()) {
            return;
        }
        self.wanted.fetch_max(version, Ordering::AcqRel);
        self.urgent.notify_one();
        let mut settled = self.settled.subscribe();
        let reached = settled.wait_for(|settled| holds(*settled));
        if tokio::time::timeout(REACH_WAIT, reached).await.is_err() {
            tracing::warn!(
                version,
                settled = self.settled_version(),
                "client documents not built in time; answering the write anyway"
            );
        }
    }

    /// Whether a writer waits for a version not built yet.
    fn writer_waiting(&self) -> bool {
        self.wanted.load(Ordering::Acquire) > self.settled_version()
    }

    /// Builds so far and their total time.
    pub fn build_totals(&self) -> BuildTotals {
        self.totals.lock().map_or_else(|p| *p.into_inner(), |t| *t)
    }

    /// The newest document for `filter`. Waits only for the first build of the replica (`None`
    /// when it does not come within `FIRST_BUILD_WAIT`) or of a filter never asked for before;
    /// otherwise answers at once, waking the builder when the document is behind the newest
    /// version.
    pub async fn response(&self, filter: &FeatureFilter) -> Option<Arc<ClientResponse>> {
        let pieces = tokio::time::timeout(FIRST_BUILD_WAIT, self.first_built())
            .await
            .ok()?;
        Some(self.response_from(pieces, filter).await)
    }

    async fn response_from(
        &self,
        pieces: Arc<PieceList>,
        filter: &FeatureFilter,
    ) -> Arc<ClientResponse> {
        if filter.is_empty() {
            if let Some(document) = self.unfiltered.load_full() {
                return document;
            }
        }
        let cached = self.lock_filtered().get(filter).cloned();
        if let Some(entry) = &cached {
            entry.touch();
            if let Some(document) = entry.document.load_full() {
                if document.version != pieces.version {
                    self.wake.notify_one();
                }
                return self.settled_or_newer(entry, filter, document).await;
            }
        }
        // A filter that matches nothing gets the shared empty document and takes no slot, so
        // made-up filters cannot crowd out the ones SDKs really send.
        if !pieces.entries.values().any(|e| filter.matches(&e.toggle)) {
            return no_match();
        }
        let entry = cached.or_else(|| {
            let mut map = self.lock_filtered();
            (map.len() < MAX_FILTERED_ENTRIES || map.contains_key(filter)).then(|| {
                map.entry(filter.clone())
                    .or_insert_with(|| {
                        Arc::new(FilteredDocument {
                            document: ArcSwapOption::empty(),
                            first_build: OnceCell::new(),
                            last_requested: AtomicU64::new(since_epoch()),
                        })
                    })
                    .clone()
            })
        });
        let Some(entry) = entry else {
            // The semaphore is never closed; without a permit the build would still be right.
            let _permit = self.uncached_builds.acquire().await;
            return build_filtered_off_runtime(pieces, filter.clone(), Effort::Full).await;
        };
        entry
            .first_build
            .get_or_init(|| async {
                let document =
                    build_filtered_off_runtime(pieces, filter.clone(), Effort::Full).await;
                // The builder may have stored a newer one meanwhile: keep the newer.
                entry.document.rcu(|current| match current {
                    Some(newer) if newer.version >= document.version => Some(newer.clone()),
                    _ => Some(document.clone()),
                });
                // A build that started before the newest version (the builder skipped this
                // filter while it ran) is brought up to date by the next round.
                if document.version != self.built_version() {
                    self.wake.notify_one();
                }
            })
            .await;
        match entry.document.load_full() {
            Some(document) => self.settled_or_newer(&entry, filter, document).await,
            None => no_match(),
        }
    }

    /// `document`, or when it is older than the settled version (its first build started
    /// before the builder's last round, which skipped it: a write acknowledged since would be
    /// missing), the filter's document built now from the newest pieces.
    async fn settled_or_newer(
        &self,
        entry: &FilteredDocument,
        filter: &FeatureFilter,
        document: Arc<ClientResponse>,
    ) -> Arc<ClientResponse> {
        if document.version >= self.settled_version() {
            return document;
        }
        let Some(pieces) = self.pieces.load_full() else {
            return document;
        };
        // Quick: a request waits for it; the builder compresses it on its next round.
        let fresh = build_filtered_off_runtime(pieces, filter.clone(), Effort::Quick).await;
        entry.document.rcu(|current| match current {
            Some(newer) if newer.version >= fresh.version => Some(newer.clone()),
            _ => Some(fresh.clone()),
        });
        self.wake.notify_one();
        fresh
    }

    /// The pieces of the first built version, waiting for it if need be.
    async fn first_built(&self) -> Arc<PieceList> {
        loop {
            if let Some(pieces) = self.pieces.load_full() {
                return pieces;
            }
            let mut built = self.built.subscribe();
            if self.pieces.load().is_none() {
                // The sender lives as long as `self`: waiting cannot fail.
                let _ = built.wait_for(|built| *built).await;
            }
        }
    }

    fn lock_filtered(&self) -> MutexGuard<'_, HashMap<FeatureFilter, Arc<FilteredDocument>>> {
        match self.filtered.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The document of a filter that matches nothing (an empty toggle list); the same always.
pub fn no_match() -> Arc<ClientResponse> {
    static EMPTY: OnceLock<Arc<ClientResponse>> = OnceLock::new();
    EMPTY
        .get_or_init(|| {
            Arc::new(ClientResponse::assemble(
                std::iter::empty(),
                &FormContext::default(),
                0,
                None,
            ))
        })
        .clone()
}

/// The document of the toggles of `pieces` that `filter` selects.
pub fn build_filtered(
    pieces: &PieceList,
    filter: &FeatureFilter,
    previous: Option<&ClientResponse>,
) -> ClientResponse {
    build_filtered_with(pieces, filter, previous, Effort::Full)
}

/// `build_filtered` with `effort` (see `ClientResponse::assemble_with`). A quick build from
/// the previous version's document visits only the stretches around the changed toggles.
pub fn build_filtered_with(
    pieces: &PieceList,
    filter: &FeatureFilter,
    previous: Option<&ClientResponse>,
    effort: Effort,
) -> ClientResponse {
    match previous {
        Some(previous)
            if effort == Effort::Quick && previous.version == pieces.previous_version =>
        {
            ClientResponse::splice(pieces, filter, previous)
        }
        _ => {
            // A document made from nothing is compressed whole: nobody waits for it.
            let effort = match (effort, previous) {
                (Effort::Gradual, None) => Effort::Full,
                (effort, _) => effort,
            };
            let selected = pieces
                .entries
                .values()
                .filter(|entry| filter.matches(&entry.toggle));
            ClientResponse::assemble_with(selected, &pieces.form, pieces.version, previous, effort)
        }
    }
}

/// A filter's document built from scratch, off the threads that answer requests.
async fn build_filtered_off_runtime(
    pieces: Arc<PieceList>,
    filter: FeatureFilter,
    effort: Effort,
) -> Arc<ClientResponse> {
    // Filtering and compressing thousands of toggles takes milliseconds: keep it off the
    // threads that answer requests.
    let job = {
        let pieces = pieces.clone();
        let filter = filter.clone();
        tokio::task::spawn_blocking(move || build_filtered_with(&pieces, &filter, None, effort))
    };
    match job.await {
        Ok(document) => Arc::new(document),
        Err(e) => {
            tracing::error!(error = %e, "client document build task failed; building inline");
            Arc::new(build_filtered_with(&pieces, &filter, None, effort))
        }
    }
}

#[cfg(test)]
mod form_tests;
#[cfg(test)]
mod tests;
