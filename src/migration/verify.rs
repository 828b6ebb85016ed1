//! Verification by construction: Unleash's and Flagpole's `/api/client/features` for the same
//! caller — every environment (with an admin token) and every migrated client token — with
//! and without `Unleash-Client-Spec`, compared after a normalisation (docs/migration.md):
//! `meta` and `query` left out (revision ids, hashes, the echo of the request), features by
//! name, segments by id, object keys in any order, constraint fields at their defaults
//! (`inverted: false`, `caseInsensitive: false`) left out. Each difference with its path.

use serde_json::{Map, Value};

use super::unleash_api::{MigrationError, UnleashApi};

/// One caller to compare: what it is called in the report, its token on each side and the
/// environment asked for (admin tokens only).
#[derive(Debug, Clone)]
pub struct Caller {
    pub label: String,
    pub unleash_token: String,
    pub flagpole_token: String,
    pub environment: Option<String>,
}

/// The spec version modern SDKs send (Node unleash-client 6.x): segments by reference.
const SPEC: &str = "5.2.0";

/// The differences of every caller, as `caller, with/without spec: path: …` lines.
pub async fn verify(
    unleash: &UnleashApi,
    flagpole_base: &str,
    callers: &[Caller],
) -> Result<Vec<String>, MigrationError> {
    let mut differences = Vec::new();
    for caller in callers {
        let route = match &caller.environment {
            Some(e) => format!("/api/client/features?environment={e}"),
            None => "/api/client/features".to_string(),
        };
        let theirs = UnleashApi::new(unleash.base(), &caller.unleash_token)?;
        let ours = UnleashApi::new(flagpole_base, &caller.flagpole_token)?;
        for spec in [Some(SPEC), None] {
            let headers: Vec<(&'static str, &str)> =
                spec.map(|s| ("Unleash-Client-Spec", s)).into_iter().collect();
            let (expected, _) = theirs.get_with(&route, &headers).await?;
            let (actual, _) = ours.get_with(&route, &headers).await.map_err(|e| {
                MigrationError::Store(format!("Flagpole's own client API ({route}): {e}"))
            })?;
            let form = if spec.is_some() { "by reference" } else { "inlined" };
            let mut found = Vec::new();
            compare(&normalise(expected), &normalise(actual), "", &mut found);
            differences.extend(
                found
                    .into_iter()
                    .map(|d| format!("{} (segments {form}): {d}", caller.label)),
            );
        }
    }
    Ok(differences)
}

/// The document with what is allowed to differ taken out and lists made comparable.
pub fn normalise(mut document: Value) -> Value {
    if let Some(top) = document.as_object_mut() {
        top.remove("meta");
        top.remove("query");
        if let Some(Value::Array(features)) = top.remove("features") {
            let by_name: Map<String, Value> = features
                .into_iter()
                .map(|f| {
                    let name = f["name"].as_str().unwrap_or_default().to_string();
                    (name, normalise_feature(f))
                })
                .collect();
            top.insert("features".into(), Value::Object(by_name));
        }
        if let Some(Value::Array(segments)) = top.remove("segments") {
            let by_id: Map<String, Value> = segments
                .into_iter()
                .map(|mut s| {
                    let id = s["id"].to_string();
                    if let Some(c) = s.get_mut("constraints") {
                        normalise_constraints(c);
                    }
                    (id, s)
                })
                .collect();
            top.insert("segments".into(), Value::Object(by_id));
        }
    }
    document
}

fn normalise_feature(mut feature: Value) -> Value {
    if let Some(object) = feature.as_object_mut() {
        object.remove("createdAt");
        object.remove("lastSeenAt");
        if let Some(Value::Array(strategies)) = object.get_mut("strategies") {
            for strategy in strategies {
                if let Some(c) = strategy.get_mut("constraints") {
                    normalise_constraints(c);
                }
            }
        }
    }
    feature
}

fn normalise_constraints(constraints: &mut Value) {
    for constraint in constraints.as_array_mut().into_iter().flatten() {
        if let Some(c) = constraint.as_object_mut() {
            for flag in ["inverted", "caseInsensitive"] {
                if c.get(flag) == Some(&Value::Bool(false)) {
                    c.remove(flag);
                }
            }
        }
    }
}

/// Records every difference between `expected` (Unleash) and `actual` (Flagpole) under `path`.
pub fn compare(expected: &Value, actual: &Value, path: &str, found: &mut Vec<String>) {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                match a.get(key) {
                    Some(other) => compare(value, other, &at(key), found),
                    None => found.push(format!("{}: only in Unleash: {value}", at(key))),
                }
            }
            for (key, value) in a.iter().filter(|(k, _)| !e.contains_key(*k)) {
                found.push(format!("{}: only in Flagpole: {value}", at(key)));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                compare(x, y, &format!("{path}[{i}]"), found);
            }
        }
        _ if expected != actual => found.push(format!(
            "{}: Unleash {expected}, Flagpole {actual}",
            if path.is_empty() { "(document)" } else { path }
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_named_by_path_after_normalising() {
        let unleash = json!({"version": 2, "meta": {"revisionId": 7},
            "features": [{"name": "b", "enabled": true, "strategies": [{"name": "default",
                "constraints": [{"contextName": "x", "operator": "IN", "values": ["1"],
                                 "inverted": false}]}]},
                         {"name": "a", "enabled": false}],
            "segments": [{"id": 2, "name": "s", "constraints": []}]});
        let same = json!({"version": 2, "query": {"environment": "development"},
            "features": [{"name": "a", "enabled": false},
                         {"name": "b", "enabled": true, "strategies": [{"name": "default",
                "constraints": [{"contextName": "x", "operator": "IN", "values": ["1"]}]}]}],
            "segments": [{"id": 2, "name": "s", "constraints": []}]});
        let mut found = Vec::new();
        compare(&normalise(unleash.clone()), &normalise(same), "", &mut found);
        assert_eq!(found, Vec::<String>::new());
        let other = json!({"version": 2, "features": [{"name": "a", "enabled": true},
            {"name": "b", "enabled": true, "strategies": [{"name": "default",
                "constraints": [{"contextName": "x", "operator": "IN", "values": ["2"]}]}]}]});
        compare(&normalise(unleash), &normalise(other), "", &mut found);
        assert_eq!(
            found,
            [
                "features.a.enabled: Unleash false, Flagpole true",
                "features.b.strategies[0].constraints[0].values[0]: Unleash \"1\", Flagpole \"2\"",
                "segments: only in Unleash: {\"2\":{\"constraints\":[],\"id\":2,\"name\":\"s\"}}",
            ]
        );
    }
}
