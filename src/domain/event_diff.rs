//! Differences between consecutive events about the same resource, in the deep-diff format
//! the admin UI reads (`kind` E/N/D/A with `path`, `lhs`, `rhs`; API-FACTS §3.1).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::event::Event;

/// The resource family an event type belongs to; events of one family and name are diffed.
fn family(kind: &str) -> &str {
    if kind == "feature-tagged" || kind == "feature-untagged" {
        kind
    } else if kind.starts_with("feature-") {
        "feature"
    } else if kind.starts_with("tag-type-") {
        "tag-type"
    } else if kind.starts_with("tag-") {
        "tag"
    } else if kind.starts_with("strategy-") {
        "strategy"
    } else if kind.starts_with("project-") {
        "project"
    } else if kind.starts_with("context-field-") {
        "context-field"
    } else {
        kind
    }
}

/// The resource an event is about: a project's `id` (its `name` is a display name that can
/// change), otherwise `name` or `featureName`.
fn subject(event: &Event) -> Option<&str> {
    let data = &event.data;
    if event.kind.starts_with("project-") {
        return data.get("id").and_then(Value::as_str);
    }
    data.get("name")
        .or_else(|| data.get("featureName"))
        .and_then(Value::as_str)
}

/// Each event of a newest-first listing as JSON with `diffs`: the changes from the next older
/// event of the same resource in the listing, or `null` for the oldest one.
pub fn with_diffs(events: &[Event]) -> Vec<Value> {
    let mut previous: HashMap<(&str, Option<&str>), &Value> = HashMap::new();
    let mut out = vec![Value::Null; events.len()];
    for (i, event) in events.iter().enumerate().rev() {
        let key = (family(&event.kind), subject(event));
        let diffs = match previous.insert(key, &event.data) {
            Some(older) => {
                let mut changes = Vec::new();
                diff(older, &event.data, &mut Vec::new(), &mut changes);
                Value::Array(changes)
            }
            None => Value::Null,
        };
        let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("diffs".into(), diffs);
        }
        out[i] = value;
    }
    out
}

/// The changes from `lhs` to `rhs` in the deep-diff format.
pub fn differences(lhs: &Value, rhs: &Value) -> Vec<Value> {
    let mut changes = Vec::new();
    diff(lhs, rhs, &mut Vec::new(), &mut changes);
    changes
}

fn diff(lhs: &Value, rhs: &Value, path: &mut Vec<Value>, out: &mut Vec<Value>) {
    match (lhs, rhs) {
        (Value::Object(l), Value::Object(r)) => diff_objects(l, r, path, out),
        (Value::Array(l), Value::Array(r)) => {
            for (i, (a, b)) in l.iter().zip(r).enumerate() {
                path.push(json!(i));
                diff(a, b, path, out);
                path.pop();
            }
            for (i, added) in r.iter().enumerate().skip(l.len()) {
                out.push(json!({"kind": "A", "path": path, "index": i, "item": {"kind": "N", "rhs": added}}));
            }
            for (i, removed) in l.iter().enumerate().skip(r.len()) {
                out.push(json!({"kind": "A", "path": path, "index": i, "item": {"kind": "D", "lhs": removed}}));
            }
        }
        _ if lhs != rhs => out.push(json!({"kind": "E", "path": path, "lhs": lhs, "rhs": rhs})),
        _ => {}
    }
}

fn diff_objects(
    l: &Map<String, Value>,
    r: &Map<String, Value>,
    path: &mut Vec<Value>,
    out: &mut Vec<Value>,
) {
    for (key, old) in l {
        path.push(json!(key));
        match r.get(key) {
            Some(new) => diff(old, new, path, out),
            None => out.push(json!({"kind": "D", "path": path, "lhs": old})),
        }
        path.pop();
    }
    for (key, new) in r {
        if !l.contains_key(key) {
            path.push(json!(key));
            out.push(json!({"kind": "N", "path": path, "rhs": new}));
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn event(id: u64, kind: &str, data: Value) -> Event {
        Event {
            id,
            kind: kind.into(),
            created_by: "t".into(),
            created_at: Utc::now(),
            data,
            tags: vec![],
        }
    }

    #[test]
    fn diffs_follow_the_previous_event_of_the_same_resource() {
        let events = vec![
            event(
                4,
                "feature-updated",
                json!({"name": "a", "enabled": true, "strategies": [1, 2], "new": 1}),
            ),
            event(3, "feature-created", json!({"name": "b", "enabled": false})),
            event(
                2,
                "feature-updated",
                json!({"name": "a", "enabled": false, "strategies": [1], "old": 1}),
            ),
            event(
                1,
                "feature-created",
                json!({"name": "a", "enabled": false, "strategies": [1], "old": 1}),
            ),
        ];
        let listed = with_diffs(&events);
        assert_eq!(
            listed[0]["diffs"],
            json!([
                {"kind": "E", "path": ["enabled"], "lhs": false, "rhs": true},
                {"kind": "A", "path": ["strategies"], "index": 1, "item": {"kind": "N", "rhs": 2}},
                {"kind": "D", "path": ["old"], "lhs": 1},
                {"kind": "N", "path": ["new"], "rhs": 1},
            ])
        );
        assert_eq!(listed[1]["diffs"], Value::Null);
        assert_eq!(listed[2]["diffs"], json!([]));
        assert_eq!(listed[3]["diffs"], Value::Null);
        assert_eq!(listed[0]["id"], 4);
    }
}
