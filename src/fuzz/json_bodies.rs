//! Admin request bodies through the path the HTTP layer takes (`http::extract::parse_json`,
//! then the spec's validation): toggles (with strategies, constraints and variants), tags,
//! tag types, strategy definitions, projects and context fields.

use std::fmt::Debug;

use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config;
use super::gen::{
    context_field, definition, project, seeded, tag_type, tag_value, toggle, Universe,
};
use super::mutate::{apply, apply_bytes, byte_edits, mutations};
use crate::domain::context_field::{ContextField, ContextFieldSpec};
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::project::{Project, ProjectSpec};
use crate::domain::strategy::StrategyDefinitionSpec;
use crate::domain::tag::{TagRef, TagSpec, TagTypeSpec};
use crate::domain::toggle::{Toggle, ToggleSpec};
use crate::domain::views::ToggleRecord;
use crate::domain::DomainError;
use crate::error::ApiError;
use crate::http::extract::parse_json;

/// A valid body of one kind, as the service serves the record (what tools send back).
#[derive(Debug, Clone)]
enum Body {
    Toggle(Toggle),
    Project(Project),
    ContextField(ContextField),
    Strategy(crate::domain::strategy::StrategyDefinition),
    TagType(crate::domain::tag::TagType),
    Tag(TagRef),
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        4 => toggle(Universe::of(&seeded())).prop_map(Body::Toggle),
        1 => project().prop_map(Body::Project),
        1 => context_field().prop_map(Body::ContextField),
        1 => definition().prop_map(Body::Strategy),
        1 => tag_type().prop_map(Body::TagType),
        1 => ("[a-z]{2,10}", tag_value()).prop_map(|(kind, value)| {
            Body::Tag(TagRef {
                kind: kind.into(),
                value: value.into(),
            })
        }),
    ]
}

impl Body {
    fn json(&self) -> Value {
        match self {
            Body::Toggle(t) => serde_json::to_value(ToggleRecord::new(t, DEFAULT_ENVIRONMENT)),
            Body::Project(p) => serde_json::to_value(p),
            Body::ContextField(f) => serde_json::to_value(f),
            Body::Strategy(s) => serde_json::to_value(s),
            Body::TagType(t) => serde_json::to_value(t),
            Body::Tag(t) => serde_json::to_value(t),
        }
        .expect("serialisable")
    }

    /// Parses `bytes` as this kind's spec and validates it: the record it makes (as the
    /// generator made it, fields the body does not decide copied from `self`), or `None` after
    /// checking the refusal is typed.
    fn read(&self, bytes: &[u8]) -> Result<Option<Body>, TestCaseError> {
        let state = seeded();
        Ok(match self {
            Body::Toggle(t) => {
                read::<ToggleSpec, _>(bytes, |s| s.validate(Some(&state)))?.map(|v| {
                    Body::Toggle(Toggle {
                        tags: t.tags.clone(),
                        ..Toggle::create(v, t.created_at)
                    })
                })
            }
            Body::Project(p) => read::<ProjectSpec, _>(bytes, |s| s.validate(None))?
                .map(|v| Body::Project(Project::create(v, p.created_at))),
            Body::ContextField(f) => read::<ContextFieldSpec, _>(bytes, |s| s.validate(None))?
                .map(|v| Body::ContextField(ContextField::create(v, f.created_at))),
            // Deprecation has routes of its own: a body's `deprecated` is ignored.
            Body::Strategy(s) => read::<StrategyDefinitionSpec, _>(bytes, |s| s.validate(None))?
                .map(|v| {
                    Body::Strategy(crate::domain::strategy::StrategyDefinition {
                        deprecated: s.deprecated,
                        ..v
                    })
                }),
            Body::TagType(_) => {
                read::<TagTypeSpec, _>(bytes, |s| s.validate(None))?.map(Body::TagType)
            }
            Body::Tag(_) => read::<TagSpec, _>(bytes, TagSpec::validate)?.map(Body::Tag),
        })
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

/// `parse_json` then `validate`; `None` when either refuses, after checking the refusal is a
/// 400 or a list of problems.
fn read<S: DeserializeOwned, T: Debug>(
    bytes: &[u8],
    validate: impl FnOnce(S) -> Result<T, DomainError>,
) -> Result<Option<T>, TestCaseError> {
    let spec = match parse_json::<S>(bytes) {
        Ok(spec) => spec,
        Err(ApiError::BadRequest { message, .. }) => {
            prop_assert!(!message.is_empty());
            return Ok(None);
        }
        Err(other) => return Err(TestCaseError::fail(format!("not a 400: {other:?}"))),
    };
    match validate(spec) {
        Ok(valid) => Ok(Some(valid)),
        Err(DomainError::Invalid(problems)) => {
            prop_assert!(!problems.0.is_empty());
            Ok(None)
        }
        Err(other) => Err(TestCaseError::fail(format!("not invalid: {other:?}"))),
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// A record as served, sent back as a body, is accepted and makes the same record.
    #[test]
    fn a_served_record_sent_back_is_the_same_record(body in body()) {
        let bytes = serde_json::to_vec(&body.json()).expect("serialisable");
        let read = body.read(&bytes)?;
        prop_assert_eq!(read, Some(body));
    }

    /// A mutated body is accepted or refused with a 400 and its problems; never a panic.
    #[test]
    fn a_mutated_body_is_accepted_or_refused(
        body in body(),
        edits in mutations(),
        bytes_edits in byte_edits(),
    ) {
        let bytes = apply_bytes(
            serde_json::to_vec(&apply(body.json(), &edits)).expect("serialisable"),
            &bytes_edits,
        );
        body.read(&bytes)?;
    }
}
