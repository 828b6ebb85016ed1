//! Valid records as the service stores them, for the round trips: whatever these make must be
//! read back unchanged. Names, texts, numbers, dates and versions go to the edges the rules
//! allow (100-character names, control characters in free text, nanosecond timestamps).

use std::sync::Arc;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::domain::config_state::ConfigState;
use crate::domain::constraint::{Constraint, Operand, Operator};
use crate::domain::context_field::{built_in_context_fields, is_built_in, ContextField};
use crate::domain::environment::{only_default, seeded_environments, FeatureEnvironment};
use crate::domain::project::{default_project, Project, DEFAULT_PROJECT};
use crate::domain::strategy::{built_in_strategies, ParameterDefinition, StrategyDefinition};
use crate::domain::tag::{simple_tag_type, Tag, TagRef, TagType};
use crate::domain::text::Text;
use crate::domain::toggle::{
    Override, Payload, Strategy as ToggleStrategy, Toggle, Variant, WeightType,
};

/// When the records of a fresh store were created.
pub(crate) fn seeded_at() -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000, 0).unwrap()
}

/// What a store holds once seeded: the built-in strategies and context fields, `simple`,
/// `default` and the seeded environments.
pub(crate) fn seeded() -> ConfigState {
    let now = seeded_at();
    let mut state = ConfigState::default();
    for s in built_in_strategies() {
        state.strategies.insert(s.name.clone(), Arc::new(s));
    }
    for f in built_in_context_fields(now) {
        state.context_fields.insert(f.name.clone(), Arc::new(f));
    }
    let simple = simple_tag_type();
    state
        .tag_types
        .insert(simple.name.clone(), Arc::new(simple));
    let default = default_project(now);
    state.projects.insert(default.id.clone(), Arc::new(default));
    for environment in seeded_environments(now) {
        state
            .environments
            .insert(environment.name.clone(), Arc::new(environment));
    }
    state
}

/// A URL-friendly name of 2 to `max` characters (never dots only: it starts with a letter or
/// digit).
pub(crate) fn name(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-zA-Z0-9][a-zA-Z0-9._~!*'()-]{1,16}",
        1 => "[a-z]{1}".prop_map(move |c| c.repeat(max)),
    ]
}

/// Strings a YAML reader would take for another type or for syntax, unless quoted.
static YAML_LOOKALIKES: [&str; 30] = [
    "true",
    "no",
    "~",
    "null",
    "1.0",
    "0x1f",
    "1e3",
    ".inf",
    "-.nan",
    "0o17",
    "2026-01-01",
    "'",
    "- a",
    "{}",
    "[1]",
    "&a",
    "*a",
    "!!str",
    "%",
    "@",
    "`",
    "| x",
    "> x",
    "? x",
    "a: b",
    "#",
    " lead",
    "trail ",
    "\u{feff}",
    "\u{0}",
];

/// Free text of at most `max` characters: printable unicode, or control characters, quotes and
/// backslashes, or what YAML would read as another type.
pub(crate) fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => regex(&format!("\\PC{{0,{}}}", max.min(40))),
        1 => regex(&format!("[\\x00-\\x1f\"'\\\\ a-z:#&*]{{0,{}}}", max.min(20))),
        1 => prop::sample::select(&YAML_LOOKALIKES[..]).prop_map(str::to_string),
    ]
}

fn regex(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("a valid pattern")
}

/// Text of 2 to `max` characters that is not blank (as required fields are checked).
fn solid_text(max: usize) -> impl Strategy<Value = String> {
    (text(max - 2), "[a-zA-Z0-9]{2}").prop_map(|(t, c)| c + &t)
}

/// A timestamp from 1970 to 9999 with nanoseconds.
pub(crate) fn timestamp() -> impl Strategy<Value = DateTime<Utc>> {
    (0i64..253_402_300_799, 0u32..1_000_000_000)
        .prop_map(|(secs, nanos)| Utc.timestamp_opt(secs, nanos).unwrap())
}

/// A value of `operand` that validation accepts.
pub(crate) fn operand_value(operand: Operand) -> BoxedStrategy<String> {
    match operand {
        Operand::Strings => text(99)
            .prop_map(|t| {
                // Non-empty, no trailing backslash: the rule for list items.
                let t = if t.is_empty() { "x".to_string() } else { t };
                if t.ends_with('\\') {
                    t + "x"
                } else {
                    t
                }
            })
            .boxed(),
        Operand::Number => prop_oneof![
            "[+-]?[0-9]{1,12}(\\.[0-9]{0,6})?([eE][+-]?[0-9]{1,2})?",
            Just("0".to_string()),
            Just("-0".to_string()),
            Just("1.7976931348623157e308".to_string()),
            Just("9".repeat(100)),
        ]
        .boxed(),
        Operand::Date => (
            // Up to year 9892: 14 hours of offset keep it at four digits.
            (0i64..250_000_000_000).prop_map(|secs| Utc.timestamp_opt(secs, 0).unwrap()),
            any::<bool>(),
            prop_oneof![Just(0), -(14 * 60)..=(14 * 60)],
        )
            .prop_map(|(t, millis, offset_minutes)| sdk_date(t, millis, offset_minutes))
            .boxed(),
        Operand::Semver => (
            (0u64..1_000_000, 0u64..100, any::<u64>()),
            prop::option::of(prop_oneof![
                "[a-zA-Z-][a-zA-Z0-9-]{0,6}",
                (0u32..1000).prop_map(|n| n.to_string()),
            ]),
            prop::option::of("[a-zA-Z0-9-]{1,8}(\\.[0-9]{1,3})?"),
        )
            .prop_map(|((major, minor, patch), pre, build)| {
                let mut v = format!("{major}.{minor}.{patch}");
                if let Some(pre) = pre {
                    v += &format!("-{pre}");
                }
                if let Some(build) = build {
                    v += &format!("+{build}");
                }
                v
            })
            .boxed(),
        Operand::Regex => prop_oneof![
            prop::sample::select(&REGEX_SAMPLES[..]).prop_map(str::to_string),
            "[a-zA-Z0-9 _-]{1,40}".prop_map(|word| format!("^{}$", regex::escape(&word))),
        ]
        .boxed(),
        Operand::Cidrs => prop_oneof![
            (any::<[u8; 4]>(), prop::option::of(0u8..=32)).prop_map(|(octets, prefix)| {
                ip_block(std::net::Ipv4Addr::from(octets).into(), prefix)
            }),
            (any::<[u16; 8]>(), prop::option::of(0u8..=128)).prop_map(|(segments, prefix)| {
                ip_block(std::net::Ipv6Addr::from(segments).into(), prefix)
            }),
        ]
        .boxed(),
    }
}

/// Regular expressions that compile, in the shapes constraints use.
static REGEX_SAMPLES: [&str; 6] = [
    "^[^@]+@example\\.com$",
    "(?i)^beta-[0-9]+$",
    "\\d{3}-\\d{4}",
    "^(eu|us)-[a-z]+$",
    "\\p{Greek}",
    ".",
];

/// `address`, with `/prefix` when there is one.
fn ip_block(address: std::net::IpAddr, prefix: Option<u8>) -> String {
    match prefix {
        Some(bits) => format!("{address}/{bits}"),
        None => address.to_string(),
    }
}

/// `t` in the SDK date format, with or without milliseconds, at an offset of `offset_minutes`
/// (`Z` for 0).
fn sdk_date(t: DateTime<Utc>, millis: bool, offset_minutes: i32) -> String {
    let offset = FixedOffset::east_opt(offset_minutes * 60).unwrap();
    let local = t.with_timezone(&offset);
    let mut s = local.format("%Y-%m-%dT%H:%M:%S").to_string();
    if millis {
        s += &local.format("%.3f").to_string();
    }
    if offset_minutes == 0 {
        s.push('Z');
    } else {
        s += &local.format("%:z").to_string();
    }
    s
}

/// The fields a record may point at: what a generated configuration holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Universe {
    pub projects: Vec<String>,
    /// Context fields with their legal values.
    pub fields: Vec<(String, Vec<String>)>,
    pub strategies: Vec<String>,
    pub tags: Vec<TagRef>,
}

impl Universe {
    /// What a seeded store holds.
    pub(crate) fn of(state: &ConfigState) -> Self {
        Self {
            projects: state.projects.keys().cloned().collect(),
            fields: state
                .context_fields
                .values()
                .map(|f| (f.name.clone(), f.legal_values.clone()))
                .collect(),
            strategies: state.strategies.keys().cloned().collect(),
            tags: state.tags.values().map(|t| t.reference()).collect(),
        }
    }
}

/// A valid constraint on one of `fields` (its legal values respected).
pub(crate) fn constraint(fields: Vec<(String, Vec<String>)>) -> impl Strategy<Value = Constraint> {
    (
        prop::sample::select(Operator::ALL.to_vec()),
        any::<Index>(),
        prop::collection::vec(any::<Index>(), 1..4),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        any::<bool>(),
    )
        .prop_flat_map(
            move |(op, field, picks, inverted, case_insensitive, empty_other)| {
                let (context_name, legal) = field.get(&fields).clone();
                let bounded = !legal.is_empty() && op.bounded_by_legal_values();
                // A field with legal values takes only those: membership over them.
                let (op, values) = if bounded {
                    let values: Vec<String> = picks.iter().map(|i| i.get(&legal).clone()).collect();
                    (Operator::In, Just(values).boxed())
                } else {
                    let operand = op.operand().expect("Operator::ALL holds known operators");
                    let values = if operand.is_list() {
                        prop::collection::vec(operand_value(operand), 1..4).boxed()
                    } else {
                        operand_value(operand).prop_map(|v| vec![v]).boxed()
                    };
                    (op, values)
                };
                // Unleash 7 refuses an inverted `REGEX`, and so do admin writes.
                let inverted = inverted.filter(|&i| !(i && op == Operator::Regex));
                let is_list = op.operand().is_some_and(Operand::is_list);
                values.prop_map(move |values| {
                    // The empty counterpart the Unleash UI sends (`value: ""`, `values: []`).
                    let values: Vec<Text> = values.into_iter().map(Text::from).collect();
                    let (values, value) = if is_list {
                        (Some(values), empty_other.then(Text::default))
                    } else {
                        (empty_other.then(Vec::new), values.into_iter().next())
                    };
                    Constraint {
                        context_name: context_name.as_str().into(),
                        operator: op.clone(),
                        values,
                        value,
                        inverted,
                        case_insensitive,
                    }
                })
            },
        )
}

fn variants() -> impl Strategy<Value = Vec<Variant>> {
    let variant = (
        name(100),
        0u16..=1000,
        any::<bool>(),
        text(30),
        prop::option::of((text(20), text(40))),
        prop::collection::vec(
            (solid_text(20), prop::collection::vec(text(20), 0..3)),
            0..3,
        ),
    )
        .prop_map(
            |(name, weight, fix, stickiness, payload, overrides)| Variant {
                name: name.into(),
                weight: u32::from(weight),
                weight_type: if fix {
                    WeightType::Fix
                } else {
                    WeightType::Variable
                },
                stickiness: stickiness.into(),
                payload: payload.map(|(kind, value)| Payload {
                    kind: kind.into(),
                    value: value.into(),
                }),
                overrides: overrides
                    .into_iter()
                    .map(|(context_name, values)| Override {
                        context_name: context_name.into(),
                        values: values.into_iter().map(Text::from).collect(),
                    })
                    .collect(),
            },
        );
    prop::collection::vec(variant, 0..4).prop_map(|mut list| {
        // Names are unique within a toggle.
        let mut seen = std::collections::HashSet::new();
        list.retain(|v| seen.insert(v.name.clone()));
        list
    })
}

/// A valid active toggle whose references are all in `universe`.
pub(crate) fn toggle(universe: Universe) -> impl Strategy<Value = Toggle> {
    let strategy = (
        prop::sample::select(universe.strategies.clone()),
        prop::collection::btree_map(text(20), text(40), 0..3),
        prop::collection::vec(constraint(universe.fields.clone()), 0..3),
    )
        .prop_map(|(name, parameters, constraints)| ToggleStrategy {
            parameters: parameters
                .into_iter()
                .map(|(key, value)| (key.into(), value.into()))
                .collect(),
            constraints,
            ..ToggleStrategy::named(&name)
        });
    // Ids as an export carries them (an import keeps given ids).
    let strategies = prop::collection::vec(strategy, 1..4).prop_map(|mut list| {
        for (i, strategy) in list.iter_mut().enumerate() {
            strategy.id = format!("strategy-{i}").into();
        }
        list
    });
    let mut projects = universe.projects.clone();
    projects.push(DEFAULT_PROJECT.to_string());
    let tags = universe.tags.clone();
    (
        (
            name(100),
            text(60),
            prop_oneof![Just("release".to_string()), solid_text(20)],
            prop::sample::select(projects),
            any::<bool>(),
            any::<bool>(),
        ),
        strategies,
        variants(),
        prop::option::of(any::<bool>()),
        timestamp(),
        prop::collection::vec(any::<Index>(), 0..3),
    )
        .prop_map(
            move |(
                (name, description, kind, project, enabled, stale),
                strategies,
                variants,
                impression_data,
                created_at,
                tag_picks,
            )| {
                let mut toggle_tags: Vec<TagRef> = Vec::new();
                if !tags.is_empty() {
                    for pick in tag_picks {
                        let tag = pick.get(&tags).clone();
                        if !toggle_tags.contains(&tag) {
                            toggle_tags.push(tag);
                        }
                    }
                }
                Toggle {
                    name: name.into(),
                    description: description.into(),
                    kind: kind.into(),
                    project: project.into(),
                    stale,
                    environments: only_default(FeatureEnvironment {
                        enabled,
                        strategies,
                        variants,
                    }),
                    dependencies: Vec::new(),
                    impression_data,
                    created_at,
                    last_seen_at: None,
                    tags: toggle_tags,
                    archived_at: None,
                }
            },
        )
}

/// A valid project.
pub(crate) fn project() -> impl Strategy<Value = Project> {
    (name(100), solid_text(100), text(250), timestamp()).prop_map(
        |(id, name, description, created_at)| Project {
            id,
            name,
            description,
            created_at,
        },
    )
}

/// A valid context field that is not built in.
pub(crate) fn context_field() -> impl Strategy<Value = ContextField> {
    (
        name(100).prop_filter("not built in", |n| !is_built_in(n)),
        text(250),
        any::<bool>(),
        any::<i64>(),
        // Never a trailing backslash: constraints could not use such a value.
        prop::collection::btree_set("[a-z0-9]{1,8}|[^\\\\\\p{C}]{1,20}", 0..4),
        timestamp(),
    )
        .prop_map(
            |(name, description, stickiness, sort_order, legal, created_at)| ContextField {
                name,
                description,
                stickiness,
                sort_order,
                legal_values: legal.into_iter().collect(),
                created_at,
                built_in: false,
            },
        )
}

/// A valid strategy definition (possibly a built-in's name).
pub(crate) fn definition() -> impl Strategy<Value = StrategyDefinition> {
    (
        name(100),
        text(60),
        prop::collection::vec(
            (solid_text(20), solid_text(10), text(40), any::<bool>()),
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(
            |(name, description, parameters, deprecated)| StrategyDefinition {
                name,
                description,
                parameters: parameters
                    .into_iter()
                    .map(|(name, kind, description, required)| ParameterDefinition {
                        name,
                        kind,
                        description,
                        required,
                    })
                    .collect(),
                deprecated,
                built_in: false,
            },
        )
}

/// A valid tag type.
pub(crate) fn tag_type() -> impl Strategy<Value = TagType> {
    (name(50), text(60), text(10)).prop_map(|(name, description, icon)| TagType {
        name,
        description,
        icon,
    })
}

/// A valid tag value (2 to 50 characters, not blank).
pub(crate) fn tag_value() -> impl Strategy<Value = String> {
    solid_text(50)
}

/// The records of a configuration other than toggles, on top of a seeded store.
fn records() -> impl Strategy<Value = ConfigState> {
    (
        prop::collection::vec(project(), 0..3),
        prop::collection::vec(context_field(), 0..3),
        prop::collection::vec(definition(), 0..3),
        prop::collection::vec(tag_type(), 0..3),
        prop::collection::vec((any::<Index>(), tag_value()), 0..5),
    )
        .prop_map(|(projects, fields, definitions, tag_types, tags)| {
            let mut state = seeded();
            for p in projects {
                state.projects.insert(p.id.clone(), Arc::new(p));
            }
            for f in fields {
                state.context_fields.insert(f.name.clone(), Arc::new(f));
            }
            for d in definitions {
                if !state.strategies.contains_key(&d.name) {
                    state.strategies.insert(d.name.clone(), Arc::new(d));
                }
            }
            for t in tag_types {
                state.tag_types.insert(t.name.clone(), Arc::new(t));
            }
            let kinds: Vec<String> = state.tag_types.keys().cloned().collect();
            for (id, (kind, value)) in (1..).zip(tags) {
                let tag = Tag {
                    id,
                    kind: kind.get(&kinds).clone(),
                    value,
                };
                state.tags.insert(tag.reference().key(), Arc::new(tag));
                state.counters.insert("tag".into(), id);
            }
            state
        })
}

/// A valid configuration: a seeded store with up to three records of each kind and up to
/// five toggles using them.
pub(crate) fn configuration() -> impl Strategy<Value = ConfigState> {
    records().prop_flat_map(|state| {
        let toggles = prop::collection::vec(toggle(Universe::of(&state)), 0..6);
        (Just(state), toggles).prop_map(|(mut state, toggles)| {
            for t in toggles {
                state.features.insert(t.name.to_string(), Arc::new(t));
            }
            state
        })
    })
}
