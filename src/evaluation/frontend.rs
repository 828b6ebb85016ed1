//! The frontend API's answer (Unleash 7's `GET|POST /api/frontend`): the toggles that are on
//! for a context, each with its variant, and the ETag that names an answer before it is
//! computed.

use super::context::EvaluationContext;
use super::engine::{EnvironmentEngine, Variant};
use base64::Engine as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use unleash_types::client_features::Context;

/// What an answer is for: the environment and the projects the caller's token sees.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub environment: &'a str,
    /// `None`: every project.
    pub projects: Option<&'a [String]>,
}

impl Scope<'_> {
    /// Whether the scope sees toggles of `project`.
    pub fn sees(&self, project: &str) -> bool {
        self.projects
            .is_none_or(|projects| projects.iter().any(|p| p == "*" || p == project))
    }
}

/// Which kind of answer an ETag names (answers of different kinds never share one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// The frontend API's list of toggles that are on.
    Frontend,
    /// OFREP's bulk evaluation.
    OfrepBulk,
}

/// The ETag of an answer: a digest of the engine's input (equal on every replica for equal
/// configuration), the scope and the canonical context — known before anything is evaluated,
/// so a re-poll with an unchanged context costs a hash and a comparison.
pub fn etag(
    kind: AnswerKind,
    engine: &EnvironmentEngine,
    scope: &Scope<'_>,
    context: &EvaluationContext<'_>,
) -> Etag {
    let mut hasher = Sha256::new();
    hasher.update(match kind {
        AnswerKind::Frontend => b"frontend\0",
        AnswerKind::OfrepBulk => b"ofrep-bk\0",
    });
    hasher.update(engine.digest);
    hasher.update(scope.environment.as_bytes());
    hasher.update([0]);
    match scope.projects {
        None => hasher.update(b"*all*"),
        Some(projects) => {
            for project in projects {
                hasher.update((project.len() as u32).to_le_bytes());
                hasher.update(project.as_bytes());
            }
        }
    }
    hasher.update([0]);
    context.write_canonical(|piece| hasher.update(piece));
    Etag::of(hasher)
}

/// The ETag of an evaluated answer `body`: for a context whose answer the clock or chance may
/// change (`EnvironmentEngine::volatility`), where `etag` would promise what it cannot.
pub fn body_etag(kind: AnswerKind, body: &[u8]) -> Etag {
    let mut hasher = Sha256::new();
    hasher.update(match kind {
        AnswerKind::Frontend => b"frontend-body\0",
        AnswerKind::OfrepBulk => b"ofrep-bk-body\0",
    });
    hasher.update(body);
    Etag::of(hasher)
}

/// Bytes of the digest an ETag shows (144 bits: 24 base64 characters).
const ETAG_DIGEST_BYTES: usize = 18;
/// Characters of an ETag, its quotes included.
const ETAG_CHARS: usize = 2 + ETAG_DIGEST_BYTES * 4 / 3;

/// A strong ETag, `"<digest in URL-safe base64>"`, kept on the stack: a re-poll compares it
/// with `If-None-Match` as bytes and never makes a string of it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Etag([u8; ETAG_CHARS]);

impl Etag {
    fn of(hasher: Sha256) -> Self {
        let digest = hasher.finalize();
        let mut text = [b'"'; ETAG_CHARS];
        // The slice is exactly the encoded length: encoding cannot run out of room.
        let _ = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode_slice(&digest[..ETAG_DIGEST_BYTES], &mut text[1..ETAG_CHARS - 1]);
        Self(text)
    }

    /// The tag as sent, quotes included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The tag as sent (base64 and quotes are ASCII: always text).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// Whether an `If-None-Match` value names this tag: weak comparison (`W/` ignored), a
    /// comma-separated list, `*`. Lenient as before: quotes around a tag are optional.
    pub fn matched_by(&self, if_none_match: &[u8]) -> bool {
        let bare = &self.0[1..ETAG_CHARS - 1];
        if_none_match.split(|b| *b == b',').any(|tag| {
            let tag = tag.trim_ascii();
            tag == b"*" || unquoted(strip_weak_prefixes(tag)) == bare
        })
    }
}

impl std::fmt::Debug for Etag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `tag` without every leading `W/`.
fn strip_weak_prefixes(mut tag: &[u8]) -> &[u8] {
    while let Some(rest) = tag.strip_prefix(b"W/") {
        tag = rest;
    }
    tag
}

/// `tag` without every quote at either end.
fn unquoted(tag: &[u8]) -> &[u8] {
    let start = tag.iter().position(|b| *b != b'"').unwrap_or(tag.len());
    let end = tag
        .iter()
        .rposition(|b| *b != b'"')
        .map_or(start, |i| i + 1);
    &tag[start..end]
}

/// The frontend API's answer: `{"toggles": [...]}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FrontendToggles {
    /// The toggles that are on for the context, by name.
    pub toggles: Vec<FrontendToggle>,
}

/// A toggle that is on, as the frontend SDKs read it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrontendToggle {
    pub name: String,
    /// Always true: only toggles that are on are listed.
    pub enabled: bool,
    pub variant: FrontendVariant,
    pub impression_data: bool,
    /// The same, as Unleash Edge also names it.
    #[serde(rename = "impression_data")]
    pub impression_data_snake: bool,
}

/// The variant chosen for the context (`disabled` when the toggle has none).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FrontendVariant {
    pub name: String,
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<FrontendPayload>,
    /// Whether the toggle is on (Unleash 7's field).
    pub feature_enabled: bool,
    /// The same, Unleash's deprecated name.
    #[serde(rename = "featureEnabled")]
    pub feature_enabled_camel: bool,
}

/// A variant's payload.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FrontendPayload {
    /// `string`, `json`, `csv` or `number`.
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
}

/// The variant of a toggle that is on without one, serialised.
const DISABLED_VARIANT: &[u8] =
    br#"{"name":"disabled","enabled":false,"feature_enabled":true,"featureEnabled":true}"#;

/// The end of a toggle's entry, by its impression data.
fn entry_suffix(impression_data: bool) -> &'static [u8] {
    match impression_data {
        true => br#","impressionData":true,"impression_data":true}"#,
        false => br#","impressionData":false,"impression_data":false}"#,
    }
}

/// The frontend answer's JSON: what `answer` serialises to, written from each toggle's
/// pre-escaped start (`ToggleFacts::frontend_prefix`), so that only variants are serialised
/// per request (at 1,000 toggles, serialising the typed answer cost as much as evaluating it).
pub fn answer_json(engine: &EnvironmentEngine, scope: &Scope<'_>, context: &Context) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + engine.toggles().len() * 96);
    out.extend_from_slice(br#"{"toggles":["#);
    let mut first = true;
    for (at, facts) in engine.toggles().iter().enumerate() {
        // Off in the environment: never listed, whatever the context (nothing to evaluate).
        if !facts.on_in_environment || !scope.sees(&facts.project) {
            continue;
        }
        let evaluation = engine.evaluate_at(at, context);
        if !evaluation.enabled {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(&facts.frontend_prefix);
        match &evaluation.variant {
            variant if variant.is_disabled() => out.extend_from_slice(DISABLED_VARIANT),
            // Written once when the toggle was compiled.
            Variant::Compiled(variant) => out.extend_from_slice(&variant.frontend_json),
            variant => {
                // Serialising plain data into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut out, &FrontendVariant::on(variant));
            }
        }
        out.extend_from_slice(entry_suffix(facts.impression_data));
    }
    out.extend_from_slice(b"]}");
    out
}

impl FrontendVariant {
    /// The variant the engine chose for a toggle that is on.
    fn on(variant: &Variant<'_>) -> Self {
        Self {
            name: variant.name().to_string(),
            enabled: variant.enabled(),
            payload: variant.payload().map(|p| FrontendPayload {
                kind: p.payload_type.clone(),
                value: p.value.clone(),
            }),
            feature_enabled: true,
            feature_enabled_camel: true,
        }
    }
}

/// Evaluates every toggle of `scope` for `context` and lists those that are on: the typed
/// form of `answer_json` (the documented schema, and what the tests compare it with).
pub fn answer(engine: &EnvironmentEngine, scope: &Scope<'_>, context: &Context) -> FrontendToggles {
    let toggles = engine
        .toggles()
        .iter()
        .filter(|facts| scope.sees(&facts.project))
        .filter_map(|facts| {
            let evaluation = engine.evaluate(&facts.name, context);
            evaluation.enabled.then(|| FrontendToggle {
                name: facts.name.to_string(),
                enabled: true,
                variant: FrontendVariant::on(&evaluation.variant),
                impression_data: facts.impression_data,
                impression_data_snake: facts.impression_data,
            })
        })
        .collect();
    FrontendToggles { toggles }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::engine_tests::engine_of;

    /// A tag of `text` and its bare base64.
    fn tag_of(text: &[u8]) -> (Etag, String) {
        let etag = body_etag(AnswerKind::Frontend, text);
        let bare = etag.as_str().trim_matches('"').to_string();
        (etag, bare)
    }

    #[test]
    fn a_tag_is_quoted_url_safe_base64_of_18_bytes() {
        let (etag, bare) = tag_of(b"{}");
        assert_eq!(etag.as_bytes().len(), 26);
        assert!(etag.as_str().starts_with('"') && etag.as_str().ends_with('"'));
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&bare)
            .expect("base64");
        let mut hasher = Sha256::new();
        hasher.update(b"frontend-body\0{}");
        assert_eq!(decoded, hasher.finalize()[..18]);
    }

    #[test]
    fn if_none_match_lists_weak_tags_and_star_match() {
        let (etag, bare) = tag_of(b"a");
        let (other, other_bare) = tag_of(b"b");
        for header in [
            format!("\"{bare}\""),
            format!("W/\"{bare}\""),
            format!("\"{other_bare}\", \"{bare}\""),
            format!("\"{other_bare}\",W/\"{bare}\""),
            format!("  \"{bare}\"  ,"),
            "*".to_string(),
            format!("\"{other_bare}\", *"),
            // Lenient as the text comparison before it: quotes optional.
            bare.clone(),
        ] {
            assert!(etag.matched_by(header.as_bytes()), "{header}");
        }
        assert!(!other.matched_by(format!("\"{bare}\"").as_bytes()));
    }

    #[test]
    fn malformed_or_other_if_none_match_values_do_not_match() {
        let (etag, bare) = tag_of(b"a");
        let (_, other_bare) = tag_of(b"b");
        for header in [
            String::new(),
            ",".to_string(),
            " , ,".to_string(),
            "\"\"".to_string(),
            "W/".to_string(),
            "\"".to_string(),
            "**".to_string(),
            "\"*\"".to_string(),
            format!("\"{other_bare}\""),
            format!("\"{}\"", &bare[..bare.len() - 1]),
            format!("\"{bare}x\""),
            format!("\"x{bare}\""),
            format!("\"{}\"", bare.to_lowercase()),
            format!("w/\"{bare}\""),
            format!("\"{bare} \""),
            format!("\"{bare}\"; q"),
            "\u{ff}\u{0}".to_string(),
        ] {
            assert!(!etag.matched_by(header.as_bytes()), "{header:?}");
        }
        assert!(!etag.matched_by(&[0xff, b'"', 0x80]));
    }

    #[test]
    fn the_written_answer_is_the_typed_answer_serialised() {
        let on = |strategies: serde_json::Value, variants: serde_json::Value| {
            serde_json::json!({"default": {"enabled": true, "strategies": strategies,
                                           "variants": variants}})
        };
        let everyone = serde_json::json!([{"name": "default"}]);
        let engine = engine_of(serde_json::json!([
            {"name": "plain", "project": "a", "environments": on(everyone.clone(), serde_json::json!([]))},
            {"name": "quote\"back\\slash ü\u{1}", "project": "a", "impressionData": true,
             "environments": on(everyone.clone(), serde_json::json!([]))},
            {"name": "off", "project": "a",
             "environments": {"default": {"enabled": false, "strategies": everyone.clone()}}},
            {"name": "variants", "project": "b", "environments": on(everyone.clone(), serde_json::json!([
                {"name": "blue\"", "weight": 500, "weightType": "variable", "stickiness": "default",
                 "payload": {"type": "json", "value": "{\"c\":\"b\"}"}},
                {"name": "green", "weight": 500, "weightType": "variable", "stickiness": "default"}]))},
            {"name": "rollout", "project": "b", "environments": on(serde_json::json!([
                {"name": "flexibleRollout", "parameters":
                    {"rollout": "50", "stickiness": "default", "groupId": "r"}}]),
                serde_json::json!([]))},
        ]));
        let projects = ["a".to_string()];
        for user in ["u1", "u2", "u3", "u4", "u5", "u6"] {
            let context = Context {
                user_id: Some(user.into()),
                ..Context::default()
            };
            for projects in [None, Some(&projects[..])] {
                let scope = Scope {
                    environment: "default",
                    projects,
                };
                let typed = serde_json::to_vec(&answer(&engine, &scope, &context)).expect("json");
                let written = answer_json(&engine, &scope, &context);
                assert_eq!(
                    String::from_utf8_lossy(&written),
                    String::from_utf8_lossy(&typed),
                    "{user}, {projects:?}"
                );
            }
        }
        let none = Scope {
            environment: "default",
            projects: Some(&[]),
        };
        assert_eq!(
            answer_json(&engine, &none, &Context::default()),
            br#"{"toggles":[]}"#
        );
    }

    #[test]
    fn an_engine_knows_whether_any_answer_reads_the_address() {
        let enabled = |strategies: serde_json::Value| serde_json::json!({"default": {"enabled": true, "strategies": strategies}});
        let plain = engine_of(serde_json::json!([
            {"name": "a", "project": "a", "environments": enabled(serde_json::json!([
                {"name": "flexibleRollout", "parameters":
                    {"rollout": "50", "stickiness": "userId", "groupId": "a"}}]))}]));
        assert!(!plain.reads_remote_address);
        for strategies in [
            serde_json::json!([{"name": "remoteAddress", "parameters": {"IPs": "10.0.0.1"}}]),
            serde_json::json!([{"name": "default", "constraints": [{"contextName":
                "remoteAddress", "operator": "IN", "values": ["10.0.0.1"]}]}]),
            serde_json::json!([{"name": "flexibleRollout", "parameters":
                {"rollout": "50", "stickiness": "remoteAddress", "groupId": "a"}}]),
        ] {
            let engine = engine_of(serde_json::json!([
                {"name": "a", "project": "a", "environments": enabled(strategies.clone())}]));
            assert!(engine.reads_remote_address, "{strategies}");
        }
    }

    #[test]
    fn a_scope_sees_its_projects_or_all() {
        let projects = ["a".to_string()];
        let some = Scope {
            environment: "default",
            projects: Some(&projects),
        };
        assert!(some.sees("a") && !some.sees("b"));
        let all = Scope {
            environment: "default",
            projects: None,
        };
        assert!(all.sees("b"));
    }
}
