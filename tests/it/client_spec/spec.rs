//! Loading `@unleash/client-specification`: every file named by `index.json`, its state as the
//! client-features document a server serves, and its cases.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The version whose files (and whose SDK deviations) the tests are written for.
pub const SPEC_VERSION: &str = "6.1.0";

/// One specification file: the document to serve and the cases to evaluate against it.
#[derive(Debug, Clone)]
pub struct SpecFile {
    /// The file name without `.json`, e.g. `01-simple-examples`; also the path prefix under
    /// which a server serves it, so it must stay URL-safe (every 6.1.0 name is).
    pub id: String,
    /// The plain client-features document (`{"version", "features", "segments"?}`).
    pub document: Value,
    /// `tests` first, then `variantTests`, in file order.
    pub cases: Vec<Case>,
}

/// One case of a file.
#[derive(Debug, Clone)]
pub struct Case {
    /// Unique within its file (checked when loading): the case's identity in reports and in
    /// the deviation list.
    pub description: String,
    pub toggle: String,
    /// Unleash context fields as the file writes them (`userId`, `properties`, ...).
    pub context: Value,
    pub expected: Expected,
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// A `tests` case: `isEnabled(toggle, context)`.
    Enabled(bool),
    /// A `variantTests` case: `getVariant(toggle, context)` as the file writes it
    /// (`name`, `enabled`, `feature_enabled`, `payload`?).
    Variant(Value),
}

/// Where the installed package keeps its files: `tests/sdk/node_modules` (or the folder
/// `FLAGPOLE_SDK_NODE_DIR` names), installed by `scripts/test.sh` with the Node SDK. `None`
/// (after saying so) when it is not installed.
pub fn installed_spec_dir() -> Option<PathBuf> {
    let sdk_dir = match std::env::var("FLAGPOLE_SDK_NODE_DIR") {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk"),
    };
    let package = sdk_dir.join("node_modules/@unleash/client-specification");
    let Ok(text) = std::fs::read_to_string(package.join("package.json")) else {
        eprintln!(
            "skipping: {} is not installed (scripts/test.sh installs it)",
            package.display()
        );
        return None;
    };
    let manifest: Value = serde_json::from_str(&text).expect("the package's package.json");
    assert_eq!(
        manifest["version"],
        SPEC_VERSION,
        "{} holds another version of the client specification than the tests are written for",
        package.display()
    );
    Some(package.join("specifications"))
}

/// Every file `index.json` names, in its order.
pub fn load_all(dir: &Path) -> Vec<SpecFile> {
    let index: Vec<String> = serde_json::from_slice(
        &std::fs::read(dir.join("index.json")).expect("the specification's index.json"),
    )
    .expect("index.json: a list of file names");
    index
        .iter()
        .map(|name| {
            let text = std::fs::read(dir.join(name))
                .unwrap_or_else(|e| panic!("reading the specification file {name}: {e}"));
            let file: Value =
                serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
            let id = name.strip_suffix(".json").unwrap_or(name).to_string();
            parse_file(id, &file).unwrap_or_else(|e| panic!("{name}: {e}"))
        })
        .collect()
}

/// One file's document and cases.
pub fn parse_file(id: String, file: &Value) -> Result<SpecFile, String> {
    let document = client_document(&file["state"])?;
    let mut cases = Vec::new();
    for (key, variant) in [("tests", false), ("variantTests", true)] {
        let Some(list) = file.get(key) else { continue };
        for case in list.as_array().ok_or(format!("{key} is not a list"))? {
            let text = |field: &str| {
                case[field]
                    .as_str()
                    .map(str::to_string)
                    .ok_or(format!("a case without a string {field}: {case}"))
            };
            let expected = if variant {
                Expected::Variant(case["expectedResult"].clone())
            } else {
                Expected::Enabled(
                    case["expectedResult"]
                        .as_bool()
                        .ok_or(format!("a test whose expectedResult is not a bool: {case}"))?,
                )
            };
            cases.push(Case {
                description: text("description")?,
                toggle: text("toggleName")?,
                context: case.get("context").cloned().unwrap_or_else(|| json!({})),
                expected,
            });
        }
    }
    for (i, case) in cases.iter().enumerate() {
        if cases[..i].iter().any(|c| c.description == case.description) {
            return Err(format!("two cases are both {:?}", case.description));
        }
    }
    Ok(SpecFile {
        id,
        document,
        cases,
    })
}

/// The document a server serves for a file's `state`: the state itself when it is a plain
/// one (as written: served verbatim), or, when it holds delta `events` (files 19 and 20), the
/// plain state those events leave, replayed in order from nothing:
///
/// - `hydration` replaces every feature and segment;
/// - `feature-updated` replaces the feature of that name, or appends it;
/// - `feature-removed` (`featureName`) removes it;
/// - `segment-updated` replaces the segment of that id, or appends it;
/// - `segment-removed` (`segmentId`) removes it.
///
/// The result is `{"version": 2, "features": [...], "segments": [...]}`, version 2 being the
/// one that carries `segments`. An unknown event type is an error, not something to skip:
/// skipping would serve a state the file does not describe.
pub fn client_document(state: &Value) -> Result<Value, String> {
    let Some(events) = state.get("events") else {
        if !state["features"].is_array() {
            return Err(format!("a state without features or events: {state}"));
        }
        return Ok(state.clone());
    };
    let mut features: Vec<Value> = Vec::new();
    let mut segments: Vec<Value> = Vec::new();
    let upsert = |list: &mut Vec<Value>, key: &str, item: &Value| match list
        .iter_mut()
        .find(|old| old[key] == item[key])
    {
        Some(old) => *old = item.clone(),
        None => list.push(item.clone()),
    };
    for event in events.as_array().ok_or("state.events is not a list")? {
        let list = |key: &str| -> Result<Vec<Value>, String> {
            match event.get(key) {
                None => Ok(Vec::new()),
                Some(v) => v
                    .as_array()
                    .cloned()
                    .ok_or(format!("{key} is not a list in {event}")),
            }
        };
        match event["type"].as_str() {
            Some("hydration") => {
                features = list("features")?;
                segments = list("segments")?;
            }
            Some("feature-updated") => upsert(&mut features, "name", &event["feature"]),
            Some("feature-removed") => features.retain(|f| f["name"] != event["featureName"]),
            Some("segment-updated") => upsert(&mut segments, "id", &event["segment"]),
            Some("segment-removed") => segments.retain(|s| s["id"] != event["segmentId"]),
            _ => return Err(format!("an event of an unknown type: {event}")),
        }
    }
    Ok(json!({"version": 2, "features": features, "segments": segments}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_spec_a_plain_state_is_served_as_written() {
        let state = json!({"version": 1, "features": [{"name": "a", "enabled": true}]});
        assert_eq!(client_document(&state).unwrap(), state);
    }

    #[test]
    fn client_spec_delta_events_are_replayed_into_a_plain_state() {
        let feature = |name: &str, on: bool| json!({"name": name, "enabled": on});
        let segment = |id: u32, value: &str| {
            json!({"id": id, "constraints": [
                {"contextName": "appName", "operator": "IN", "values": [value]}]})
        };
        let state = json!({"events": [
            {"eventId": 1, "type": "hydration",
             "features": [feature("a", true), feature("b", true)],
             "segments": [segment(1, "x"), segment(2, "y")]},
            {"eventId": 2, "type": "feature-updated", "feature": feature("a", false)},
            {"eventId": 3, "type": "feature-updated", "feature": feature("c", true)},
            {"eventId": 4, "type": "feature-removed", "featureName": "b", "project": "default"},
            {"eventId": 5, "type": "segment-updated", "segment": segment(1, "z")},
            {"eventId": 6, "type": "segment-removed", "segmentId": 2},
            {"eventId": 7, "type": "segment-updated", "segment": segment(3, "w")},
        ]});
        assert_eq!(
            client_document(&state).unwrap(),
            json!({
                "version": 2,
                "features": [feature("a", false), feature("c", true)],
                "segments": [segment(1, "z"), segment(3, "w")],
            })
        );
    }

    #[test]
    fn client_spec_a_later_hydration_starts_over_and_unknown_events_are_refused() {
        let state = json!({"events": [
            {"type": "feature-updated", "feature": {"name": "gone"}},
            {"type": "hydration", "features": [{"name": "kept"}]},
        ]});
        assert_eq!(
            client_document(&state).unwrap(),
            json!({"version": 2, "features": [{"name": "kept"}], "segments": []})
        );
        let state = json!({"events": [{"type": "feature-archived"}]});
        assert!(client_document(&state).is_err());
    }

    #[test]
    fn client_spec_a_file_yields_its_tests_then_its_variant_tests() {
        let file = json!({
            "name": "x",
            "state": {"version": 1, "features": []},
            "tests": [{"description": "on", "context": {"userId": "1"},
                       "toggleName": "t", "expectedResult": true}],
            "variantTests": [{"description": "v", "context": {}, "toggleName": "t",
                              "expectedResult": {"name": "disabled", "enabled": false}}]
        });
        let parsed = parse_file("x".into(), &file).unwrap();
        assert_eq!(parsed.cases.len(), 2);
        assert_eq!(parsed.cases[0].expected, Expected::Enabled(true));
        assert_eq!(parsed.cases[0].context, json!({"userId": "1"}));
        assert_eq!(
            parsed.cases[1].expected,
            Expected::Variant(json!({"name": "disabled", "enabled": false}))
        );
    }
}
