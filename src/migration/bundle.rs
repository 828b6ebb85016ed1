//! Turning what was read from Unleash into a version-2 state document (the bundle), which
//! `POST /api/admin/state/import` and `--import-file` accept too; and the notes of what could
//! not move as it was (addons whose secrets Unleash shows masked, providers Flagpole lacks:
//! `addons`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::addons::{addons, Reenter};
use super::reader::UnleashInstance;
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::export::DOCUMENT_VERSION;
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::strategy::built_in_strategies;

/// What the operator must do by hand after the migration, and what moved in differently.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Notes {
    /// Addons moved in disabled, their secrets to re-enter.
    pub reenter: Vec<Reenter>,
    /// What did not move, one line each.
    pub left_behind: Vec<String>,
    /// Records moved in under another id than Unleash's, one line each.
    pub renumbered: Vec<String>,
}

/// The bundle of `instance`.
pub fn build_bundle(instance: &UnleashInstance) -> (Value, Notes) {
    let mut notes = Notes::default();
    let (features, feature_environments, dependencies, feature_tags) = match &instance.state_export
    {
        Some(state) => from_state_export(
            state,
            &instance.environment_variants,
            &instance.dependencies,
        ),
        None => from_exports(&instance.exports),
    };
    let features = with_dependencies(features, &dependencies);
    let archived = archived(&instance.archived, &features);
    let tokens = tokens(&instance.tokens);
    let segments = segments(&instance.segments);
    let projects = projects(instance, &features, &archived, &tokens, &segments);
    let mut bundle = Map::new();
    bundle.insert("version".into(), json!(DOCUMENT_VERSION));
    bundle.insert("projects".into(), Value::Array(projects));
    bundle.insert("environments".into(), environments(&instance.environments));
    bundle.insert("strategies".into(), strategies(&instance.strategies));
    bundle.insert(
        "contextFields".into(),
        context_fields(&instance.context_fields),
    );
    bundle.insert("tagTypes".into(), tag_types(&instance.tag_types));
    bundle.insert("tags".into(), tags(&instance.tags, &feature_tags));
    bundle.insert("segments".into(), Value::Array(segments));
    bundle.insert("features".into(), Value::Array(features));
    bundle.insert(
        "featureEnvironments".into(),
        Value::Array(feature_environments),
    );
    bundle.insert("featureTags".into(), Value::Array(feature_tags));
    bundle.insert("archivedFeatures".into(), Value::Array(archived));
    bundle.insert("apiTokens".into(), Value::Array(tokens));
    bundle.insert("addons".into(), addons(&instance.addons, &mut notes));
    (Value::Object(bundle), notes)
}

/// `value` as a string (numbers and booleans as their text; null as none).
pub(super) fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `value[field]` as a string, or "".
pub(super) fn field(value: &Value, name: &str) -> String {
    text(&value[name]).unwrap_or_default()
}

/// The listed fields of `item` that are present and not null.
fn pick(item: &Value, fields: &[&str]) -> Value {
    let mut picked = Map::new();
    for name in fields {
        if let Some(v) = item.get(*name).filter(|v| !v.is_null()) {
            picked.insert((*name).to_string(), v.clone());
        }
    }
    Value::Object(picked)
}

fn environments(listed: &[Value]) -> Value {
    listed
        .iter()
        .map(|e| {
            json!({"name": e["name"], "type": e["type"],
                   "enabled": e["enabled"].as_bool().unwrap_or(true),
                   "protected": e["protected"].as_bool().unwrap_or(false),
                   "sortOrder": e["sortOrder"].as_i64().unwrap_or(0)})
        })
        .collect()
}

fn strategies(listed: &[Value]) -> Value {
    let built_in: BTreeSet<String> = built_in_strategies().into_iter().map(|s| s.name).collect();
    listed
        .iter()
        .filter(|s| !built_in.contains(&field(s, "name")))
        .map(|s| {
            let parameters: Vec<Value> = s["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    json!({"name": p["name"], "type": field(p, "type"),
                           "description": field(p, "description"),
                           "required": p["required"].as_bool().unwrap_or(false)})
                })
                .collect();
            json!({"name": s["name"], "description": field(s, "description"),
                   "parameters": parameters,
                   "deprecated": s["deprecated"].as_bool().unwrap_or(false)})
        })
        .collect()
}

fn context_fields(listed: &[Value]) -> Value {
    listed
        .iter()
        .map(|f| {
            let legal: Vec<String> = f["legalValues"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| text(&v["value"]).or_else(|| text(v)))
                .collect();
            let mut item = pick(f, &["name", "description", "stickiness", "sortOrder"]);
            item["legalValues"] = json!(legal);
            item
        })
        .collect()
}

fn tag_types(listed: &[Value]) -> Value {
    listed
        .iter()
        .map(|t| json!({"name": t["name"], "description": field(t, "description")}))
        .collect()
}

/// The tags listed, and those toggles carry (a 4.x state export lists both).
fn tags(listed: &[Value], feature_tags: &[Value]) -> Value {
    let mut all: BTreeSet<(String, String)> = listed
        .iter()
        .map(|t| (field(t, "type"), field(t, "value")))
        .collect();
    all.extend(
        feature_tags
            .iter()
            .map(|t| (field(t, "tagType"), field(t, "tagValue"))),
    );
    all.into_iter()
        .map(|(kind, value)| json!({"type": kind, "value": value}))
        .collect()
}

fn segments(listed: &[Value]) -> Vec<Value> {
    listed
        .iter()
        .map(|s| {
            let mut item = pick(
                s,
                &[
                    "id",
                    "name",
                    "description",
                    "project",
                    "createdBy",
                    "createdAt",
                ],
            );
            item["constraints"] = constraints(&s["constraints"]);
            item
        })
        .collect()
}

/// Constraints with the fields Flagpole keeps.
fn constraints(listed: &Value) -> Value {
    listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            pick(
                c,
                &[
                    "contextName",
                    "operator",
                    "values",
                    "value",
                    "inverted",
                    "caseInsensitive",
                ],
            )
        })
        .collect()
}

/// A strategy of an export, in the stored shape.
fn strategy(s: &Value) -> Value {
    let parameters: Map<String, Value> = s["parameters"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| text(v).map(|t| (k.clone(), Value::String(t))))
        .collect();
    let mut item = pick(s, &["id", "name"]);
    // The 4.x–5.x state export names it `strategyName`.
    if item.get("name").is_none() {
        item["name"] = s["strategyName"].clone();
    }
    if let Some(title) = s["title"].as_str().filter(|t| !t.is_empty()) {
        item["title"] = json!(title);
    }
    if s["disabled"].as_bool() == Some(true) {
        item["disabled"] = json!(true);
    }
    item["parameters"] = Value::Object(parameters);
    item["constraints"] = constraints(&s["constraints"]);
    let segments: Vec<u64> = s["segments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_u64().or_else(|| v["id"].as_u64()))
        .collect();
    item["segments"] = json!(segments);
    let variants: Vec<Value> = s["variants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            pick(
                v,
                &["name", "weight", "weightType", "stickiness", "payload"],
            )
        })
        .collect();
    item["variants"] = json!(variants);
    item
}

/// Toggle variants, in the stored shape.
fn toggle_variants(listed: &Value) -> Value {
    listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let mut item = pick(v, &["name", "weight", "payload"]);
            item["weightType"] = json!(v["weightType"].as_str().unwrap_or("variable"));
            item["stickiness"] = json!(v["stickiness"].as_str().unwrap_or("default"));
            item["overrides"] = v["overrides"].as_array().map_or(json!([]), |o| json!(o));
            item
        })
        .collect()
}

/// A toggle's toggle-wide fields.
fn toggle(f: &Value) -> Value {
    let mut item = pick(
        f,
        &[
            "name",
            "description",
            "type",
            "project",
            "stale",
            "impressionData",
            "createdAt",
        ],
    );
    if item.get("project").is_none() {
        item["project"] = json!(DEFAULT_PROJECT);
    }
    item
}

type Sections = (
    Vec<Value>,
    Vec<Value>,
    BTreeMap<String, Vec<Value>>,
    Vec<Value>,
);

/// 6.x–7.x: toggles, their configuration per environment, dependencies and tags from one
/// features-batch export per environment.
fn from_exports(exports: &[(String, Value)]) -> Sections {
    let mut features: BTreeMap<String, Value> = BTreeMap::new();
    let mut per_environment = Vec::new();
    let mut dependencies = BTreeMap::new();
    let mut feature_tags = BTreeMap::new();
    for (environment, export) in exports {
        for f in export["features"].as_array().into_iter().flatten() {
            features
                .entry(field(f, "name"))
                .or_insert_with(|| toggle(f));
        }
        let mut strategies: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for s in export["featureStrategies"].as_array().into_iter().flatten() {
            strategies
                .entry(field(s, "featureName"))
                .or_default()
                .push(s);
        }
        for fe in export["featureEnvironments"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let name = text(&fe["featureName"]).unwrap_or_else(|| field(fe, "name"));
            let mut listed = strategies.remove(&name).unwrap_or_default();
            listed.sort_by_key(|s| s["sortOrder"].as_i64().unwrap_or(0));
            per_environment.push(json!({
                "featureName": name, "environment": environment,
                "enabled": fe["enabled"].as_bool().unwrap_or(false),
                "strategies": listed.into_iter().map(strategy).collect::<Vec<_>>(),
                "variants": toggle_variants(&fe["variants"]),
            }));
        }
        for d in export["dependencies"].as_array().into_iter().flatten() {
            dependencies.insert(field(d, "feature"), dependency_list(&d["dependencies"]));
        }
        for t in export["featureTags"].as_array().into_iter().flatten() {
            let item = json!({"featureName": t["featureName"], "tagType": t["tagType"],
                              "tagValue": t["tagValue"]});
            feature_tags.insert(item.to_string(), item);
        }
    }
    (
        features.into_values().collect(),
        per_environment,
        dependencies,
        feature_tags.into_values().collect(),
    )
}

/// Dependencies in the stored shape (`variants` only with `enabled`).
fn dependency_list(listed: &Value) -> Vec<Value> {
    listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let enabled = d["enabled"].as_bool().unwrap_or(true);
            let mut item = json!({"feature": d["feature"], "enabled": enabled});
            if let Some(variants) = d["variants"]
                .as_array()
                .filter(|v| enabled && !v.is_empty())
            {
                item["variants"] = json!(variants);
            }
            item
        })
        .collect()
}

/// 4.x–5.x: the same from the state export (`featureEnvironments` and `featureStrategies`
/// of every environment; 4.1's `:global:` environment is `default`).
fn from_state_export(
    state: &Value,
    environment_variants: &BTreeMap<(String, String), Value>,
    read_dependencies: &[Value],
) -> Sections {
    let environment_name = |v: &Value| match field(v, "environment").as_str() {
        ":global:" | "" => DEFAULT_ENVIRONMENT.to_string(),
        other => other.to_string(),
    };
    let features: Vec<Value> = state["features"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["archived"] != json!(true))
        .map(toggle)
        .collect();
    let active: BTreeSet<String> = features.iter().map(|f| field(f, "name")).collect();
    let mut strategies: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for s in state["featureStrategies"].as_array().into_iter().flatten() {
        strategies
            .entry((field(s, "featureName"), environment_name(s)))
            .or_default()
            .push(s);
    }
    let segments_of: BTreeMap<String, Vec<u64>> = state["featureStrategySegments"]
        .as_array()
        .into_iter()
        .flatten()
        .fold(BTreeMap::new(), |mut map, link| {
            if let Some(id) = link["segmentId"].as_u64() {
                map.entry(field(link, "featureStrategyId"))
                    .or_default()
                    .push(id);
            }
            map
        });
    let legacy_variants: BTreeMap<String, Value> = state["features"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| (field(f, "name"), f["variants"].clone()))
        .collect();
    let mut per_environment = Vec::new();
    for fe in state["featureEnvironments"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = field(fe, "featureName");
        if !active.contains(&name) {
            continue;
        }
        let environment = environment_name(fe);
        let mut listed = strategies
            .remove(&(name.clone(), environment.clone()))
            .unwrap_or_default();
        listed.sort_by_key(|s| s["sortOrder"].as_i64().unwrap_or(0));
        let strategies: Vec<Value> = listed
            .into_iter()
            .map(|s| {
                let mut item = strategy(s);
                if let Some(ids) = segments_of.get(&field(s, "id")) {
                    item["segments"] = json!(ids);
                }
                item
            })
            .collect();
        // Per environment in the export (5.x), else as the environment's client document
        // serves them (4.x), else on the toggle.
        let variants = match fe.get("variants") {
            Some(v) if v.is_array() => v.clone(),
            _ => environment_variants
                .get(&(name.clone(), environment.clone()))
                .or_else(|| legacy_variants.get(&name))
                .cloned()
                .unwrap_or(Value::Null),
        };
        per_environment.push(json!({
            "featureName": name, "environment": environment,
            "enabled": fe["enabled"].as_bool().unwrap_or(false),
            "strategies": strategies, "variants": toggle_variants(&variants),
        }));
    }
    let dependencies = read_dependencies
        .iter()
        .map(|d| (field(d, "feature"), dependency_list(&d["dependencies"])))
        .collect();
    let feature_tags = state["featureTags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| active.contains(&field(t, "featureName")))
        .map(|t| {
            json!({"featureName": t["featureName"],
                   "tagType": t.get("tagType").unwrap_or(&t["type"]),
                   "tagValue": t.get("tagValue").unwrap_or(&t["value"])})
        })
        .collect();
    (features, per_environment, dependencies, feature_tags)
}

fn with_dependencies(
    features: Vec<Value>,
    dependencies: &BTreeMap<String, Vec<Value>>,
) -> Vec<Value> {
    features
        .into_iter()
        .map(|mut f| {
            if let Some(list) = dependencies
                .get(&field(&f, "name"))
                .filter(|l| !l.is_empty())
            {
                f["dependencies"] = json!(list);
            }
            f
        })
        .collect()
}

/// Archived toggles, less any name that is active too.
fn archived(listed: &[Value], features: &[Value]) -> Vec<Value> {
    let active: BTreeSet<String> = features.iter().map(|f| field(f, "name")).collect();
    let mut seen = BTreeSet::new();
    listed
        .iter()
        .filter(|a| {
            let name = field(a, "name");
            !active.contains(&name) && seen.insert(name)
        })
        .map(|a| {
            pick(
                a,
                &[
                    "name",
                    "project",
                    "type",
                    "description",
                    "createdAt",
                    "archivedAt",
                ],
            )
        })
        .collect()
}

fn tokens(listed: &[Value]) -> Vec<Value> {
    listed
        .iter()
        .filter(|t| t["secret"].as_str().is_some_and(|s| !s.is_empty()))
        .map(|t| {
            let projects: Vec<Value> = match t["projects"].as_array() {
                Some(p) if !p.is_empty() => p.clone(),
                _ => vec![json!(t["project"].as_str().unwrap_or("*"))],
            };
            let mut item = pick(t, &["secret", "alias", "expiresAt", "createdAt"]);
            item["tokenName"] = json!(t["tokenName"]
                .as_str()
                .or_else(|| t["username"].as_str())
                .unwrap_or("unleash"));
            item["type"] = json!(field(t, "type").to_ascii_lowercase());
            item["projects"] = json!(projects);
            item["environment"] = json!(t["environment"].as_str().unwrap_or(DEFAULT_ENVIRONMENT));
            item
        })
        .collect()
}

/// Every project the instance names: listed, or named by toggles, archived toggles, tokens
/// and segments (open-source Unleash lists only `default`).
fn projects(
    instance: &UnleashInstance,
    features: &[Value],
    archived: &[Value],
    tokens: &[Value],
    segments: &[Value],
) -> Vec<Value> {
    let mut projects: BTreeMap<String, Value> = BTreeMap::new();
    for p in &instance.projects {
        let id = field(p, "id");
        if !id.is_empty() {
            let mut item = json!({"id": id, "name": p["name"].as_str().unwrap_or(&id)});
            if let Some(d) = p["description"].as_str().filter(|d| !d.is_empty()) {
                item["description"] = json!(d);
            }
            projects.insert(id, item);
        }
    }
    let named = features
        .iter()
        .chain(archived)
        .chain(segments)
        .filter_map(|v| v["project"].as_str())
        .chain(
            tokens
                .iter()
                .flat_map(|t| t["projects"].as_array().into_iter().flatten())
                .filter_map(Value::as_str),
        );
    for id in named.filter(|id| !id.is_empty() && *id != "*" && *id != "[]") {
        projects
            .entry(id.to_string())
            .or_insert_with(|| json!({"id": id, "name": id}));
    }
    projects.into_values().collect()
}
