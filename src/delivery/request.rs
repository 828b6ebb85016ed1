//! The HTTP requests an event becomes for an addon: the webhook's (template or event record,
//! idempotency key, optional HMAC signature, custom headers) and Slack's (one message per
//! channel, text per event kind as the reference writes it). Pure: the worker sends them.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::domain::addon::AddonConfig;
use crate::domain::event::Event;
use crate::domain::template;

/// Header carrying the delivery's id, the same on every attempt (an idempotency key).
pub const DELIVERY_HEADER: &str = "X-Flagpole-Delivery";
/// Header carrying the event kind.
pub const EVENT_HEADER: &str = "X-Flagpole-Event";
/// Header carrying the Unix time the signature covers.
pub const TIMESTAMP_HEADER: &str = "X-Flagpole-Timestamp";
/// Header carrying `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the secret>`.
pub const SIGNATURE_HEADER: &str = "X-Flagpole-Signature";

/// One HTTP POST to make.
#[derive(Clone, PartialEq, Eq)]
pub struct DeliveryRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// URLs and header values hold secrets: debug output shows the host and header names only.
impl fmt::Debug for DeliveryRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = url::Url::parse(&self.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("DeliveryRequest")
            .field("host", &host)
            .field("headers", &names)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// Why an event cannot become a request for an addon (the configuration changed under it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the addon has no \"{0}\"")]
    Missing(&'static str),
    #[error("the body template failed: {0}")]
    Template(String),
    #[error("\"customHeaders\" is not a JSON object of strings")]
    Headers,
    #[error("unknown provider \"{0}\"")]
    Provider(String),
    #[error("the body cannot be serialised: {0}")]
    Body(String),
}

/// The requests `event` becomes for `addon`; `delivery` is the delivery's id, `now` the time
/// a signature covers, `public_url` the base of links to toggles (Slack), if set.
pub fn requests(
    addon: &AddonConfig,
    event: &Event,
    delivery: &str,
    now: DateTime<Utc>,
    public_url: Option<&str>,
) -> Result<Vec<DeliveryRequest>, RequestError> {
    match addon.provider.as_str() {
        "webhook" => webhook(addon, event, delivery, now).map(|r| vec![r]),
        "slack" => slack(addon, event, delivery, public_url),
        other => Err(RequestError::Provider(other.to_string())),
    }
}

fn parameter<'a>(addon: &'a AddonConfig, name: &str) -> Option<&'a str> {
    addon
        .parameters
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The webhook request: the template rendered with `{event}` (as the reference does), or the
/// event record as JSON.
fn webhook(
    addon: &AddonConfig,
    event: &Event,
    delivery: &str,
    now: DateTime<Utc>,
) -> Result<DeliveryRequest, RequestError> {
    let url = parameter(addon, "url").ok_or(RequestError::Missing("url"))?;
    let record = serde_json::to_value(event).map_err(|e| RequestError::Body(e.to_string()))?;
    let body = match parameter(addon, "bodyTemplate") {
        Some(t) => template::render(t, &json!({ "event": record }))
            .map_err(|e| RequestError::Template(e.0))?
            .into_bytes(),
        None => serde_json::to_vec(&record).map_err(|e| RequestError::Body(e.to_string()))?,
    };
    let mut headers = vec![
        (
            "Content-Type".to_string(),
            parameter(addon, "contentType")
                .unwrap_or("application/json")
                .to_string(),
        ),
        (DELIVERY_HEADER.to_string(), delivery.to_string()),
        (EVENT_HEADER.to_string(), event.kind.clone()),
    ];
    if let Some(custom) = parameter(addon, "customHeaders") {
        let custom: BTreeMap<String, String> =
            serde_json::from_str(custom).map_err(|_| RequestError::Headers)?;
        headers.extend(custom);
    }
    if let Some(secret) = parameter(addon, "secret") {
        let timestamp = now.timestamp().to_string();
        headers.push((TIMESTAMP_HEADER.to_string(), timestamp.clone()));
        headers.push((
            SIGNATURE_HEADER.to_string(),
            format!("sha256={}", sign(secret, &timestamp, &body)),
        ));
    }
    Ok(DeliveryRequest {
        url: url.to_string(),
        headers,
        body,
    })
}

/// Hex HMAC-SHA256 of `<timestamp>.<body>` keyed by `secret`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One Slack message per channel: the event's `slack` tags, else the default channel.
fn slack(
    addon: &AddonConfig,
    event: &Event,
    delivery: &str,
    public_url: Option<&str>,
) -> Result<Vec<DeliveryRequest>, RequestError> {
    let url = parameter(addon, "url").ok_or(RequestError::Missing("url"))?;
    let mut channels: Vec<&str> = Vec::new();
    for tag in event.tags.iter().filter(|t| t.kind == "slack") {
        let channel = tag.value.trim().trim_start_matches('#');
        if !channel.is_empty() && !channels.contains(&channel) {
            channels.push(channel);
        }
    }
    if channels.is_empty() {
        let default =
            parameter(addon, "defaultChannel").ok_or(RequestError::Missing("defaultChannel"))?;
        channels.push(default.trim().trim_start_matches('#'));
    }
    let name = event.toggle_name().unwrap_or("");
    let link = public_url.map(|base| {
        let area = if event.kind == "feature-archived" {
            "archive"
        } else {
            "features"
        };
        format!("{}/#/{area}/strategies/{name}", base.trim_end_matches('/'))
    });
    let text = slack_text(event, name, link.as_deref());
    channels
        .into_iter()
        .enumerate()
        .map(|(i, channel)| {
            let mut message = json!({
                "username": parameter(addon, "username").unwrap_or("Flagpole"),
                "icon_emoji": parameter(addon, "emojiIcon").unwrap_or(":flag-white:"),
                "text": text,
                "channel": format!("#{channel}"),
            });
            if let Some(link) = &link {
                message["attachments"] = json!([{"actions": [{"name": "featureToggle",
                    "text": "Open in Flagpole", "type": "button", "value": "featureToggle",
                    "style": "primary", "url": link}]}]);
            }
            Ok(DeliveryRequest {
                url: url.to_string(),
                headers: vec![
                    ("Content-Type".to_string(), "application/json".to_string()),
                    // One delivery, several messages: each its own key.
                    (DELIVERY_HEADER.to_string(), format!("{delivery}.{i}")),
                    (EVENT_HEADER.to_string(), event.kind.clone()),
                ],
                body: serde_json::to_vec(&message)
                    .map_err(|e| RequestError::Body(e.to_string()))?,
            })
        })
        .collect()
}

/// Slack's escaping of text: `&`, `<` and `>` (so a name cannot ping `<!channel>`).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The message text per event kind (API-FACTS §8.2).
fn slack_text(event: &Event, name: &str, link: Option<&str>) -> String {
    let name = escape(name);
    let toggle = match link {
        Some(link) => format!("<{}|{name}>", escape(link)),
        None => name,
    };
    let by = &escape(&event.created_by);
    let data = &event.data;
    match event.kind.as_str() {
        "feature-created" | "feature-updated" => {
            let verb = if event.kind == "feature-created" { "created" } else { "updated" };
            let enabled = if data["enabled"] == true { "yes" } else { "no" };
            let stale = if data["stale"] == true { " (\"stale\")" } else { "" };
            let strategies = yaml_serde::to_string(&data["strategies"]).unwrap_or_default();
            format!(
                "{by} {verb} feature toggle {toggle}\n*Enabled*: {enabled}{stale} | *Type*: {} | *Project*: {}\n*Activation strategies*: ```{}```",
                data["type"].as_str().unwrap_or(""),
                data["project"].as_str().unwrap_or(""),
                strategies.trim_end()
            )
        }
        "feature-archived" => format!("The feature toggle *{toggle}* was *archived* by {by}."),
        "feature-revived" => format!("The feature toggle *{toggle}* was *revived* by {by}."),
        "feature-stale-on" => format!(
            "The feature toggle *{toggle}* is now *ready to be removed* from the code. :technologist:\nThis was changed by {by}."
        ),
        "feature-stale-off" => {
            format!("The feature toggle *{toggle}* was *unmarked as stale* by {by}.")
        }
        other => format!("{by} {} feature toggle {toggle}", escape(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::tag::TagRef;
    use serde_json::Value;

    fn addon(provider: &str, parameters: &[(&str, &str)]) -> AddonConfig {
        AddonConfig {
            id: 1,
            provider: provider.into(),
            enabled: true,
            description: String::new(),
            parameters: parameters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            events: vec!["feature-created".into()],
            created_at: Utc::now(),
        }
    }

    fn event(kind: &str, tags: &[(&str, &str)]) -> Event {
        Event {
            id: 17,
            kind: kind.into(),
            created_by: "alice".into(),
            created_at: "2026-11-22T10:00:00Z".parse().expect("time"),
            data: json!({"name": "demo", "enabled": true, "stale": false, "type": "release",
                         "project": "default", "strategies": [{"name": "default"}]}),
            tags: tags
                .iter()
                .map(|(k, v)| TagRef {
                    kind: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
        }
    }

    fn header<'a>(r: &'a DeliveryRequest, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn webhook_sends_the_event_record_or_the_rendered_template() {
        let now = Utc::now();
        let plain = requests(
            &addon("webhook", &[("url", "https://h/x")]),
            &event("feature-created", &[]),
            "d1",
            now,
            None,
        )
        .expect("request");
        let body: Value = serde_json::from_slice(&plain[0].body).expect("json");
        assert_eq!(body["id"], 17);
        assert_eq!(body["type"], "feature-created");
        assert_eq!(body["createdBy"], "alice");
        assert_eq!(header(&plain[0], "Content-Type"), Some("application/json"));
        assert_eq!(header(&plain[0], DELIVERY_HEADER), Some("d1"));
        assert_eq!(header(&plain[0], SIGNATURE_HEADER), None);
        let templated = requests(
            &addon(
                "webhook",
                &[
                    ("url", "https://h/x"),
                    ("contentType", "text/plain"),
                    (
                        "bodyTemplate",
                        "{{event.type}}: {{event.data.name}} by {{event.createdBy}}",
                    ),
                    ("customHeaders", "{\"Authorization\": \"Bearer t\"}"),
                    ("secret", "k"),
                ],
            ),
            &event("feature-created", &[]),
            "d2",
            now,
            None,
        )
        .expect("request");
        let r = &templated[0];
        assert_eq!(r.body, b"feature-created: demo by alice");
        assert_eq!(header(r, "Content-Type"), Some("text/plain"));
        assert_eq!(header(r, "Authorization"), Some("Bearer t"));
        let timestamp = header(r, TIMESTAMP_HEADER).expect("timestamp");
        assert_eq!(
            header(r, SIGNATURE_HEADER).map(str::to_string),
            Some(format!("sha256={}", sign("k", timestamp, &r.body)))
        );
    }

    #[test]
    fn signatures_match_an_independent_computation() {
        // python3: hmac.new(b"k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        assert_eq!(
            sign("k", "1700000000", br#"{"a":1}"#),
            "1b6ad1bc9bf48c52ce01939866d5877c6cc4e87ddad27e16673cb8c4964394a3"
        );
    }

    #[test]
    fn slack_posts_one_message_per_channel_tag() {
        let slack = addon(
            "slack",
            &[
                ("url", "https://hooks.slack.com/x"),
                ("defaultChannel", "general"),
            ],
        );
        let to_default = requests(
            &slack,
            &event("feature-archived", &[]),
            "d",
            Utc::now(),
            None,
        )
        .expect("requests");
        assert_eq!(to_default.len(), 1);
        let body: Value = serde_json::from_slice(&to_default[0].body).expect("json");
        assert_eq!(body["channel"], "#general");
        assert_eq!(
            body["text"],
            "The feature toggle *demo* was *archived* by alice."
        );
        let tagged = requests(
            &slack,
            &event(
                "feature-updated",
                &[("slack", "team-a"), ("simple", "x"), ("slack", "#ops")],
            ),
            "d",
            Utc::now(),
            Some("https://flags.example.com/"),
        )
        .expect("requests");
        let channels: Vec<Value> = tagged
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).expect("json")["channel"].clone())
            .collect();
        assert_eq!(channels, [json!("#team-a"), json!("#ops")]);
        let shouting = Event {
            created_by: "<!channel>".into(),
            ..event("feature-archived", &[("slack", "ops"), ("slack", "#ops")])
        };
        let once = requests(&slack, &shouting, "d", Utc::now(), None).expect("requests");
        assert_eq!(once.len(), 1, "one message per channel");
        let body: Value = serde_json::from_slice(&once[0].body).expect("json");
        assert!(
            body["text"]
                .as_str()
                .is_some_and(|t| t.ends_with("by &lt;!channel&gt;.")),
            "{body}"
        );
        assert!(
            !format!("{:?}", once[0]).contains("hooks.slack.com/x"),
            "debug output hides the URL path"
        );
        let body: Value = serde_json::from_slice(&tagged[0].body).expect("json");
        let text = body["text"].as_str().expect("text");
        assert!(text.starts_with("alice updated feature toggle <https://flags.example.com/#/features/strategies/demo|demo>\n*Enabled*: yes | *Type*: release | *Project*: default"), "{text}");
        assert_eq!(
            body["attachments"][0]["actions"][0]["url"],
            "https://flags.example.com/#/features/strategies/demo"
        );
        assert_ne!(
            header(&tagged[0], DELIVERY_HEADER),
            header(&tagged[1], DELIVERY_HEADER)
        );
    }

    #[test]
    fn a_broken_template_is_an_error_not_a_panic() {
        let broken = addon(
            "webhook",
            &[("url", "https://h/x"), ("bodyTemplate", "{{=}}")],
        );
        assert!(matches!(
            requests(
                &broken,
                &event("feature-created", &[]),
                "d",
                Utc::now(),
                None
            ),
            Err(RequestError::Template(_))
        ));
    }
}
