//! `EnvironmentEngine`: one environment's toggles compiled by Flagpole's own evaluator
//! (`compiled`), with `unleash-yggdrasil` for the toggles it leaves alone, and what the
//! answers need to know of each toggle without evaluating it (project, impression data,
//! whether its variants carry payloads, whether it is a plain rollout).
//!
//! The engine is fed the same client form of each toggle the client API serves
//! (`ClientToggle`, segments by reference), plus the toggle's project, so that it evaluates
//! exactly what an SDK polling that environment would.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use sha2::{Digest, Sha256};
use unleash_types::client_features::{ClientFeatures, Context, Payload};
use unleash_yggdrasil::{EngineState, ExtendedVariantDef};

use crate::domain::config_state::ConfigState;
use crate::domain::toggle::Toggle;
use crate::domain::views::{ClientSegment, ClientToggle, SegmentForm};

use super::compiled::{drop_unweighable_variants, CompiledToggles, CompiledVariant};
use super::volatility::Volatility;

/// The name an engine is built under for an environment the registry does not hold: every
/// toggle is off there (as the client API serves it).
pub const UNKNOWN_ENVIRONMENT: &str = "";

/// What the answers know of a toggle without evaluating it.
#[derive(Debug, Clone)]
pub struct ToggleFacts {
    pub name: String,
    pub project: String,
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
    pub frontend_prefix: Box<[u8]>,
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
    /// SHA-256 of everything the engine was fed: equal on every replica for equal content,
    /// and the part of every ETag that says which configuration answered.
    pub digest: [u8; 32],
    /// What its answers depend on besides the configuration and the context.
    pub volatility: Volatility,
    /// Whether any answer can depend on the context's `remoteAddress`: when not, a request
    /// without one is not given the caller's address (it would change the ETag only).
    pub reads_remote_address: bool,
    /// yggdrasil, for the toggles `compiled` leaves to it (and the playground's checks).
    engine: EngineState,
    /// Flagpole's evaluator, for every toggle it compiles.
    compiled: CompiledToggles,
    /// What compiling `compiled` took (part of the whole build, for the log).
    pub own_compile: std::time::Duration,
    /// For each of `toggles`, its index in `compiled`.
    compiled_index: Vec<Option<usize>>,
    /// By name.
    toggles: Vec<ToggleFacts>,
    index: HashMap<String, usize>,
}

/// A toggle as the engine is fed it: its client form and its project.
#[derive(Serialize)]
struct EngineToggle<'a> {
    #[serde(flatten)]
    client: ClientToggle<'a>,
    project: &'a str,
}

/// The engine's input of one environment, serialised, and its digest.
pub struct EngineInput {
    pub json: Vec<u8>,
    pub digest: [u8; 32],
}

impl EngineInput {
    /// The client features document of `environment` (segments by reference, every toggle
    /// with its project), as the engine reads it.
    pub fn of(state: &ConfigState, environment: &str) -> Self {
        let mut json = br#"{"version":2,"features":["#.to_vec();
        for (i, toggle) in state.features.values().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            let entry = EngineToggle {
                client: ClientToggle::in_environment(toggle, environment, SegmentForm::ByReference),
                project: &toggle.project,
            };
            // Serialising borrowed plain data into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut json, &entry);
        }
        json.extend_from_slice(br#"],"segments":"#);
        let segments: Vec<ClientSegment> = state
            .segments
            .values()
            .map(|segment| ClientSegment::new(segment))
            .collect();
        let _ = serde_json::to_writer(&mut json, &segments);
        json.push(b'}');
        let digest = Sha256::digest(&json).into();
        Self { json, digest }
    }

    /// Whether the input names `remoteAddress` anywhere. The engine reads the address only
    /// for what names it — the `remoteAddress` strategy, a constraint or a stickiness on that
    /// context field (yggdrasil matches the exact name) — so without the name, no answer
    /// depends on it. A toggle merely called so counts too: a wasted tag, never a wrong one.
    fn mentions_remote_address(&self) -> bool {
        std::str::from_utf8(&self.json).map_or(true, |json| json.contains("remoteAddress"))
    }
}

impl EnvironmentEngine {
    /// Compiles `input` (made from `state`) for `environment`; warnings the engine
    /// gives (a toggle that compiles to always off) are logged.
    pub fn build(
        environment: &str,
        state: &ConfigState,
        input: EngineInput,
    ) -> Result<Self, serde_json::Error> {
        let mut features: ClientFeatures = serde_json::from_slice(&input.json)?;
        drop_unweighable_variants(&mut features);
        let reads_remote_address = input.mentions_remote_address();
        let started = std::time::Instant::now();
        let compiled = CompiledToggles::build(&features);
        let own_compile = started.elapsed();
        // yggdrasil answers only the toggles not compiled: it is fed those, the parents they
        // depend on, and the segments (a name it does not hold answers `disabled` either way).
        let mut needed: HashSet<&str> = HashSet::new();
        for feature in &features.features {
            if !compiled.is_compiled(&feature.name) {
                needed.insert(&feature.name);
                needed.extend(
                    feature
                        .dependencies
                        .iter()
                        .flatten()
                        .map(|d| d.feature.as_str()),
                );
            }
        }
        let needed: HashSet<String> = needed.into_iter().map(str::to_string).collect();
        features.features.retain(|f| needed.contains(&f.name));
        let engine = EngineState::default();
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
        let toggles: Vec<ToggleFacts> = state
            .features
            .values()
            .map(|toggle| ToggleFacts::of(toggle, environment))
            .collect();
        let index = toggles
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let compiled_index = toggles.iter().map(|t| compiled.index_of(&t.name)).collect();
        Ok(Self {
            environment: environment.to_string(),
            digest: input.digest,
            volatility: Volatility::of(state, environment),
            reads_remote_address,
            engine,
            compiled,
            own_compile,
            compiled_index,
            toggles,
            index,
        })
    }

    /// Every toggle of the environment, by name.
    pub fn toggles(&self) -> &[ToggleFacts] {
        &self.toggles
    }

    /// The toggle named `name`, if it exists.
    pub fn toggle(&self, name: &str) -> Option<&ToggleFacts> {
        self.index.get(name).map(|&i| &self.toggles[i])
    }

    /// How many toggles Flagpole's evaluator compiled and how many are left to yggdrasil.
    pub fn compiled_counts(&self) -> (usize, usize) {
        self.compiled.counts()
    }

    /// Evaluates the toggle `name` for `context`: one pass gives both whether it is on and
    /// its variant.
    pub fn evaluate(&self, name: &str, context: &Context) -> Evaluation<'_> {
        match self.index.get(name) {
            Some(&at) => self.evaluate_at(at, context),
            None => self.evaluate_with_yggdrasil(name, context),
        }
    }

    /// Evaluates the toggle at `at` in `toggles()` for `context`: compiled when it is, else
    /// by yggdrasil (same answers either way).
    pub fn evaluate_at(&self, at: usize, context: &Context) -> Evaluation<'_> {
        let verdict = self
            .compiled_index
            .get(at)
            .copied()
            .flatten()
            .and_then(|i| self.compiled.evaluate(i, context));
        match verdict {
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
        let strategy_payloads = config
            .strategies
            .iter()
            .flat_map(|s| s.variants.iter())
            .any(|v| v.payload.is_some());
        let mut frontend_prefix = FRONTEND_PREFIX_START.to_vec();
        // Serialising a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut frontend_prefix, toggle.name.as_str());
        frontend_prefix.extend_from_slice(FRONTEND_PREFIX_END);
        Self {
            frontend_prefix: frontend_prefix.into_boxed_slice(),
            name: toggle.name.to_string(),
            project: toggle.project.to_string(),
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
