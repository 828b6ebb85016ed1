//! Server-side evaluation for browsers and mobile: the frontend API's and OFREP's answers and
//! the playground's explanations, all from one engine per environment: Flagpole's compiled
//! evaluator (`compiled`) for every toggle it compiles, `unleash-yggdrasil` for the rest, with
//! yggdrasil's answers either way (at 1,000 toggles and random contexts the compiled path
//! answers 4.4x the requests a second, with about a fifth of the user CPU per answer;
//! docs/performance.md).
//!
//! Engines are built off the request path by one builder task (`Evaluator::run`), from the
//! snapshot, whenever its version moves, for the environments that were asked for so far:
//! each environment's input (its client document with projects) is serialised and hashed, and
//! only an environment whose input changed is compiled again (a whole environment at a time;
//! see docs/performance.md for what that costs at 10,000 toggles).
//! Requests read the newest engine through an `ArcSwap` and never wait, except the first
//! request for an environment, which waits for its first build. Writers do not wait for the
//! engines (a write would wait a whole compile): frontend answers follow a write within one
//! build.

pub mod compiled;
pub mod context;
pub mod engine;
pub mod frontend;
pub mod ofrep;
pub mod playground;
pub mod volatility;

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

/// How long the first request for an environment waits for its engine.
const FIRST_BUILD_WAIT: Duration = Duration::from_secs(10);

/// An environment's engine and the configuration version it is current at.
#[derive(Clone)]
struct Built {
    version: u64,
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
    /// Environments compiled.
    pub compiled: u64,
    /// Environments whose input was unchanged (not compiled again).
    pub unchanged: u64,
    /// Seconds spent compiling.
    pub compile_seconds: f64,
    /// Seconds spent serialising and hashing inputs.
    pub input_seconds: f64,
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

    /// Waits (up to `limit`) until every engine asked for is built from `version` or later.
    pub async fn reach(&self, version: u64, limit: Duration) {
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout(limit, settled.wait_for(|v| *v >= version)).await;
    }

    /// The version every wanted engine is current at, as a watch.
    pub fn settled(&self) -> watch::Receiver<u64> {
        self.settled.subscribe()
    }

    /// Builds the engines of every new configuration version until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut versions = self.snapshot.installed();
        loop {
            let state = self.snapshot.state();
            let this = self.clone();
            let built = tokio::task::spawn_blocking(move || this.build_all(&state)).await;
            if let Err(e) = built {
                tracing::error!(error = %e, "the evaluation engine build failed");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = versions.changed() => if changed.is_err() { return },
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Brings every wanted engine to `state` (compiling those whose input changed).
    fn build_all(&self, state: &ConfigState) {
        let wanted: Vec<String> = self
            .wanted
            .lock()
            .map(|w| w.iter().cloned().collect())
            .unwrap_or_default();
        let current = self.engines.load_full();
        let mut next = HashMap::clone(&current);
        let mut totals = BuildTotals::default();
        for name in wanted {
            if current
                .get(&name)
                .is_some_and(|b| b.version >= state.version)
            {
                continue;
            }
            let started = std::time::Instant::now();
            let input = engine::EngineInput::of(state, &name);
            totals.input_seconds += started.elapsed().as_secs_f64();
            let engine = match current.get(&name) {
                Some(built) if built.engine.digest == input.digest => {
                    totals.unchanged += 1;
                    built.engine.clone()
                }
                _ => {
                    let input_seconds = started.elapsed().as_secs_f64();
                    let input_bytes = input.json.len();
                    match EnvironmentEngine::build(&name, state, input) {
                        Ok(engine) => {
                            let seconds = started.elapsed().as_secs_f64() - input_seconds;
                            let (compiled, left_to_yggdrasil) = engine.compiled_counts();
                            totals.compiled += 1;
                            totals.compile_seconds += seconds;
                            tracing::info!(
                                environment = %name,
                                version = state.version,
                                toggles = state.features.len(),
                                input_bytes,
                                input_ms = (input_seconds * 1000.0).round(),
                                compile_ms = (seconds * 1000.0).round(),
                                own_compile_ms = engine.own_compile.as_secs_f64() * 1000.0,
                                compiled,
                                left_to_yggdrasil,
                                "evaluation engine built"
                            );
                            Arc::new(engine)
                        }
                        Err(e) => {
                            tracing::error!(environment = %name, error = %e, "the engine cannot read its input");
                            continue;
                        }
                    }
                }
            };
            next.insert(
                name,
                Built {
                    version: state.version,
                    engine,
                },
            );
        }
        self.engines.store(Arc::new(next));
        if let Ok(mut sum) = self.totals.lock() {
            sum.compiled += totals.compiled;
            sum.unchanged += totals.unchanged;
            sum.compile_seconds += totals.compile_seconds;
            sum.input_seconds += totals.input_seconds;
        }
        self.settled.send_modify(|v| *v = (*v).max(state.version));
    }
}
