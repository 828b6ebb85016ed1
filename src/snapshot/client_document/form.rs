//! `DocumentForm`: which family of client documents a request gets — an environment, with
//! segments served by reference or inlined (MODERN-MODEL §1, §5) — and `FormContext`, what
//! serialising a form's toggles at one version needs: the segments to inline, and the bytes
//! that close its documents (the top-level `segments` of the by-reference form).

use std::sync::Arc;

use bytes::Bytes;
use imbl::OrdMap;
use sha2::{Digest, Sha256};

use super::gzip::Deflated;
use crate::domain::config_state::ConfigState;
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::segment::Segment;
use crate::domain::text::Text;
use crate::domain::toggle::Toggle;
use crate::domain::views::{ClientSegment, ClientToggle, SegmentForm};

/// The bytes that close a document without top-level segments.
const PLAIN_SUFFIX: &[u8] = b"]}";

/// A family of client documents: one environment, segments by reference or inlined.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocumentForm {
    pub environment: Text,
    /// Segments' constraints inlined into the strategies (SDKs without `Unleash-Client-Spec`
    /// 4.2.0 or later).
    pub inline_segments: bool,
}

impl Default for DocumentForm {
    /// `default`, segments by reference: what the 3.x API's SDKs get.
    fn default() -> Self {
        Self {
            environment: Text::from(DEFAULT_ENVIRONMENT),
            inline_segments: false,
        }
    }
}

impl DocumentForm {
    /// What a poll of this form without a query is recorded under, so the usage views can
    /// tell which document an instance holds: nothing for the default form, else the form as
    /// Unleash's query names it (`environment=E`, `&inlineSegmentConstraints=true`).
    pub fn recorded_query(&self) -> String {
        if *self == Self::default() {
            return String::new();
        }
        let mut recorded = format!("environment={}", self.environment);
        if self.inline_segments {
            recorded.push_str("&inlineSegmentConstraints=true");
        }
        recorded
    }

    /// The form of `environment`, segments inlined or not. Forms that serve the same bytes
    /// share one family: inlining is a form of its own only while segments exist.
    pub fn of(environment: &str, inline_segments: bool, state: &ConfigState) -> Self {
        Self {
            environment: Text::from(environment),
            inline_segments: inline_segments && !state.segments.is_empty(),
        }
    }
}

/// The environment name of the form served for an environment the registry does not hold: no
/// environment can be named so, so every toggle is unconfigured there (off, no strategies).
const UNKNOWN_ENVIRONMENT: &str = "";

impl DocumentForm {
    /// The form a client request for `environment` is served. An environment the registry
    /// does not hold gets every toggle off with no strategies, as Unleash serves it; every
    /// such name shares one family, so made-up names cannot make forms without bound.
    pub fn requested(environment: &str, inline_segments: bool, state: &ConfigState) -> Self {
        let known = state.environments.contains_key(environment);
        Self::of(
            if known {
                environment
            } else {
                UNKNOWN_ENVIRONMENT
            },
            inline_segments,
            state,
        )
    }
}

/// The closing bytes of a form's documents at one version, with their gzip stretch.
#[derive(Debug)]
pub struct Suffix {
    pub plain: Bytes,
    pub(super) deflated: Deflated,
    /// SHA-256 of `plain`, folded into the ETag.
    pub digest: [u8; 32],
}

impl Suffix {
    fn of(plain: Vec<u8>) -> Self {
        Self {
            deflated: Deflated::of(&plain, b"", true),
            digest: Sha256::digest(&plain).into(),
            plain: Bytes::from(plain),
        }
    }

    /// `]}`: documents without top-level segments.
    pub fn plain() -> Arc<Suffix> {
        static PLAIN: std::sync::OnceLock<Arc<Suffix>> = std::sync::OnceLock::new();
        PLAIN
            .get_or_init(|| Arc::new(Suffix::of(PLAIN_SUFFIX.to_vec())))
            .clone()
    }
}

/// A form at one configuration version.
#[derive(Debug)]
pub struct FormContext {
    pub form: DocumentForm,
    /// The segments of the version (inlined by the inline form; compared between versions).
    pub segments: OrdMap<String, Arc<Segment>>,
    pub suffix: Arc<Suffix>,
}

impl Default for FormContext {
    fn default() -> Self {
        Self {
            form: DocumentForm::default(),
            segments: OrdMap::new(),
            suffix: Suffix::plain(),
        }
    }
}

impl FormContext {
    /// `form` at `state`'s version; `previous` (the same form one build before) lends its
    /// suffix when neither the segments nor which segments toggles refer to changed
    /// (`references_changed`: a toggle that changed refers to a segment, before or after).
    pub fn of(
        form: DocumentForm,
        state: &ConfigState,
        previous: Option<&FormContext>,
        references_changed: bool,
    ) -> Self {
        let suffix = match previous {
            Some(previous) if previous.segments.ptr_eq(&state.segments) && !references_changed => {
                previous.suffix.clone()
            }
            _ if form.inline_segments || state.segments.is_empty() => Suffix::plain(),
            _ => by_reference_suffix(state),
        };
        Self {
            form,
            segments: state.segments.clone(),
            suffix,
        }
    }

    /// How the form serves segments.
    pub fn segment_form(&self) -> SegmentForm<'_> {
        match self.form.inline_segments {
            true => SegmentForm::Inline(&self.segments),
            false => SegmentForm::ByReference,
        }
    }

    /// `toggle`'s client form in this form.
    pub fn client_toggle<'a>(&'a self, toggle: &'a Toggle) -> ClientToggle<'a> {
        ClientToggle::in_environment(toggle, &self.form.environment, self.segment_form())
    }

    /// Appends `toggle`'s JSON object in this form to `out`.
    pub fn write_client_json(&self, toggle: &Toggle, out: &mut Vec<u8>) {
        // Serialising borrowed plain data into a Vec cannot fail.
        let _ = serde_json::to_writer(out, &self.client_toggle(toggle));
    }
}

/// Whether a strategy of `toggle` in `environment` (any environment when `None`) refers to
/// a segment.
pub fn uses_segments(toggle: &Toggle, environment: Option<&str>) -> bool {
    toggle
        .environments
        .iter()
        .filter(|(name, _)| environment.is_none_or(|e| e == name.as_str()))
        .any(|(_, config)| config.strategies.iter().any(|s| !s.segments.is_empty()))
}

/// `],"segments":[…]}`: every segment a strategy of any toggle refers to, in any environment,
/// ordered by name (what Unleash serves: the list is not narrowed to the document's toggles).
fn by_reference_suffix(state: &ConfigState) -> Arc<Suffix> {
    let mut referenced = std::collections::BTreeSet::new();
    for toggle in state.features.values() {
        for (_, environment) in toggle.environments.iter() {
            for strategy in &environment.strategies {
                referenced.extend(strategy.segments.iter().copied());
            }
        }
    }
    let mut served: Vec<ClientSegment> = referenced
        .into_iter()
        .filter_map(|id| state.segments.get(&id.to_string()))
        .map(|segment| ClientSegment::new(segment))
        .collect();
    if served.is_empty() {
        return Suffix::plain();
    }
    served.sort_by(|a, b| a.name.cmp(b.name).then(a.id.cmp(&b.id)));
    let mut plain = br#"],"segments":"#.to_vec();
    // Serialising borrowed plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut plain, &served);
    plain.push(b'}');
    Arc::new(Suffix::of(plain))
}
