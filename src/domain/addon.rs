//! Addons: the providers (webhook, slack) with their parameters and events, and the
//! configurations admins make of them (spec §2.10, §2.11; API-FACTS §8).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{DomainError, ValidationErrors};
use super::fields::{refuse_unsupported, ExtraFields};
use super::tag::TagType;
use super::template;

/// What a sensitive parameter is shown as; sent back on update, it keeps the stored value.
pub const MASK: &str = "*****";

/// The event kinds both providers deliver (API-FACTS §8.2).
pub const ADDON_EVENTS: [&str; 6] = [
    "feature-created",
    "feature-updated",
    "feature-archived",
    "feature-revived",
    "feature-stale-on",
    "feature-stale-off",
];

/// A parameter a provider takes.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderParameter {
    pub name: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<&'static str>,
    /// `url`, `text` or `textfield`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub required: bool,
    /// Shown masked, kept when sent back masked.
    pub sensitive: bool,
}

/// An addon provider (read-only).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    pub name: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub documentation_url: &'static str,
    pub parameters: Vec<ProviderParameter>,
    pub events: Vec<&'static str>,
    /// Tag types the provider reads (spec §2.11 calls the key `tags`; the reference
    /// `tagTypes`: both are served).
    pub tag_types: Vec<TagType>,
    pub tags: Vec<TagType>,
}

fn parameter(
    name: &'static str,
    display_name: &'static str,
    kind: &'static str,
    required: bool,
    sensitive: bool,
    description: &'static str,
) -> ProviderParameter {
    ProviderParameter {
        name,
        display_name,
        description,
        placeholder: None,
        kind,
        required,
        sensitive,
    }
}

/// The tag type whose values name Slack channels.
pub fn slack_tag_type() -> TagType {
    TagType {
        name: "slack".into(),
        description: "Slack tag used by the slack-addon to specify the slack channel.".into(),
        icon: "S".into(),
    }
}

/// Every provider.
pub fn providers() -> Vec<Provider> {
    let webhook_template = ProviderParameter {
        placeholder: Some(
            "{\"event\": \"{{event.type}}\", \"createdBy\": \"{{event.createdBy}}\", \
             \"featureToggle\": \"{{event.data.name}}\", \"timestamp\": \"{{event.createdAt}}\"}",
        ),
        ..parameter(
            "bodyTemplate",
            "Body template",
            "textfield",
            false,
            false,
            "Mustache template of the body, rendered with {event: <event record>}; without \
             one, the event record is sent as JSON.",
        )
    };
    vec![
        Provider {
            name: "webhook",
            display_name: "Webhook",
            description: "A webhook is a simple HTTP POST callback.",
            documentation_url: "https://docs.getunleash.io/docs/addons/webhook",
            parameters: vec![
                parameter("url", "Webhook URL", "url", true, true, "The URL to POST events to."),
                ProviderParameter {
                    placeholder: Some("application/json"),
                    ..parameter("contentType", "Content-Type", "text", false, false, "The Content-Type header of the request.")
                },
                webhook_template,
                parameter(
                    "customHeaders",
                    "Extra HTTP headers",
                    "textfield",
                    false,
                    true,
                    "A JSON object of header names to values, e.g. {\"Authorization\": \"Bearer …\"}.",
                ),
                parameter(
                    "secret",
                    "Signing secret",
                    "text",
                    false,
                    true,
                    "When set, each request is signed with HMAC-SHA256 over the timestamp and the body.",
                ),
            ],
            events: ADDON_EVENTS.to_vec(),
            tag_types: Vec::new(),
            tags: Vec::new(),
        },
        Provider {
            name: "slack",
            display_name: "Slack",
            description: "Posts a message to Slack channels on feature toggle events.",
            documentation_url: "https://docs.getunleash.io/docs/addons/slack",
            parameters: vec![
                parameter("url", "Slack webhook URL", "url", true, true, "The Slack incoming webhook URL."),
                ProviderParameter {
                    placeholder: Some("Flagpole"),
                    ..parameter("username", "Username", "text", false, false, "The name the messages are posted as.")
                },
                ProviderParameter {
                    placeholder: Some(":flag-white:"),
                    ..parameter("emojiIcon", "Emoji icon", "text", false, false, "The emoji the messages are posted with.")
                },
                parameter(
                    "defaultChannel",
                    "Default channel",
                    "text",
                    true,
                    false,
                    "The channel for toggles without a slack tag.",
                ),
            ],
            events: ADDON_EVENTS.to_vec(),
            tag_types: vec![slack_tag_type()],
            tags: vec![slack_tag_type()],
        },
    ]
}

/// An addon configuration as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonConfig {
    pub id: u64,
    pub provider: String,
    pub enabled: bool,
    #[serde(default)]
    pub description: String,
    /// Parameter values (numbers and booleans are stored as their text).
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub events: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// An addon configuration as sent by a client.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AddonSpec {
    pub provider: Option<String>,
    pub enabled: Option<bool>,
    pub description: Option<String>,
    pub parameters: Option<BTreeMap<String, Value>>,
    pub events: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

/// What [`AddonSpec::validate`] checks, as a JSON Schema: one shape per provider, with its
/// parameters and events. Stricter than the check where a pattern cannot follow it: a URL's
/// host is a name (no address), a body template has no tags, `customHeaders` is `{}`, a
/// content type has no parameters, and values are strings (numbers and booleans are also
/// taken as text).
fn addon_spec_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use serde_json::json;
    let branch = |provider: &Provider| {
        let mut properties = serde_json::Map::new();
        for parameter in &provider.parameters {
            let mut schema = json!({"type": "string", "description": parameter.description});
            let pattern = match (parameter.kind, parameter.name) {
                ("url", _) => Some(
                    "^https?://[A-Za-z][A-Za-z0-9-]*(\\.[A-Za-z][A-Za-z0-9-]*)*(:[0-9]{1,4})?(/[A-Za-z0-9._~/-]*)?$",
                ),
                (_, "bodyTemplate") => Some("^[^{}]*$"),
                (_, "customHeaders") => Some("^\\{\\}$"),
                (_, "contentType") => {
                    Some("^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$")
                }
                (_, "defaultChannel") => Some("^\\s*#*[^\\s#]\\S*\\s*$"),
                _ => None,
            };
            if let Some(pattern) = pattern {
                schema["pattern"] = json!(pattern);
            }
            // The template placeholder has tags, which the pattern above leaves out.
            let example = match (parameter.kind, parameter.name) {
                ("url", _) => Some("https://example.com/hook"),
                (_, "bodyTemplate") => None,
                _ => parameter.placeholder,
            };
            if let Some(example) = example {
                schema["example"] = json!(example);
            }
            properties.insert(parameter.name.to_string(), schema);
        }
        let required: Vec<&str> = provider
            .parameters
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name)
            .collect();
        json!({
            "type": "object",
            "required": ["provider", "parameters"],
            "properties": {
                "provider": {"type": "string", "enum": [provider.name]},
                "enabled": {"type": ["boolean", "null"]},
                "description": {"type": ["string", "null"]},
                "parameters": {
                    "type": "object",
                    "required": required,
                    "properties": properties,
                    "additionalProperties": false,
                },
                "events": {"type": ["array", "null"], "uniqueItems": true,
                    "items": {"type": "string", "enum": provider.events}},
            },
            "additionalProperties": false,
        })
    };
    crate::domain::schema::one_of(
        "An addon configuration: a provider, its parameters and the events it delivers (the \
         provider cannot change on update)",
        providers().iter().map(branch).collect(),
    )
}

impl utoipa::PartialSchema for AddonSpec {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        addon_spec_schema()
    }
}

impl utoipa::ToSchema for AddonSpec {}

/// The validated content of an [`AddonSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidAddon {
    pub provider: String,
    pub enabled: bool,
    pub description: String,
    pub parameters: BTreeMap<String, String>,
    pub events: Vec<String>,
}

impl AddonSpec {
    /// Validates a configuration against its provider; `existing` is the configuration an
    /// update replaces (its provider cannot change; masked secrets keep its values).
    pub fn validate(self, existing: Option<&AddonConfig>) -> Result<ValidAddon, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &["id", "createdAt"], &mut errors);
        let all = providers();
        let provider_name = match (self.provider, existing) {
            (Some(name), Some(old)) if name != old.provider => {
                errors.push(
                    "provider",
                    format!(
                        "the provider of an addon cannot change (\"{}\" to \"{name}\"); \
                         create a new addon",
                        old.provider
                    ),
                );
                return Err(DomainError::Invalid(errors));
            }
            (Some(name), _) if !name.is_empty() => name,
            (None, Some(old)) => old.provider.clone(),
            _ => {
                errors.push("provider", "\"provider\" is required");
                String::new()
            }
        };
        let Some(provider) = all.iter().find(|p| p.name == provider_name) else {
            if !provider_name.is_empty() {
                let known: Vec<_> = all.iter().map(|p| p.name).collect();
                errors.push(
                    "provider",
                    format!(
                        "unknown provider \"{provider_name}\" (known: {})",
                        known.join(", ")
                    ),
                );
            }
            return Err(DomainError::Invalid(errors));
        };
        let parameters = check_parameters(
            provider,
            self.parameters.unwrap_or_default(),
            existing,
            &mut errors,
        );
        let events = self.events.unwrap_or_default();
        for (i, event) in events.iter().enumerate() {
            if events[..i].contains(event) {
                errors.push(
                    format!("events[{i}]"),
                    format!("\"{event}\" is listed twice"),
                );
            } else if !provider.events.contains(&event.as_str()) {
                errors.push(
                    format!("events[{i}]"),
                    format!(
                        "\"{event}\" is not an event the {} provider delivers (known: {})",
                        provider.name,
                        provider.events.join(", ")
                    ),
                );
            }
        }
        errors.into_result(ValidAddon {
            provider: provider_name,
            enabled: self.enabled.unwrap_or(true),
            description: self.description.unwrap_or_default(),
            parameters,
            events,
        })
    }
}

fn check_parameters(
    provider: &Provider,
    sent: BTreeMap<String, Value>,
    existing: Option<&AddonConfig>,
    errors: &mut ValidationErrors,
) -> BTreeMap<String, String> {
    let mut parameters = BTreeMap::new();
    for (name, value) in sent {
        let path = format!("parameters.{name}");
        let Some(definition) = provider.parameters.iter().find(|p| p.name == name) else {
            errors.push(
                path,
                format!("the {} provider has no parameter \"{name}\"", provider.name),
            );
            continue;
        };
        let text = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            _ => {
                errors.push(path, format!("\"{name}\" must be a string"));
                continue;
            }
        };
        // A masked secret sent back keeps the stored one.
        let text = if definition.sensitive && text == MASK {
            match existing.and_then(|old| old.parameters.get(&name)) {
                Some(stored) => stored.clone(),
                None => {
                    errors.push(
                        path,
                        format!(
                            "\"{name}\" is masked ({MASK}), but nothing is stored to keep: \
                             send its value (a state export holds it with addonSecrets=true)"
                        ),
                    );
                    continue;
                }
            }
        } else {
            text
        };
        if let Err(message) = check_value(definition, &text) {
            errors.push(path, message);
        }
        if !text.is_empty() {
            parameters.insert(name, text);
        }
    }
    for definition in provider.parameters.iter().filter(|p| p.required) {
        let path = format!("parameters.{}", definition.name);
        // Sent but refused above: already named.
        if !parameters.contains_key(definition.name) && !errors.0.iter().any(|e| e.path == path) {
            errors.push(
                path,
                format!(
                    "\"{}\" is required by the {} provider",
                    definition.name, provider.name
                ),
            );
        }
    }
    parameters
}

fn check_value(definition: &ProviderParameter, text: &str) -> Result<(), String> {
    match (definition.kind, definition.name) {
        ("url", _) if !text.is_empty() => match url::Url::parse(text) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
            _ => Err(format!("\"{}\" must be an http(s) URL", definition.name)),
        },
        (_, "bodyTemplate") => template::check(text)
            .map_err(|e| format!("\"bodyTemplate\" is not a valid mustache template: {e}")),
        (_, "customHeaders") if !text.is_empty() => check_custom_headers(text),
        (_, "contentType") if !text.is_empty() => {
            let (kind, subtype) = text.split_once('/').unwrap_or(("", ""));
            let token = |t: &str| {
                !t.is_empty()
                    && t.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
            };
            let parameters_ok = subtype
                .split_once(';')
                .is_none_or(|(_, p)| p.bytes().all(|b| b == b' ' || b.is_ascii_graphic()));
            let subtype = subtype.split(';').next().unwrap_or("").trim();
            (token(kind) && token(subtype) && parameters_ok)
                .then_some(())
                .ok_or_else(|| {
                    "\"contentType\" must be a media type such as application/json".to_string()
                })
        }
        (_, "defaultChannel") => {
            let channel = text.trim().trim_start_matches('#');
            (!channel.is_empty() && !channel.contains(char::is_whitespace))
                .then_some(())
                .ok_or_else(|| {
                    "\"defaultChannel\" must be a channel name without spaces".to_string()
                })
        }
        _ => Ok(()),
    }
}

/// Headers Flagpole sets itself or that frame the request; `customHeaders` cannot set them.
const RESERVED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
];

/// `customHeaders`: a JSON object of header names (letters, digits, `-`, `_`; none reserved,
/// none twice in any case, no `X-Flagpole-*`) to printable values (no CR/LF injection).
fn check_custom_headers(text: &str) -> Result<(), String> {
    let headers: BTreeMap<String, String> = serde_json::from_str(text).map_err(|_| {
        "\"customHeaders\" must be a JSON object of header names to string values".to_string()
    })?;
    let mut seen = std::collections::HashSet::new();
    for (name, value) in &headers {
        let lower = name.to_ascii_lowercase();
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        let value_ok = value
            .bytes()
            .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic());
        if !name_ok || !value_ok {
            return Err(format!(
                "\"customHeaders\": \"{name}\" cannot be sent (names: letters, digits, - and _; \
                 values: printable ASCII)"
            ));
        }
        if RESERVED_HEADERS.contains(&lower.as_str())
            || lower.starts_with("proxy-")
            || lower.starts_with("x-flagpole-")
        {
            return Err(format!(
                "\"customHeaders\": \"{name}\" is set by Flagpole or frames the request"
            ));
        }
        if !seen.insert(lower) {
            return Err(format!("\"customHeaders\": \"{name}\" is given twice"));
        }
    }
    Ok(())
}

impl AddonConfig {
    /// A new configuration from validated input.
    pub fn create(id: u64, valid: ValidAddon, now: DateTime<Utc>) -> Self {
        Self {
            id,
            provider: valid.provider,
            enabled: valid.enabled,
            description: valid.description,
            parameters: valid.parameters,
            events: valid.events,
            created_at: now,
        }
    }

    /// PUT semantics: the document replaces the configuration.
    pub fn replaced_by(&self, valid: ValidAddon) -> Self {
        Self::create(self.id, valid, self.created_at)
    }

    /// The configuration as served: sensitive parameters masked.
    pub fn masked(&self) -> Self {
        let sensitive: Vec<&str> = providers()
            .into_iter()
            .filter(|p| p.name == self.provider)
            .flat_map(|p| p.parameters)
            .filter(|p| p.sensitive)
            .map(|p| p.name)
            .collect();
        let mut shown = self.clone();
        for (name, value) in shown.parameters.iter_mut() {
            if sensitive.contains(&name.as_str()) {
                *value = MASK.to_string();
            }
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> AddonSpec {
        serde_json::from_value(v).expect("spec parses")
    }

    fn paths(v: Value, existing: Option<&AddonConfig>) -> Vec<String> {
        match spec(v).validate(existing) {
            Err(DomainError::Invalid(errors)) => errors.0.into_iter().map(|e| e.path).collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn configurations_are_checked_against_their_provider() {
        assert_eq!(paths(json!({"provider": "pager"}), None), ["provider"]);
        assert_eq!(paths(json!({"parameters": {}}), None), ["provider"]);
        assert_eq!(
            paths(
                json!({"provider": "webhook", "parameters": {"url": "ftp://x", "colour": "red",
                "bodyTemplate": "{{#a}}", "customHeaders": "{\"X-A\": \"a\\r\\nX-B: b\"}"}, "events": ["feature-created", "tag-created"]}),
                None
            ),
            [
                "parameters.bodyTemplate",
                "parameters.colour",
                "parameters.customHeaders",
                "parameters.url",
                "events[1]"
            ]
        );
        assert_eq!(
            paths(
                json!({"provider": "slack", "parameters": {"url": "https://hooks.slack.com/x"}}),
                None
            ),
            ["parameters.defaultChannel"]
        );
    }

    #[test]
    fn masked_secrets_are_kept_and_providers_cannot_change() {
        let valid = spec(
            json!({"provider": "webhook", "parameters": {"url": "https://h.example/t0k3n",
            "secret": "s3cret", "contentType": "text/plain"}, "events": ["feature-created"]}),
        )
        .validate(None)
        .expect("valid");
        let config = AddonConfig::create(1, valid, Utc::now());
        let shown = config.masked();
        assert_eq!(shown.parameters["url"], MASK);
        assert_eq!(shown.parameters["secret"], MASK);
        assert_eq!(shown.parameters["contentType"], "text/plain");
        let again = spec(serde_json::to_value(&shown).expect("json"))
            .validate(Some(&config))
            .expect("valid");
        assert_eq!(again.parameters, config.parameters);
        assert_eq!(
            paths(
                json!({"provider": "slack", "parameters": {"url": MASK}}),
                Some(&config)
            ),
            ["provider"]
        );
    }
}
