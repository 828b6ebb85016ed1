//! The builder: one task per replica that turns configuration versions into client
//! documents, off the request path, coalescing bursts of versions into a few builds.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{build_filtered_with, ClientDocuments, ClientResponse, Effort, PieceList};
use crate::domain::config_state::ConfigState;
use crate::domain::filter::FeatureFilter;

/// The shortest pause between two builds: a burst of writes within it is one build.
const MIN_GAP: Duration = Duration::from_millis(5);
/// The longest pause between two builds (what a build may add to a write's visibility).
const MAX_GAP: Duration = Duration::from_millis(100);
/// Pause after a build, in multiples of that build's time: the builder takes at most about
/// a ninth of one core however fast versions come (under thousands of writes a second at
/// 10,000 toggles, every build recompresses most groups).
const GAP_FACTOR: u32 = 8;
/// While writers keep waiting, builds are quick (groups stored uncompressed); a compressing
/// build runs at least this often all the same.
const COMPRESS_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

impl ClientDocuments {
    /// Builds documents whenever woken, from the state `current` returns, until `stop`.
    pub async fn run_builder(
        self: Arc<Self>,
        current: impl Fn() -> Arc<ConfigState>,
        stop: CancellationToken,
    ) {
        let mut last: Option<(Instant, Duration)> = None;
        let mut last_compressing = Instant::now();
        loop {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = stop.cancelled() => return,
            }
            // The pause coalesces bursts of versions; a writer waiting for its write to be
            // served cuts it short.
            if let Some((ended, took)) = last {
                let until = (ended + (took * GAP_FACTOR).clamp(MIN_GAP, MAX_GAP)).into();
                // A wake-up left over from a writer a build already answered is no reason
                // to end the pause: only one still waiting is.
                while !self.writer_waiting() {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        _ = self.urgent.notified() => {}
                        _ = stop.cancelled() => return,
                    }
                }
            }
            // A writer waits for this build: store what changed uncompressed, and compress it
            // in later builds, a bounded number of groups each (so writers arriving meanwhile
            // are not held up long).
            let effort = match self.writer_waiting()
                && last_compressing.elapsed() < COMPRESS_AT_LEAST_EVERY
            {
                true => Effort::Quick,
                false => Effort::Gradual,
            };
            let state = current();
            let started = Instant::now();
            let documents = self.clone();
            match tokio::task::spawn_blocking(move || documents.build_with(&state, effort)).await {
                Ok(true) => self.wake.notify_one(),
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "client document build failed"),
            }
            if effort == Effort::Gradual {
                last_compressing = Instant::now();
            }
            let took = started.elapsed();
            if let Ok(mut totals) = self.totals.lock() {
                totals.builds += 1;
                totals.seconds += took.as_secs_f64();
            }
            last = Some((Instant::now(), took));
        }
    }

    /// Brings the documents up to `state`: the pieces and the unfiltered document when the
    /// configuration moved, then every filtered document still asked for that is behind.
    pub fn build(&self, state: &ConfigState) {
        self.build_with(state, Effort::Full);
    }

    /// `build` with `effort`: a full or gradual build also compresses what quick builds
    /// stored (the documents keep their version and ETag). Returns whether a document is left
    /// with groups stored uncompressed.
    pub fn build_with(&self, state: &ConfigState, effort: Effort) -> bool {
        let compressing = effort != Effort::Quick;
        // Whether the unfiltered document was assembled (with `effort`) by this build.
        let mut assembled = false;
        let previous = self.pieces.load_full();
        let pieces = match previous {
            Some(pieces) if pieces.version == state.version && pieces.head == state.head => pieces,
            previous => {
                let pieces = Arc::new(PieceList::update(
                    previous.as_deref().unwrap_or(&PieceList::default()),
                    state,
                    &self.form,
                ));
                let previous_document = self.unfiltered.load_full();
                let document = match previous_document.as_deref() {
                    // Only changes outside the client form: the same bytes, a new version.
                    Some(document)
                        if !pieces.pieces_changed
                            && document.version == pieces.previous_version =>
                    {
                        document.retagged(pieces.version)
                    }
                    previous => {
                        assembled = true;
                        build_filtered_with(&pieces, &FeatureFilter::default(), previous, effort)
                    }
                };
                // The document first: whoever sees the new pieces (or the environment
                // registered again) finds it. A deleted environment has no toggle configured
                // (it cannot be deleted while one is), so its last document is the unknown
                // form's content until the flag follows.
                self.unfiltered.store(Some(Arc::new(document)));
                let registered = state
                    .environments
                    .contains_key(self.form.environment.as_str());
                self.environment_registered
                    .store(registered, Ordering::Release);
                self.pieces.store(Some(pieces.clone()));
                self.built.send_replace(true);
                pieces
            }
        };
        let mut uncompressed = false;
        if let Some(document) = self.unfiltered.load_full() {
            if compressing
                && !assembled
                && document.uncompressed
                && document.version == pieces.version
            {
                let compressed = ClientResponse::assemble_with(
                    pieces.pieces(),
                    &pieces.form,
                    pieces.version,
                    Some(&document),
                    effort,
                );
                uncompressed = compressed.uncompressed;
                self.unfiltered.store(Some(Arc::new(compressed)));
            } else {
                uncompressed = document.uncompressed;
            }
        }
        let behind: Vec<_> = {
            let mut filtered = self.lock_filtered();
            filtered.retain(|_, entry| !entry.idle());
            filtered
                .iter()
                .filter_map(|(filter, entry)| {
                    let document = entry.document.load_full()?;
                    let redo = document.version != pieces.version
                        || (compressing && document.uncompressed);
                    uncompressed |= document.uncompressed && !redo;
                    redo.then(|| (filter.clone(), entry.clone()))
                })
                .collect()
        };
        for (filter, entry) in behind {
            let Some(previous) = entry.document.load_full() else {
                continue;
            };
            // A document one version behind that none of the changed toggles belongs to
            // (before or after the change) is the same bytes under the new version.
            let untouched = previous.version == pieces.previous_version
                && !pieces.changed.iter().any(|(before, after)| {
                    [before, after]
                        .into_iter()
                        .flatten()
                        .any(|toggle| filter.matches(toggle))
                });
            let document = if untouched && !(compressing && previous.uncompressed) {
                previous.retagged(pieces.version)
            } else {
                build_filtered_with(&pieces, &filter, Some(&previous), effort)
            };
            uncompressed |= document.uncompressed;
            entry.document.store(Some(Arc::new(document)));
        }
        self.settled.send_replace(pieces.version);
        uncompressed
    }
}
