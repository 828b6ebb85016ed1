//! Unleash's addons in the bundle: those of a provider Flagpole has, with the parameters and
//! events Flagpole's provider takes; the secrets Unleash shows masked (`*****`, 5.x–7.x) left
//! out, the addon disabled and the parameters to re-enter noted.

use serde_json::{json, Map, Value};

use super::bundle::{field, text, Notes};
use crate::domain::addon::{providers, MASK};

/// An addon whose secrets Unleash shows masked: moved in disabled, these to re-enter.
#[derive(Debug, Clone, PartialEq)]
pub struct Reenter {
    /// Its id in the bundle (Unleash's, unless renumbered).
    pub id: u64,
    pub provider: String,
    pub description: String,
    /// The Flagpole parameters Unleash showed masked.
    pub parameters: Vec<String>,
    /// Whether Unleash has it enabled (it is enabled again once its secrets are re-entered).
    pub enabled_in_unleash: bool,
}

/// How a masked parameter is named to the operator.
pub fn parameter_label(key: &str) -> String {
    if key == "customHeaders" {
        "customHeaders (Unleash's authorization)".into()
    } else {
        key.to_string()
    }
}

/// Placeholder of a required URL that Unleash shows masked (the addon moves in disabled).
pub const MASKED_URL: &str = "https://re-enter.invalid/";

/// Addons of a provider Flagpole has; masked secrets dropped and the addon disabled.
pub fn addons(listed: &[Value], notes: &mut Notes) -> Value {
    let known = providers();
    let mut moved = Vec::new();
    for a in listed {
        let id = a["id"].as_u64().unwrap_or(0);
        let name = field(a, "provider");
        let Some(provider) = known.iter().find(|p| p.name == name) else {
            notes.left_behind.push(format!(
                "addon {id} ({name}): Flagpole has no {name} provider"
            ));
            continue;
        };
        let mut parameters = Map::new();
        let mut masked = Vec::new();
        for (key, value) in a["parameters"].as_object().into_iter().flatten() {
            let Some(value) = text(value) else { continue };
            // Unleash's webhook `authorization` is Flagpole's `Authorization` custom header.
            if name == "webhook" && key == "authorization" {
                if value.contains(MASK) {
                    masked.push("customHeaders".to_string());
                } else if !value.is_empty() {
                    let mut headers: Map<String, Value> = parameters
                        .get("customHeaders")
                        .and_then(Value::as_str)
                        .and_then(|h| serde_json::from_str(h).ok())
                        .unwrap_or_default();
                    headers.insert("Authorization".into(), Value::String(value));
                    parameters.insert(
                        "customHeaders".into(),
                        Value::String(Value::Object(headers).to_string()),
                    );
                }
                continue;
            }
            if !provider.parameters.iter().any(|p| p.name == key) {
                notes.left_behind.push(format!(
                    "addon {id} ({name}): parameter \"{key}\" (Flagpole's {name} has none)"
                ));
            } else if value.contains(MASK) {
                masked.push(key.clone());
            } else if !value.is_empty() {
                parameters.insert(key.clone(), Value::String(value));
            }
        }
        for required in provider.parameters.iter().filter(|p| p.required) {
            if masked.iter().any(|m| m == required.name) && required.kind == "url" {
                parameters.insert(required.name.to_string(), json!(MASKED_URL));
            }
        }
        let (events, dropped): (Vec<String>, Vec<String>) = a["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str().map(str::to_string))
            .partition(|e| provider.events.contains(&e.as_str()));
        if !dropped.is_empty() {
            notes.left_behind.push(format!(
                "addon {id} ({name}): events Flagpole does not send: {}",
                dropped.join(", ")
            ));
        }
        let description = field(a, "description");
        let enabled_in_unleash = a["enabled"].as_bool().unwrap_or(false);
        if !masked.is_empty() {
            notes.reenter.push(Reenter {
                id,
                provider: name.clone(),
                description: description.clone(),
                parameters: masked.clone(),
                enabled_in_unleash,
            });
        }
        let mut item = json!({
            "id": id, "provider": name, "description": description,
            "enabled": enabled_in_unleash && masked.is_empty(),
            "parameters": parameters, "events": events,
        });
        // Unleash's creation time is stored with it: what tells a rerun which stored addon
        // this one is.
        if let Some(created_at) = a["createdAt"].as_str() {
            item["createdAt"] = json!(created_at);
        }
        moved.push(item);
    }
    Value::Array(moved)
}
