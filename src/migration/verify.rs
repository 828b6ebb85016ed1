//! Verification by construction: Unleash's and Flagpole's `/api/client/features` for the same
//! caller — every environment (with an admin token) and every migrated client token — with
//! and without `Unleash-Client-Spec`, compared after a normalisation (docs/migration.md) and
//! each difference reported with its path. What the normalisation takes out is only what
//! differs in form: volatile fields (`meta`: revision, ETag), the echo of the request
//! (`query`), the document's `version` and the 3.x fields Flagpole adds for old SDKs
//! (`strategy`, `parameters` on a feature), fields Flagpole's client document does not carry
//! and no SDK evaluates (`description`, `project`, timestamps; a segment's `description`,
//! `createdBy` and `createdAt`, which 4.x serves), order (features by name,
//! segments by id, keys), and empty lists, nulls and `false` constraint flags, which SDKs read
//! as absent.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::store_fit::SegmentIds;
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

/// What the comparison found, and how long Unleash took to answer its part.
#[derive(Debug, Default)]
pub struct Verification {
    /// Each difference as `caller (form): path: …`.
    pub differences: Vec<String>,
    /// Time spent waiting for Unleash's documents (fetched while Flagpole's are).
    pub unleash_time: Duration,
}

/// Compares the documents of every caller, Unleash's and Flagpole's fetched side by side;
/// Unleash's segment ids read as the bundle's (`segment_ids`), and Flagpole's own segments
/// (none of the bundle's) are left out.
pub async fn verify(
    unleash: &UnleashApi,
    flagpole_base: &str,
    callers: &[Caller],
    segment_ids: &SegmentIds,
) -> Result<Verification, MigrationError> {
    let mut verification = Verification::default();
    for caller in callers {
        let route = match &caller.environment {
            Some(e) => format!("/api/client/features?environment={e}"),
            None => "/api/client/features".to_string(),
        };
        let theirs = UnleashApi::new(unleash.base(), &caller.unleash_token)?;
        let ours = UnleashApi::new(flagpole_base, &caller.flagpole_token)?;
        for spec in [Some(SPEC), None] {
            let headers: Vec<(&'static str, &str)> = spec
                .map(|s| ("Unleash-Client-Spec", s))
                .into_iter()
                .collect();
            let timed = async {
                let started = Instant::now();
                let answer = theirs.get_with(&route, &headers).await;
                (answer, started.elapsed())
            };
            let ((expected, waited), actual) = tokio::join!(timed, ours.get_with(&route, &headers));
            verification.unleash_time += waited;
            let (expected, _) = expected?;
            let (actual, _) = actual.map_err(|e| {
                MigrationError::Store(format!("Flagpole's own client API ({route}): {e}"))
            })?;
            let form = if spec.is_some() {
                "by reference"
            } else {
                "inlined"
            };
            let mut found = Vec::new();
            let expected = with_segment_ids(expected, segment_ids);
            let actual = without_own_segments(actual, segment_ids);
            compare(&normalise(expected), &normalise(actual), "", &mut found);
            verification.differences.extend(
                found
                    .into_iter()
                    .map(|d| format!("{} (segments {form}): {d}", caller.label)),
            );
        }
    }
    Ok(verification)
}

/// The document with what is allowed to differ taken out and lists made comparable.
pub fn normalise(mut document: Value) -> Value {
    if let Some(top) = document.as_object_mut() {
        for volatile in ["meta", "query", "version"] {
            top.remove(volatile);
        }
        if let Some(Value::Array(features)) = top.remove("features") {
            let by_name: Map<String, Value> = features
                .into_iter()
                .map(|mut f| {
                    let name = f["name"].as_str().unwrap_or_default().to_string();
                    if let Some(feature) = f.as_object_mut() {
                        for field in NOT_EVALUATED {
                            feature.remove(field);
                        }
                    }
                    (name, without_empty(f))
                })
                .collect();
            top.insert("features".into(), Value::Object(by_name));
        }
        if let Some(Value::Array(segments)) = top.remove("segments") {
            let by_id: Map<String, Value> = segments
                .into_iter()
                .map(|mut s| {
                    if let Some(segment) = s.as_object_mut() {
                        for field in SEGMENT_NOT_EVALUATED {
                            segment.remove(field);
                        }
                    }
                    (s["id"].to_string(), without_empty(s))
                })
                .collect();
            // No segments: as absent (Unleash sends `[]` by reference, Flagpole nothing).
            if !by_id.is_empty() {
                top.insert("segments".into(), Value::Object(by_id));
            }
        }
    }
    document
}

/// Unleash's document with its segment ids (segments, strategies' references) as the bundle's.
fn with_segment_ids(mut document: Value, segment_ids: &SegmentIds) -> Value {
    let through = |value: &mut Value| {
        if let Some(id) = value.as_u64().and_then(|id| segment_ids.get(&id)) {
            *value = Value::from(*id);
        }
    };
    for segment in document["segments"].as_array_mut().into_iter().flatten() {
        through(&mut segment["id"]);
    }
    for feature in document["features"].as_array_mut().into_iter().flatten() {
        for strategy in feature["strategies"].as_array_mut().into_iter().flatten() {
            for reference in strategy["segments"].as_array_mut().into_iter().flatten() {
                through(reference);
            }
        }
    }
    document
}

/// Flagpole's document less the segments that did not come from Unleash (records of
/// Flagpole's own that no migrated toggle refers to).
fn without_own_segments(mut document: Value, segment_ids: &SegmentIds) -> Value {
    if let Some(segments) = document["segments"].as_array_mut() {
        segments.retain(|s| {
            s["id"]
                .as_u64()
                .is_some_and(|id| segment_ids.values().any(|v| *v == id))
        });
    }
    document
}

/// Feature fields left out of the comparison: Flagpole's 3.x fields, and what its client
/// document does not carry and SDKs do not evaluate.
const NOT_EVALUATED: [&str; 6] = [
    "strategy",
    "parameters",
    "description",
    "project",
    "createdAt",
    "lastSeenAt",
];

/// Segment fields left out of the comparison: 4.x's client document carries the whole
/// segment record, SDKs read only its id and constraints.
const SEGMENT_NOT_EVALUATED: [&str; 3] = ["description", "createdBy", "createdAt"];

/// `value` without empty lists, nulls and `false` constraint flags at any depth (SDKs read
/// them as absent).
fn without_empty(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .filter(|(key, v)| {
                    !(v.is_null()
                        || v.as_array().is_some_and(Vec::is_empty)
                        || (matches!(key.as_str(), "inverted" | "caseInsensitive")
                            && *v == Value::Bool(false)))
                })
                .map(|(key, v)| (key, without_empty(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_empty).collect()),
        other => other,
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
            "segments": [{"id": 2, "name": "s", "constraints": [], "description": "4.x",
                          "createdBy": "admin", "createdAt": "2023-01-01T00:00:00.000Z"}]});
        let same = json!({"version": 2, "query": {"environment": "development"},
            "features": [{"name": "a", "enabled": false},
                         {"name": "b", "enabled": true, "strategies": [{"name": "default",
                "constraints": [{"contextName": "x", "operator": "IN", "values": ["1"]}]}]}],
            "segments": [{"id": 2, "name": "s", "constraints": []}]});
        let mut found = Vec::new();
        compare(
            &normalise(unleash.clone()),
            &normalise(same),
            "",
            &mut found,
        );
        assert_eq!(found, Vec::<String>::new());
        let other = json!({"version": 2, "features": [{"name": "a", "enabled": true},
            {"name": "b", "enabled": true, "strategies": [{"name": "default",
                "constraints": [{"contextName": "x", "operator": "IN", "values": ["2"]}]}]}]});
        compare(&normalise(unleash), &normalise(other), "", &mut found);
        assert_eq!(
            found,
            [
                "features.b.strategies[0].constraints[0].values[0]: Unleash \"1\", Flagpole \"2\"",
                "features.a.enabled: Unleash false, Flagpole true",
                "segments: only in Unleash: {\"2\":{\"id\":2,\"name\":\"s\"}}",
            ]
        );
    }
}
