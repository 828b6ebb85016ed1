//! `EnvironmentEngine`: one environment's toggles compiled by Flagpole's own evaluator
//! (`compiled`), with `unleash-yggdrasil` for the toggles it leaves alone, and what the
//! answers need to know of each toggle without evaluating it (project, impression data,
//! whether its variants carry payloads, whether it is a plain rollout).
//!
//! The engine is fed the same client form of each toggle the client API serves
//! (`ClientToggle`, segments by reference), plus the toggle's project, so that it evaluates
//! exactly what an SDK polling that environment would.

use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};
use unleash_types::client_features::{ClientFeature, ClientFeatures, Context, Payload, Segment};
use unleash_yggdrasil::{EngineState, ExtendedVariantDef};

use crate::domain::config_state::ConfigState;
use crate::domain::toggle::Toggle;
use crate::domain::views::{ClientSegment, ClientToggle, SegmentForm};

use super::compiled::{
    drop_unweighable_variants, drop_unweighable_variants_of, CompiledToggle, CompiledToggles,
    CompiledVariant, NameIndex, SegmentsById,
};
use super::volatility::Volatility;

/// The name an engine is built under for an environment the registry does not hold: every
/// toggle is off there (as the client API serves it).
pub const UNKNOWN_ENVIRONMENT: &str = "";

/// What the answers know of a toggle without evaluating it (cheap to copy: a build shares
/// it with the build before while the toggle is unchanged).
#[derive(Debug, Clone)]
pub struct ToggleFacts {
    pub name: Arc<str>,
    pub project: Arc<str>,
    pub impression_data: bool,
    /// Whether the toggle is on in the environment at all (before its strategies).
    pub on_in_environment: bool,
    /// Some variant (the toggle's or a strategy's) carries a payload: OFREP answers its
    /// payload as the flag's value.
    pub has_payloads: bool,
    /// Only unconstrained `default` strategies (or none): OFREP's `STATIC`.
    pub static_rollout: bool,
    /// The start of the toggle's entry in a frontend answer, `{"name":…,"enabled":true,
    /// "variant":`, escaped once here rather than on every answer.
    pub frontend_prefix: Arc<[u8]>,
}

/// One toggle's evaluation: whether it is on for the context, and its variant.
#[derive(Debug, Clone)]
pub struct Evaluation<'e> {
    pub enabled: bool,
    pub variant: Variant<'e>,
}

/// A chosen variant, borrowed from the compiled toggle, or yggdrasil's.
#[derive(Debug, Clone)]
pub enum Variant<'e> {
    /// No variant: `disabled`, not enabled, no payload.
    Disabled,
    Compiled(&'e CompiledVariant),
    Engine(ExtendedVariantDef),
}

impl Variant<'_> {
    /// The variant's name (`disabled` when none).
    pub fn name(&self) -> &str {
        match self {
            Self::Disabled => "disabled",
            Self::Compiled(v) => &v.name,
            Self::Engine(v) => &v.name,
        }
    }

    /// Whether a variant was chosen.
    pub fn enabled(&self) -> bool {
        match self {
            Self::Disabled => false,
            Self::Compiled(_) => true,
            Self::Engine(v) => v.enabled,
        }
    }

    /// The variant's payload.
    pub fn payload(&self) -> Option<&Payload> {
        match self {
            Self::Disabled => None,
            Self::Compiled(v) => v.payload.as_ref(),
            Self::Engine(v) => v.payload.as_ref(),
        }
    }

    /// Whether this is the `disabled` variant (no variant chosen).
    pub fn is_disabled(&self) -> bool {
        match self {
            Self::Disabled => true,
            Self::Compiled(_) => false,
            Self::Engine(v) => v.name == "disabled" && !v.enabled && v.payload.is_none(),
        }
    }
}

/// One environment's compiled toggles at one configuration version.
pub struct EnvironmentEngine {
    /// The environment (`UNKNOWN_ENVIRONMENT` for names the registry does not hold).
    pub environment: String,
    /// SHA-256 of everything the engine was fed (each toggle's client form with its project,
    /// and the segments): equal on every replica for equal content, and the part of every
    /// ETag that says which configuration answered.
    pub digest: [u8; 32],
    /// What its answers depend on besides the configuration and the context.
    pub volatility: Volatility,
    /// Whether any answer can depend on the context's `remoteAddress`: when not, a request
    /// without one is not given the caller's address (it would change the ETag only).
    pub reads_remote_address: bool,
    /// What this build compiled and reused (for the log).
    pub work: BuildWork,
    /// yggdrasil, for the toggles `compiled` leaves to it (shared with the build before when
    /// those toggles are the same).
    engine: Arc<EngineState>,
    /// The toggles yggdrasil was fed, to know when it can be shared.
    fed_to_yggdrasil: FedToggles,
    /// Flagpole's evaluator, for every toggle it compiles, in the order of `toggles`.
    compiled: CompiledToggles,
    /// The segments' part of `digest`.
    segments_digest: [u8; 32],
    /// Each toggle's share of the engine, in the order of `toggles`.
    units: Vec<ToggleUnit>,
    /// By name.
    toggles: Vec<ToggleFacts>,
}

/// Toggles by name and input digest.
type FedToggles = Vec<(Arc<str>, [u8; 32])>;

/// What one build compiled and what it took from the build before.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildWork {
    /// Toggles compiled (changed, or everything on a first build).
    pub compiled: usize,
    /// Toggles taken as they were from the build before.
    pub reused: usize,
    /// Time spent compiling the changed toggles (serialising, parsing, compiling).
    pub compile: std::time::Duration,
}

/// What one toggle gives its environment's engine: made when the toggle changes, copied by
/// each later build (reference counts only) while it does not.
#[derive(Clone)]
struct ToggleUnit {
    /// The toggle it was made from (the same `Arc` is the same content).
    source: Arc<Toggle>,
    /// SHA-256 of the toggle's engine input (its client form and project).
    digest: [u8; 32],
    /// Compiled alone, before its parents are looked at (`None`: left to yggdrasil).
    compiled: Option<Arc<CompiledToggle>>,
    /// It depends on other toggles (compiled with their places in the list).
    has_dependencies: bool,
    /// Its input names `remoteAddress` (see `reads_remote_address`).
    names_remote_address: bool,
    /// What its answers depend on besides the configuration and the context.
    volatility: Volatility,
}

/// A toggle as the engine is fed it: its client form and its project.
#[derive(Serialize)]
struct EngineToggle<'a> {
    #[serde(flatten)]
    client: ClientToggle<'a>,
    project: &'a str,
}

/// The environment's segments as the engine reads them, and their digest.
struct SegmentsInput {
    json: Vec<u8>,
    digest: [u8; 32],
}

impl SegmentsInput {
    fn of(state: &ConfigState) -> Self {
        let segments: Vec<ClientSegment> = state
            .segments
            .values()
            .map(|segment| ClientSegment::new(segment))
            .collect();
        // Serialising borrowed plain data into a Vec cannot fail.
        let json = serde_json::to_vec(&segments).unwrap_or_else(|_| b"[]".to_vec());
        let digest = Sha256::digest(&json).into();
        Self { json, digest }
    }
}

/// The engine input of `toggle` in `environment`: its client form (segments by reference)
/// with its project, as JSON.
fn toggle_input(toggle: &Toggle, environment: &str) -> Vec<u8> {
    let entry = EngineToggle {
        client: ClientToggle::in_environment(toggle, environment, SegmentForm::ByReference),
        project: &toggle.project,
    };
    // Serialising borrowed plain data into a Vec cannot fail.
    serde_json::to_vec(&entry).unwrap_or_default()
}

/// Whether an input names `remoteAddress`. The engine reads the address only for what names
/// it — the `remoteAddress` strategy, a constraint or a stickiness on that context field
/// (yggdrasil matches the exact name) — so without the name, no answer depends on it. A toggle
/// merely called so counts too: a wasted tag, never a wrong one.
fn names_remote_address(json: &[u8]) -> bool {
    std::str::from_utf8(json).map_or(true, |json| json.contains("remoteAddress"))
}

impl EnvironmentEngine {
    /// Builds `environment`'s engine from `state`. With `previous` (the same environment's
    /// engine of an earlier version), only the toggles that changed are compiled again — the
    /// others are shared — unless the segments changed; toggles with dependencies are compiled
    /// again when toggles came or went (they hold their parents' places). Warnings yggdrasil
    /// gives (a toggle that compiles to always off) are logged.
    pub fn build(
        environment: &str,
        state: &ConfigState,
        previous: Option<&EnvironmentEngine>,
    ) -> Result<Self, serde_json::Error> {
        let segments_input = SegmentsInput::of(state);
        let previous = previous.filter(|p| p.segments_digest == segments_input.digest);
        let same_names = previous.is_some_and(|p| {
            p.toggles.len() == state.features.len()
                && p.toggles
                    .iter()
                    .zip(state.features.keys())
                    .all(|(facts, name)| *facts.name == **name)
        });
        let names: NameIndex = match previous {
            Some(p) if same_names => p.compiled.names().clone(),
            _ => Arc::new(
                state
                    .features
                    .keys()
                    .enumerate()
                    .map(|(i, name)| (name.as_str().into(), i))
                    .collect(),
            ),
        };
        let segments: Vec<Segment> = serde_json::from_slice(&segments_input.json)?;
        let segments_by_id: SegmentsById = segments.iter().map(|s| (s.id, s)).collect();

        let mut work = BuildWork::default();
        let started = std::time::Instant::now();
        let mut units = Vec::with_capacity(state.features.len());
        let mut toggles = Vec::with_capacity(state.features.len());
        for (at, toggle) in state.features.values().enumerate() {
            let before = previous.and_then(|p| p.unit_named(at, &toggle.name));
            let reusable = before.filter(|(unit, _)| same_names || !unit.has_dependencies);
            if let Some((unit, facts)) =
                reusable.filter(|(unit, _)| Arc::ptr_eq(&unit.source, toggle))
            {
                units.push(unit.clone());
                toggles.push(facts.clone());
                work.reused += 1;
                continue;
            }
            let json = toggle_input(toggle, environment);
            let digest: [u8; 32] = Sha256::digest(&json).into();
            // The same content in a new `Arc` (a reload from the store): nothing to compile.
            if let Some((unit, facts)) = reusable.filter(|(unit, _)| unit.digest == digest) {
                units.push(ToggleUnit {
                    source: toggle.clone(),
                    ..unit.clone()
                });
                toggles.push(facts.clone());
                work.reused += 1;
                continue;
            }
            let mut feature: ClientFeature = serde_json::from_slice(&json)?;
            drop_unweighable_variants_of(&mut feature);
            units.push(ToggleUnit {
                source: toggle.clone(),
                digest,
                compiled: CompiledToggles::compile_toggle(&feature, &segments_by_id, &names),
                has_dependencies: feature.dependencies.as_ref().is_some_and(|d| !d.is_empty()),
                names_remote_address: names_remote_address(&json),
                volatility: Volatility::of_toggle(state, toggle, environment),
            });
            toggles.push(ToggleFacts::of(toggle, environment));
            work.compiled += 1;
        }
        work.compile = started.elapsed();

        let compiled = CompiledToggles::assemble(
            units.iter().map(|unit| unit.compiled.clone()).collect(),
            names,
        );
        let mut hasher = Sha256::new();
        hasher.update(b"engine-input-v2\0");
        units.iter().for_each(|unit| hasher.update(unit.digest));
        hasher.update(segments_input.digest);
        let volatility = units
            .iter()
            .fold(Volatility::default(), |sum, unit| sum.with(unit.volatility));
        let reads_remote_address = names_remote_address(&segments_input.json)
            || units.iter().any(|unit| unit.names_remote_address);
        let (engine, fed_to_yggdrasil) =
            Self::yggdrasil_for(environment, &units, &compiled, &segments_input, previous)?;
        Ok(Self {
            environment: environment.to_string(),
            digest: hasher.finalize().into(),
            volatility,
            reads_remote_address,
            work,
            engine,
            fed_to_yggdrasil,
            compiled,
            segments_digest: segments_input.digest,
            units,
            toggles,
        })
    }

    /// The unit and facts of the toggle `name`, expected at `at` (where it is when no toggle
    /// came or went before it).
    fn unit_named(&self, at: usize, name: &str) -> Option<(&ToggleUnit, &ToggleFacts)> {
        let at = match self.toggles.get(at) {
            Some(facts) if *facts.name == *name => at,
            _ => self.compiled.index_of(name)?,
        };
        Some((self.units.get(at)?, self.toggles.get(at)?))
    }

    /// yggdrasil fed the toggles the compiled evaluator leaves to it, the parents they depend
    /// on, and the segments (a name it does not hold answers `disabled` either way) — the
    /// build before's when those are the same.
    fn yggdrasil_for(
        environment: &str,
        units: &[ToggleUnit],
        compiled: &CompiledToggles,
        segments: &SegmentsInput,
        previous: Option<&EnvironmentEngine>,
    ) -> Result<(Arc<EngineState>, FedToggles), serde_json::Error> {
        let mut needed: Vec<usize> = Vec::new();
        for (at, unit) in units.iter().enumerate() {
            if compiled.is_compiled_at(at) {
                continue;
            }
            needed.push(at);
            let parents = unit.source.dependencies.iter();
            needed.extend(parents.filter_map(|d| compiled.index_of(d.feature.as_str())));
        }
        needed.sort_unstable();
        needed.dedup();
        let fed: FedToggles = needed
            .iter()
            .map(|&at| (Arc::from(units[at].source.name.as_str()), units[at].digest))
            .collect();
        if let Some(previous) = previous.filter(|p| p.fed_to_yggdrasil == fed) {
            return Ok((previous.engine.clone(), fed));
        }
        let engine = EngineState::default();
        if !needed.is_empty() {
            let mut json = br#"{"version":2,"features":["#.to_vec();
            for (i, &at) in needed.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                json.extend_from_slice(&toggle_input(&units[at].source, environment));
            }
            json.extend_from_slice(br#"],"segments":"#);
            json.extend_from_slice(&segments.json);
            json.push(b'}');
            let mut features: ClientFeatures = serde_json::from_slice(&json)?;
            drop_unweighable_variants(&mut features);
            if let Some(warnings) = engine.apply_client_features(features) {
                for warning in warnings {
                    tracing::warn!(
                        environment,
                        toggle = %warning.toggle_name,
                        message = %warning.message,
                        "a toggle does not compile for evaluation"
                    );
                }
            }
        }
        Ok((Arc::new(engine), fed))
    }

    /// Every toggle of the environment, by name.
    pub fn toggles(&self) -> &[ToggleFacts] {
        &self.toggles
    }

    /// The toggle named `name`, if it exists.
    pub fn toggle(&self, name: &str) -> Option<&ToggleFacts> {
        self.compiled
            .index_of(name)
            .and_then(|i| self.toggles.get(i))
    }

    /// How many toggles Flagpole's evaluator compiled and how many are left to yggdrasil.
    pub fn compiled_counts(&self) -> (usize, usize) {
        self.compiled.counts()
    }

    /// Evaluates the toggle `name` for `context`: one pass gives both whether it is on and
    /// its variant.
    pub fn evaluate(&self, name: &str, context: &Context) -> Evaluation<'_> {
        match self.compiled.index_of(name) {
            Some(at) => self.evaluate_at(at, context),
            None => self.evaluate_with_yggdrasil(name, context),
        }
    }

    /// Evaluates the toggle at `at` in `toggles()` for `context`: compiled when it is, else
    /// by yggdrasil (same answers either way).
    pub fn evaluate_at(&self, at: usize, context: &Context) -> Evaluation<'_> {
        match self.compiled.evaluate(at, context) {
            Some(verdict) => Evaluation {
                enabled: verdict.enabled,
                variant: verdict.variant.map_or(Variant::Disabled, Variant::Compiled),
            },
            None => match self.toggles.get(at) {
                Some(facts) => self.evaluate_with_yggdrasil(&facts.name, context),
                None => Evaluation {
                    enabled: false,
                    variant: Variant::Disabled,
                },
            },
        }
    }

    /// Evaluates the toggle `name` with yggdrasil, which holds only the toggles not compiled
    /// (and their parents).
    fn evaluate_with_yggdrasil(&self, name: &str, context: &Context) -> Evaluation<'_> {
        let variant = self.engine.get_variant(name, context, &None);
        Evaluation {
            enabled: variant.feature_enabled,
            variant: Variant::Engine(variant),
        }
    }
}

/// What a toggle's `frontend_prefix` holds before and after its escaped name.
const FRONTEND_PREFIX_START: &[u8] = br#"{"name":"#;
const FRONTEND_PREFIX_END: &[u8] = br#","enabled":true,"variant":"#;

impl ToggleFacts {
    /// The toggle's name as a JSON string, quotes included (read from `frontend_prefix`, so
    /// that it is escaped once and held once).
    pub fn name_json(&self) -> &[u8] {
        let end = self.frontend_prefix.len() - FRONTEND_PREFIX_END.len();
        &self.frontend_prefix[FRONTEND_PREFIX_START.len()..end]
    }

    fn of(toggle: &Toggle, environment: &str) -> Self {
        let config = toggle.environment(environment);
        let enabled_strategies = config.strategies.iter().filter(|s| !s.disabled);
        // Disabled strategies are not served (nor digested): their variants do not count.
        let strategy_payloads = enabled_strategies
            .clone()
            .flat_map(|s| s.variants.iter())
            .any(|v| v.payload.is_some());
        let mut frontend_prefix = FRONTEND_PREFIX_START.to_vec();
        // Serialising a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut frontend_prefix, toggle.name.as_str());
        frontend_prefix.extend_from_slice(FRONTEND_PREFIX_END);
        Self {
            frontend_prefix: frontend_prefix.into(),
            name: toggle.name.as_str().into(),
            project: toggle.project.as_str().into(),
            impression_data: toggle.impression_data.unwrap_or(false),
            on_in_environment: config.enabled,
            has_payloads: strategy_payloads || config.variants.iter().any(|v| v.payload.is_some()),
            static_rollout: toggle.dependencies.is_empty()
                && enabled_strategies.clone().all(|s| {
                    s.name.as_str() == "default"
                        && s.constraints.is_empty()
                        && s.segments.is_empty()
                }),
        }
    }
}

/// A payload's JSON value as OFREP serves it: `string` as a string, `number` as a number
/// (a string when it does not parse), `json` parsed (the string when it does not).
pub fn typed_payload(payload: &Payload) -> serde_json::Value {
    match payload.payload_type.as_str() {
        "number" => payload
            .value
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(|n| {
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Some(serde_json::Value::from(n as i64))
                } else {
                    serde_json::Number::from_f64(n).map(serde_json::Value::Number)
                }
            })
            .unwrap_or_else(|| serde_json::Value::String(payload.value.clone())),
        "json" => serde_json::from_str(&payload.value)
            .unwrap_or_else(|_| serde_json::Value::String(payload.value.clone())),
        _ => serde_json::Value::String(payload.value.clone()),
    }
}
