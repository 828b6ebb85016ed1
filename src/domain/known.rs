//! `KnownNames`: what validation needs to know about the rest of the configuration — which
//! projects, context fields and segments exist — without reaching for the whole `ConfigState` (which
//! implements it).

use super::context_field::ContextField;

/// The projects and context fields a record may refer to.
pub trait KnownNames {
    /// Whether a project with id `id` is stored (the `default` project's rule is the caller's).
    fn has_project(&self, id: &str) -> bool;
    /// The stored context field named `name`, if any (built-in fields are the caller's rule).
    fn context_field(&self, name: &str) -> Option<&ContextField>;
    /// Whether a segment with id `id` is stored.
    fn has_segment(&self, id: u32) -> bool;
}

/// Knows nothing: no stored project, no stored context field (what an empty configuration
/// knows), for tests of the rules that take `KnownNames`.
#[cfg(test)]
pub(crate) struct NothingKnown;

#[cfg(test)]
impl KnownNames for NothingKnown {
    fn has_project(&self, _id: &str) -> bool {
        false
    }

    fn context_field(&self, _name: &str) -> Option<&ContextField> {
        None
    }

    fn has_segment(&self, _id: u32) -> bool {
        false
    }
}
