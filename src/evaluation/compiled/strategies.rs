//! The built-in strategies compiled, with their constraints (segments' included) and their
//! variants: what unleash-yggdrasil's rule text for each strategy evaluates to
//! (`strategy_upgrade.rs`), without the text.

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex, PoisonError};

use ipnetwork::IpNetwork;
use rand::Rng;
use unleash_types::client_features::{ClientFeatures, Context, Operator, Segment, Strategy};
use unleash_yggdrasil::EngineState;

use super::constraints::CompiledConstraint;
use super::context::Field;
use super::hashing::{normalized_hash, normalized_hash_of_number, ROLLOUT_SEED};
use super::text;
use super::variants::VariantSet;
use super::TextSet;

/// Whether yggdrasil's `applicationHostname` rule for the host list `hosts` holds in this
/// process (one engine per host list, remembered: the answer cannot change while it runs).
fn yggdrasil_host_rule_holds(hosts: &str) -> bool {
    static ANSWERS: LazyLock<Mutex<HashMap<String, bool>>> = LazyLock::new(Mutex::default);
    let mut answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&holds) = answers.get(hosts) {
        return holds;
    }
    let toggle = serde_json::json!({"version": 2, "features": [{"name": "host", "enabled": true,
        "strategies": [{"name": "applicationHostname", "parameters": {"hostNames": hosts}}]}]});
    let holds = serde_json::from_value::<ClientFeatures>(toggle).is_ok_and(|features| {
        let engine = EngineState::default();
        // A host list that does not compile is a toggle that is never on.
        let _ = engine.apply_client_features(features);
        engine.is_enabled("host", &Context::default(), &None)
    });
    // A few distinct lists in a configuration; a bound all the same.
    if answers.len() < 10_000 {
        answers.insert(hosts.to_string(), holds);
    }
    holds
}

/// Where a rollout's stickiness value comes from.
#[derive(Debug)]
enum Stickiness {
    /// `default`: `userId`, else `sessionId`, else a random number below 10,000.
    Default,
    /// `random`: a random number below 10,000.
    Random,
    Field(Field),
}

/// What a strategy itself asks of the context (before its constraints).
#[derive(Debug)]
enum Rule {
    Always,
    Never,
    UserIds(TextSet),
    Rollout {
        percent: u32,
        stickiness: Stickiness,
        /// `None`: the name of the toggle being evaluated (a dependency's child, for a parent).
        group_id: Option<Box<str>>,
    },
    /// `gradualRolloutRandom`: a random number in 1..100 below the percentage.
    RandomBelow(f64),
    RemoteAddress(Vec<IpNetwork>),
}

/// One compiled strategy.
#[derive(Debug)]
pub struct CompiledStrategy {
    rule: Rule,
    constraints: Vec<CompiledConstraint>,
    /// Its variants, when it has any.
    pub variants: Option<VariantSet>,
}

/// Why a strategy was not compiled.
#[derive(Debug, PartialEq, Eq)]
pub enum NotCompiled {
    /// yggdrasil cannot write its rule at all (a dangling segment, an unknown operator, an
    /// ordinal constraint without a value): the whole toggle is off there.
    ToggleOff,
    /// A shape this module leaves to yggdrasil.
    Unsupported,
}

fn param<'s>(strategy: &'s Strategy, name: &str) -> Option<&'s str> {
    strategy
        .parameters
        .as_ref()
        .and_then(|p| p.get(name))
        .map(String::as_str)
}

/// A percentage parameter as yggdrasil reads it (`usize`, else the strategy is never on).
fn percentage(strategy: &Strategy, name: &str) -> Option<usize> {
    param(strategy, name).and_then(|v| v.parse::<usize>().ok())
}

/// A rollout: yggdrasil's grammar takes percentages up to 100 only.
fn rollout(percent: usize, stickiness: Stickiness, group_id: Option<&str>) -> Option<Rule> {
    if percent > 100 || !group_id.is_none_or(text::raw_round_trips) {
        return None;
    }
    Some(Rule::Rollout {
        percent: percent as u32,
        stickiness,
        group_id: group_id.map(Into::into),
    })
}

/// Whether yggdrasil fails to write `constraint`'s rule (the toggle is then off).
fn unwritable(constraint: &unleash_types::client_features::Constraint) -> bool {
    match &constraint.operator {
        Operator::Unknown(_) => true,
        Operator::In
        | Operator::NotIn
        | Operator::StrEndsWith
        | Operator::StrStartsWith
        | Operator::StrContains
        | Operator::InCidr
        | Operator::RegexMatch => false,
        _ => constraint.value.is_none(),
    }
}

impl CompiledStrategy {
    /// Compiles `strategy` of the toggle `toggle_name` with the environment's `segments`.
    pub fn compile(
        strategy: &Strategy,
        segments: &HashMap<i32, &Segment>,
        toggle_name: &str,
    ) -> Result<Self, NotCompiled> {
        let mut raw = strategy.constraints.clone().unwrap_or_default();
        for id in strategy.segments.iter().flatten() {
            let segment = segments.get(id).ok_or(NotCompiled::ToggleOff)?;
            raw.extend(segment.constraints.iter().cloned());
        }
        if raw.iter().any(unwritable) {
            return Err(NotCompiled::ToggleOff);
        }
        let rule = Self::rule(strategy).ok_or(NotCompiled::Unsupported)?;
        let constraints = raw
            .iter()
            .map(CompiledConstraint::compile)
            .collect::<Option<Vec<_>>>()
            .ok_or(NotCompiled::Unsupported)?;
        let variants = match strategy.variants.as_deref() {
            None | Some([]) => None,
            Some(variants) => Some(VariantSet::of_strategy(
                variants,
                param(strategy, "stickiness"),
                param(strategy, "groupId").unwrap_or(toggle_name),
            )),
        };
        Ok(Self {
            rule,
            constraints,
            variants,
        })
    }

    fn rule(strategy: &Strategy) -> Option<Rule> {
        Some(match strategy.name.as_str() {
            "default" => Rule::Always,
            "userWithId" => match param(strategy, "userIds") {
                None => Rule::Never,
                Some(ids) => Rule::UserIds(
                    ids.split(',')
                        .map(|id| {
                            let id = id.trim();
                            text::quoted_round_trips(id).then(|| id.into())
                        })
                        .collect::<Option<_>>()?,
                ),
            },
            name @ ("gradualRolloutUserId" | "gradualRolloutSessionId") => {
                match (
                    percentage(strategy, "percentage"),
                    param(strategy, "groupId"),
                ) {
                    (Some(percent), Some(group_id)) => {
                        let field = match name {
                            "gradualRolloutUserId" => Field::UserId,
                            _ => Field::SessionId,
                        };
                        rollout(percent, Stickiness::Field(field), Some(group_id))?
                    }
                    _ => Rule::Never,
                }
            }
            "gradualRolloutRandom" => match percentage(strategy, "percentage") {
                Some(percent) => Rule::RandomBelow(percent as f64),
                None => Rule::Never,
            },
            "flexibleRollout" => match percentage(strategy, "rollout") {
                None => Rule::Never,
                Some(percent) => {
                    let stickiness = match param(strategy, "stickiness") {
                        None | Some("default") => Stickiness::Default,
                        Some("random") => Stickiness::Random,
                        Some(name) if text::plain_name(name) => {
                            Stickiness::Field(Field::in_rule(name))
                        }
                        Some(_) => return None,
                    };
                    rollout(percent, stickiness, param(strategy, "groupId"))?
                }
            },
            "remoteAddress" => match param(strategy, "IPs") {
                None => Rule::Never,
                Some(addresses) => Rule::RemoteAddress(
                    addresses
                        .split(',')
                        .map(str::trim)
                        .map(|a| text::raw_round_trips(a).then(|| IpNetwork::from_str(a).ok()))
                        .collect::<Option<Vec<_>>>()?
                        .into_iter()
                        .flatten()
                        .collect(),
                ),
            },
            // The host name yggdrasil reads (the machine's with its `hostname` feature, which a
            // dev-dependency turns on in test builds; none without it) is the same for every
            // request: the rule is a constant, asked of yggdrasil once per host list.
            "applicationHostname" => {
                let hosts = param(strategy, "hostNames").unwrap_or("");
                if !hosts
                    .split(',')
                    .all(|host| text::raw_round_trips(host.trim()))
                {
                    return None;
                }
                match yggdrasil_host_rule_holds(hosts) {
                    true => Rule::Always,
                    false => Rule::Never,
                }
            }
            // A custom strategy is an external value the engine is never given: never on.
            _ => Rule::Never,
        })
    }

    /// Whether the strategy is on for `context`, evaluated as part of `toggle_name` (the
    /// default group id).
    pub fn holds(&self, context: &Context, toggle_name: &str) -> bool {
        self.rule.holds(context, toggle_name) && self.constraints.iter().all(|c| c.holds(context))
    }
}

impl Rule {
    fn holds(&self, context: &Context, toggle_name: &str) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::UserIds(ids) => context
                .user_id
                .as_deref()
                .is_some_and(|id| ids.contains(id)),
            Self::Rollout {
                percent,
                stickiness,
                group_id,
            } => {
                let group = group_id.as_deref().unwrap_or(toggle_name);
                let random = || rand::rng().random_range(1..10_000u32);
                let bucket = match stickiness {
                    Stickiness::Default => {
                        match context.user_id.as_deref().or(context.session_id.as_deref()) {
                            Some(value) => normalized_hash(group, value, 100, ROLLOUT_SEED),
                            None => normalized_hash_of_number(group, random(), 100, ROLLOUT_SEED),
                        }
                    }
                    Stickiness::Random => {
                        normalized_hash_of_number(group, random(), 100, ROLLOUT_SEED)
                    }
                    Stickiness::Field(field) => match field.read(context) {
                        Some(value) => normalized_hash(group, &value, 100, ROLLOUT_SEED),
                        None => return false,
                    },
                };
                bucket <= *percent
            }
            Self::RandomBelow(percent) => f64::from(rand::rng().random_range(1..100u32)) < *percent,
            Self::RemoteAddress(networks) => context
                .remote_address
                .as_deref()
                .and_then(|a| a.parse::<IpAddr>().ok())
                .is_some_and(|ip| networks.iter().any(|n| n.contains(ip))),
        }
    }
}
