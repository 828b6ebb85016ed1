//! `EvaluationContext`: the Unleash context of a frontend or OFREP request, read from a query
//! string (`userId=…&properties[k]=v`) or a JSON body (`{"context": {…}}` or the bare
//! object), and its canonical bytes — what an ETag is computed from before anything is
//! evaluated.
//!
//! As Unleash 7 reads it: the well-known fields (`userId`, `sessionId`, `remoteAddress`,
//! `environment`, `appName`, `currentTime`) are lifted out, `properties` are merged, and any
//! other top-level field becomes a property. Numbers and booleans count as their text.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use unleash_types::client_features::Context;

/// Longest context accepted, in bytes of its canonical form (a larger one is a 400).
pub const CONTEXT_MAX_BYTES: usize = 16 * 1024;

/// Why a context cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// Not JSON at all.
    #[error("the body is not JSON: {0}")]
    Parse(String),
    /// JSON, but not a context.
    #[error("{0}")]
    Invalid(String),
}

/// The well-known context fields, in canonical order.
const FIELDS: [&str; 6] = [
    "userId",
    "sessionId",
    "remoteAddress",
    "environment",
    "appName",
    "currentTime",
];

/// A request's evaluation context; `'a` is the query string it may borrow from (a re-poll's
/// context is only hashed, so its texts are not copied).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvaluationContext<'a> {
    /// The well-known fields, in `FIELDS` order.
    fields: [Option<Cow<'a, str>>; 6],
    /// Every other field, by name.
    pub properties: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
}

/// `remoteAddress`'s place in `FIELDS`.
const REMOTE_ADDRESS: usize = 2;

/// What stands for a well-known field the context does not set, in the canonical bytes.
const ABSENT: &str = "\u{0}absent";

fn field_index(name: &str) -> Option<usize> {
    FIELDS.iter().position(|f| *f == name)
}

/// A scalar's text; `None` for null; an error for an object or a list.
fn scalar(name: &str, value: Value) -> Result<Option<Cow<'static, str>>, ContextError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(Cow::Owned(s))),
        Value::Bool(b) => Ok(Some(Cow::Owned(b.to_string()))),
        Value::Number(n) => Ok(Some(Cow::Owned(n.to_string()))),
        Value::Array(_) | Value::Object(_) => Err(ContextError::Invalid(format!(
            "the context field \"{name}\" must be a string, number or boolean"
        ))),
    }
}

/// The name in a `properties[name]` query key, borrowed where the key is (a percent-encoded
/// key was decoded into a string of its own, which is cut down in place).
fn property_name(key: Cow<'_, str>) -> Result<Cow<'_, str>, Cow<'_, str>> {
    const OPEN: &str = "properties[";
    if !(key.starts_with(OPEN) && key.ends_with(']')) {
        return Err(key);
    }
    Ok(match key {
        Cow::Borrowed(key) => Cow::Borrowed(&key[OPEN.len()..key.len() - 1]),
        Cow::Owned(mut key) => {
            key.truncate(key.len() - 1);
            key.replace_range(..OPEN.len(), "");
            Cow::Owned(key)
        }
    })
}

impl<'a> EvaluationContext<'a> {
    /// The context of a query string (`appName=a&userId=u&properties[plan]=pro`, brackets
    /// percent-encoded or not); an unknown parameter is a property. Texts that needed no
    /// decoding are borrowed from `query`.
    pub fn from_query(query: &'a str) -> Result<Self, ContextError> {
        let mut context = Self::default();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match property_name(key) {
                Ok(name) => context.set_property(name, value),
                Err(key) => context.set(key, Some(value)),
            }
        }
        context.checked()
    }

    /// The context of a JSON body: `{"context": {…}}`, the bare context object, or nothing
    /// (an empty body: the empty context).
    pub fn from_json_body(bytes: &[u8]) -> Result<Self, ContextError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let body: Value =
            serde_json::from_slice(bytes).map_err(|e| ContextError::Parse(e.to_string()))?;
        let Value::Object(mut body) = body else {
            return Err(ContextError::Invalid(
                "the body must be a JSON object".into(),
            ));
        };
        let object = match body.remove("context") {
            Some(Value::Object(context)) => context,
            Some(Value::Null) | None => body,
            Some(_) => {
                return Err(ContextError::Invalid(
                    "\"context\" must be an object".into(),
                ))
            }
        };
        Self::from_object(object)
    }

    /// The context of a JSON object of context fields.
    pub fn from_object(object: serde_json::Map<String, Value>) -> Result<Self, ContextError> {
        let mut context = Self::default();
        for (key, value) in object {
            if key == "properties" {
                match value {
                    Value::Object(properties) => {
                        for (name, value) in properties {
                            if let Some(text) = scalar(&format!("properties.{name}"), value)? {
                                context.set_property(Cow::Owned(name), text);
                            }
                        }
                    }
                    Value::Null => {}
                    _ => {
                        return Err(ContextError::Invalid(
                            "\"properties\" must be an object".into(),
                        ))
                    }
                }
            } else {
                let text = scalar(&key, value)?;
                context.set(Cow::Owned(key), text);
            }
        }
        context.checked()
    }

    fn checked(self) -> Result<Self, ContextError> {
        if self.canonical_len() > CONTEXT_MAX_BYTES {
            return Err(ContextError::Invalid(format!(
                "the context is larger than {CONTEXT_MAX_BYTES} bytes"
            )));
        }
        Ok(self)
    }

    /// Sets a top-level field: a well-known one, else a property.
    fn set(&mut self, name: Cow<'a, str>, value: Option<Cow<'a, str>>) {
        match field_index(&name) {
            Some(i) => self.fields[i] = value,
            None => {
                if let Some(value) = value {
                    self.set_property(name, value);
                }
            }
        }
    }

    /// Sets a property; a well-known field named as a property is lifted out (as the engine's
    /// own context reader does), unless the field is set already.
    fn set_property(&mut self, name: Cow<'a, str>, value: Cow<'a, str>) {
        match field_index(&name) {
            Some(i) if self.fields[i].is_none() => self.fields[i] = Some(value),
            Some(_) => {}
            None => {
                self.properties.insert(name, value);
            }
        }
    }

    /// The well-known field `name` (one of `userId`, `sessionId`, `remoteAddress`,
    /// `environment`, `appName`, `currentTime`).
    pub fn field(&self, name: &str) -> Option<&str> {
        field_index(name).and_then(|i| self.fields[i].as_deref())
    }

    /// Sets `userId` when the context has none (OFREP's `targetingKey`).
    pub fn default_user_id(&mut self, user_id: &str) {
        if let Some(i) = field_index("userId") {
            self.fields[i].get_or_insert_with(|| Cow::Owned(user_id.to_string()));
        }
    }

    /// Moves the property `name` out of the properties (OFREP's `targetingKey`).
    pub fn take_property(&mut self, name: &str) -> Option<String> {
        self.properties.remove(name).map(Cow::into_owned)
    }

    /// Whether the context names its `remoteAddress` (else the caller's address may be it).
    pub fn has_remote_address(&self) -> bool {
        self.fields[REMOTE_ADDRESS].is_some()
    }

    /// Sets `remoteAddress` to `address` when the context has none.
    pub fn default_remote_address(&mut self, address: Option<&str>) {
        if let Some(address) = address {
            self.fields[REMOTE_ADDRESS].get_or_insert_with(|| Cow::Owned(address.to_string()));
        }
    }

    /// Feeds the canonical bytes to `put`, a piece at a time: every field and property in a
    /// fixed order, each length-prefixed, so that two contexts give equal bytes exactly when
    /// they are equal.
    pub fn write_canonical(&self, mut put: impl FnMut(&[u8])) {
        let mut text = |text: &str| {
            put(&(text.len() as u32).to_le_bytes());
            put(text.as_bytes());
        };
        for field in &self.fields {
            text(field.as_deref().unwrap_or(ABSENT));
        }
        for (name, value) in &self.properties {
            text(name);
            text(value);
        }
    }

    /// The canonical bytes (see `write_canonical`).
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.canonical_len());
        self.write_canonical(|piece| out.extend_from_slice(piece));
        out
    }

    /// The length of the canonical bytes, without making them.
    fn canonical_len(&self) -> usize {
        let text = |text: &str| 4 + text.len();
        let fields: usize = (self.fields.iter())
            .map(|field| text(field.as_deref().unwrap_or(ABSENT)))
            .sum();
        let properties: usize = (self.properties.iter())
            .map(|(name, value)| text(name) + text(value))
            .sum();
        fields + properties
    }

    /// The engine's context.
    pub fn to_engine(&self) -> Context {
        let owned = |field: &Option<Cow<'a, str>>| field.as_deref().map(str::to_string);
        let [user_id, session_id, remote_address, environment, app_name, current_time] =
            &self.fields;
        Context {
            user_id: owned(user_id),
            session_id: owned(session_id),
            environment: owned(environment),
            app_name: owned(app_name),
            current_time: owned(current_time),
            remote_address: owned(remote_address),
            properties: (!self.properties.is_empty()).then(|| {
                self.properties
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        }
    }

    /// The context as JSON (the playground's `input`).
    pub fn to_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        for (name, value) in FIELDS.iter().zip(&self.fields) {
            if let Some(value) = value {
                object.insert((*name).to_string(), Value::String(value.to_string()));
            }
        }
        if !self.properties.is_empty() {
            object.insert(
                "properties".into(),
                Value::Object(
                    self.properties
                        .iter()
                        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                        .collect(),
                ),
            );
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_query_string_gives_fields_and_bracketed_properties() {
        let context = EvaluationContext::from_query(
            "appName=web&userId=u1&properties[plan]=pro&properties%5Bregion%5D=eu&team=a",
        )
        .unwrap();
        assert_eq!(context.field("userId"), Some("u1"));
        assert_eq!(context.field("appName"), Some("web"));
        assert_eq!(context.properties["plan"], "pro");
        assert_eq!(context.properties["region"], "eu");
        assert_eq!(context.properties["team"], "a");
    }

    #[test]
    fn a_query_context_borrows_what_needed_no_decoding() {
        let context = EvaluationContext::from_query(
            "userId=u1&properties[plan]=pro&properties%5Bregion%5D=e%75",
        )
        .unwrap();
        assert!(matches!(context.fields[0], Some(Cow::Borrowed("u1"))));
        let (name, value) = context.properties.iter().next().expect("a property");
        assert!(matches!(
            (name, value),
            (Cow::Borrowed("plan"), Cow::Borrowed("pro"))
        ));
        assert!(matches!(
            context.properties.get_key_value("region"),
            Some((Cow::Owned(name), Cow::Owned(value))) if name == "region" && value == "eu"
        ));
        assert_eq!(FIELDS[REMOTE_ADDRESS], "remoteAddress");
        assert_eq!(context.canonical().len(), context.canonical_len());
        for key in ["properties[", "properties]", "properties[]"] {
            let query = format!("{key}=v");
            let context = EvaluationContext::from_query(&query).unwrap();
            let expected = key
                .strip_prefix("properties[")
                .and_then(|k| k.strip_suffix(']'));
            match expected {
                Some(name) => assert_eq!(context.properties[name], "v", "{key}"),
                None => assert_eq!(context.properties[key], "v", "{key}"),
            }
        }
    }

    #[test]
    fn a_body_is_wrapped_or_bare_and_unknown_fields_become_properties() {
        let wrapped = EvaluationContext::from_json_body(
            br#"{"context":{"userId":"u1","properties":{"plan":"pro","n":3},"flag":true}}"#,
        )
        .unwrap();
        let bare =
            EvaluationContext::from_json_body(br#"{"userId":"u1","plan":"pro","n":3,"flag":true}"#)
                .unwrap();
        assert_eq!(wrapped, bare);
        assert_eq!(bare.properties["n"], "3");
        assert_eq!(bare.properties["flag"], "true");
        assert_eq!(
            EvaluationContext::from_json_body(b"").unwrap(),
            EvaluationContext::default()
        );
        assert_eq!(
            EvaluationContext::from_json_body(b"{}").unwrap(),
            EvaluationContext::default()
        );
    }

    #[test]
    fn bad_bodies_are_told_apart() {
        assert!(matches!(
            EvaluationContext::from_json_body(b"{"),
            Err(ContextError::Parse(_))
        ));
        for body in [
            json!([1]),
            json!({"context": 3}),
            json!({"context": {"userId": {"a": 1}}}),
            json!({"properties": [1]}),
        ] {
            let bytes = serde_json::to_vec(&body).unwrap();
            assert!(
                matches!(
                    EvaluationContext::from_json_body(&bytes),
                    Err(ContextError::Invalid(_))
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn well_known_properties_are_lifted_and_canonical_bytes_tell_contexts_apart() {
        let lifted = EvaluationContext::from_query("properties[userId]=u1").unwrap();
        assert_eq!(lifted.field("userId"), Some("u1"));
        let a = EvaluationContext::from_query("userId=a&properties[b]=c").unwrap();
        let b = EvaluationContext::from_query("properties[b]=c&userId=a").unwrap();
        let c = EvaluationContext::from_query("userId=ab&properties[b]=c").unwrap();
        let d = EvaluationContext::from_query("sessionId=a&properties[b]=c").unwrap();
        assert_eq!(a.canonical(), b.canonical());
        assert_ne!(a.canonical(), c.canonical());
        assert_ne!(a.canonical(), d.canonical());
    }

    #[test]
    fn the_engine_context_carries_everything() {
        let mut context =
            EvaluationContext::from_query("userId=u&environment=prod&properties[x]=1").unwrap();
        context.default_remote_address(Some("10.0.0.1"));
        let engine = context.to_engine();
        assert_eq!(engine.user_id.as_deref(), Some("u"));
        assert_eq!(engine.environment.as_deref(), Some("prod"));
        assert_eq!(engine.remote_address.as_deref(), Some("10.0.0.1"));
        assert_eq!(engine.properties.unwrap()["x"], "1");
    }
}
