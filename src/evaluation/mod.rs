//! Server-side evaluation for browsers and mobile: the frontend API's and OFREP's answers and
//! the playground's explanations, all from one engine per environment: Flagpole's compiled
//! evaluator (`compiled`) for every toggle it compiles, `unleash-yggdrasil` for the rest, with
//! yggdrasil's answers either way (at 1,000 toggles and random contexts the compiled path
//! answers 4.4x the requests a second, with about a fifth of the user CPU per answer;
//! docs/performance.md).
//!
//! Engines are built off the request path by one builder task (`Evaluator::run`), from the
//! snapshot, whenever its version moves, for the environments that were asked for so far;
//! an environment whose input did not change keeps the engine it has (see
//! docs/performance.md for what builds cost at 10,000 toggles).
//! Requests read the newest engine through an `ArcSwap` and never wait, except the first
//! request for an environment, which waits for its first build. Once some environment's
//! engine was asked for, writers wait for the engines as they wait for the client documents
//! (`snapshot::followers`): a write is answered once the frontend API and OFREP serve it. A
//! build compiles only the toggles that changed (`EnvironmentEngine::build`), so that wait is
//! short (0.1 ms at 1,000 toggles) — but not at 10,000 toggles (1.2 ms) nor where yggdrasil
//! holds many toggles (it builds them all again): beyond `FOLLOWED_TOGGLES` writers go, and
//! answers follow within a build (builds then at least `UNFOLLOWED_PAUSE` apart).

pub mod compiled;
pub mod context;
pub mod engine;
pub mod frontend;
pub mod ofrep;
pub mod playground;
pub mod volatility;

#[cfg(test)]
mod engine_tests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::domain::config_state::ConfigState;
use crate::snapshot::Snapshot;
pub use context::{ContextError, EvaluationContext};
pub use engine::{EnvironmentEngine, Evaluation, ToggleFacts, UNKNOWN_ENVIRONMENT};

/// Writers wait for the engines while those asked for hold at most this many toggles in all
/// (see `build_all`; 4,000 writes a second instead of 15,000 at 10,000 toggles on two cores,
/// docs/performance.md) ...
const FOLLOWED_TOGGLES: usize = 5_000;
/// ... and yggdrasil holds at most this many of them.
const FOLLOWED_LEFT_TO_YGGDRASIL: usize = 100;

/// Between two rounds of builds that writers do not wait for, at least this long.
const UNFOLLOWED_PAUSE: Duration = Duration::from_millis(10);

/// How long the first request for an environment waits for its engine.
const FIRST_BUILD_WAIT: Duration = Duration::from_secs(10);

/// An environment's engine and the configuration it is current at.
#[derive(Clone)]
struct Built {
    version: u64,
    /// The commit that made `version` (see `ConfigState::head`).
    head: u64,
    engine: Arc<EnvironmentEngine>,
}

/// The engines of one replica.
pub struct Evaluator {
    snapshot: Arc<Snapshot>,
    engines: ArcSwap<HashMap<String, Built>>,
    /// Environments asked for (built on every change from then on).
    wanted: Mutex<HashSet<String>>,
    wake: Notify,
    /// The configuration version every wanted engine is current at.
    settled: watch::Sender<u64>,
    totals: Mutex<BuildTotals>,
}

/// Engine builds so far and their time, since the replica started.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildTotals {
    /// Environment engines built with a new input.
    pub compiled: u64,
    /// Environments whose input was unchanged (the engine answering stays).
    pub unchanged: u64,
    /// Seconds spent building (each build compiles only the toggles that changed).
    pub build_seconds: f64,
}

impl Evaluator {
    /// No engines yet, over `snapshot`.
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot,
            engines: ArcSwap::from_pointee(HashMap::new()),
            wanted: Mutex::new(HashSet::new()),
            wake: Notify::new(),
            settled: watch::Sender::new(0),
            totals: Mutex::new(BuildTotals::default()),
        }
    }

    /// The snapshot the engines are built from.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Builds so far (for metrics and the benchmark).
    pub fn build_totals(&self) -> BuildTotals {
        self.totals.lock().map(|t| *t).unwrap_or_default()
    }

    /// The name an environment's engine is kept under: itself when the registry holds it,
    /// else `UNKNOWN_ENVIRONMENT` (every toggle off, one engine for every such name).
    fn engine_name(state: &ConfigState, environment: &str) -> String {
        if state.environments.contains_key(environment) {
            environment.to_string()
        } else {
            UNKNOWN_ENVIRONMENT.to_string()
        }
    }

    /// The newest engine of `environment`; the first request for an environment waits for
    /// its first build (`None` if it does not come in time).
    pub async fn engine(&self, environment: &str) -> Option<Arc<EnvironmentEngine>> {
        // The hot path: an environment asked for before (a name the registry no longer holds
        // is built as it would be under `UNKNOWN_ENVIRONMENT`: every toggle off).
        if let Some(built) = self.engines.load().get(environment) {
            return Some(built.engine.clone());
        }
        let name = self
            .snapshot
            .peek(|state| Self::engine_name(state, environment));
        if let Some(built) = self.engines.load().get(&name) {
            return Some(built.engine.clone());
        }
        if let Ok(mut wanted) = self.wanted.lock() {
            wanted.insert(name.clone());
        }
        // From now on a write is answered once this replica's engines hold it.
        self.snapshot.followers().engage();
        self.wake.notify_one();
        let wait = async {
            loop {
                let mut settled = self.settled.subscribe();
                if let Some(built) = self.engines.load().get(&name) {
                    return built.engine.clone();
                }
                let _ = settled.changed().await;
            }
        };
        tokio::time::timeout(FIRST_BUILD_WAIT, wait).await.ok()
    }

    /// Builds the engines of every new configuration version until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut versions = self.snapshot.installed();
        loop {
            let state = self.snapshot.state();
            let version = state.version;
            let this = self.clone();
            let built = tokio::task::spawn_blocking(move || this.build_all(&state)).await;
            if let Err(e) = built {
                tracing::error!(error = %e, "the evaluation engine build failed");
                // Writers waiting for this version are answered (the engines stay as they were).
                self.snapshot.followers().reached(version);
            }
            // Writers let go (builds are slow here): coalesce the writes of the next few
            // milliseconds into one build, or the builder would take a core of its own.
            if !self.snapshot.followers().is_engaged() && self.wants_any() {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(UNFOLLOWED_PAUSE) => {}
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = versions.changed() => if changed.is_err() { break },
                _ = self.wake.notified() => {}
            }
        }
        // Nobody builds from here on: writers must not wait for it.
        self.snapshot.followers().disengage();
    }

    /// Whether some environment's engine was asked for.
    fn wants_any(&self) -> bool {
        self.wanted.lock().is_ok_and(|w| !w.is_empty())
    }

    /// Brings every wanted engine to `state` (compiling those whose input changed).
    fn build_all(&self, state: &ConfigState) {
        let wanted: Vec<String> = self
            .wanted
            .lock()
            .map(|w| w.iter().cloned().collect())
            .unwrap_or_default();
        let any_wanted = !wanted.is_empty();
        let current = self.engines.load_full();
        let mut next = HashMap::clone(&current);
        let mut totals = BuildTotals::default();
        for name in wanted {
            // Already built from this very configuration (a version of another history, after
            // the store started over, is built again).
            if current
                .get(&name)
                .is_some_and(|b| b.version == state.version && b.head == state.head)
            {
                continue;
            }
            let started = std::time::Instant::now();
            let previous = current.get(&name).map(|built| &built.engine);
            let engine = match EnvironmentEngine::build(&name, state, previous.map(|e| &**e)) {
                Ok(engine) => engine,
                Err(e) => {
                    tracing::error!(environment = %name, error = %e, "the engine cannot read its input");
                    continue;
                }
            };
            let seconds = started.elapsed().as_secs_f64();
            totals.build_seconds += seconds;
            let unchanged = previous.is_some_and(|p| p.digest == engine.digest);
            if unchanged {
                // The same answers; the new engine is kept all the same, as it shares
                // everything with the old one but holds this state's toggles (the next build
                // then finds them unchanged by pointer, without serialising them).
                totals.unchanged += 1;
            } else {
                let (compiled, left_to_yggdrasil) = engine.compiled_counts();
                totals.compiled += 1;
                tracing::info!(
                    environment = %name,
                    version = state.version,
                    toggles = state.features.len(),
                    build_ms = (seconds * 1e4).round() / 10.0,
                    toggles_compiled = engine.work.compiled,
                    toggles_reused = engine.work.reused,
                    own_compile_ms = (engine.work.compile.as_secs_f64() * 1e4).round() / 10.0,
                    compiled,
                    left_to_yggdrasil,
                    "evaluation engine built"
                );
            }
            let engine = Arc::new(engine);
            next.insert(
                name,
                Built {
                    version: state.version,
                    head: state.head,
                    engine,
                },
            );
        }
        // Writers wait for the engines only where following a write is quick: a one-toggle
        // build costs about 0.1 ms at 1,000 toggles but 1.2 ms at 10,000 (writers would queue
        // behind the builds), and yggdrasil builds all it holds again on any change of one.
        // Elsewhere answers follow a write within one build. (Sizes, not timings: the same
        // configuration is followed on any machine and in any build.)
        let (toggles, left_to_yggdrasil) = next
            .values()
            .map(|built| {
                (
                    built.engine.toggles().len(),
                    built.engine.compiled_counts().1,
                )
            })
            .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        self.engines.store(Arc::new(next));
        if let Ok(mut sum) = self.totals.lock() {
            sum.compiled += totals.compiled;
            sum.unchanged += totals.unchanged;
            sum.build_seconds += totals.build_seconds;
        }
        self.settled.send_modify(|v| *v = (*v).max(state.version));
        let followers = self.snapshot.followers();
        if !any_wanted {
            followers.reached(state.version);
        } else if toggles <= FOLLOWED_TOGGLES && left_to_yggdrasil <= FOLLOWED_LEFT_TO_YGGDRASIL {
            followers.engage();
            followers.reached(state.version);
        } else {
            followers.disengage();
        }
    }
}
