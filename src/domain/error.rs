//! Typed domain errors; the HTTP edge maps each variant to one status.

use serde::Serialize;

/// One problem with one field of an input document.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// Human-readable description of the problem.
    pub message: String,
    /// Where in the document, e.g. `strategies[0].name`; empty for the whole body.
    pub path: String,
}

/// All problems found in one input document (validation never stops at the first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// Records a problem at `path`.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            message: message.into(),
            path: path.into(),
        });
    }

    /// `Ok(value)` when nothing was recorded, otherwise the collected errors.
    pub fn into_result<T>(self, value: T) -> Result<T, DomainError> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(DomainError::Invalid(self))
        }
    }

    /// The value of `result`, or `None` after recording its problems under `prefix` (the
    /// path of the part of a larger document it validated, e.g. `features[3]`).
    pub fn absorb<T>(&mut self, prefix: &str, result: Result<T, DomainError>) -> Option<T> {
        let problems = match result {
            Ok(value) => return Some(value),
            Err(DomainError::Invalid(errors)) => errors.0,
            Err(other) => vec![FieldError {
                message: other.to_string(),
                path: String::new(),
            }],
        };
        for problem in problems {
            let path = match problem.path.as_str() {
                "" => prefix.to_string(),
                path => format!("{prefix}.{path}"),
            };
            self.push(path, problem.message);
        }
        None
    }

    /// `Ok` when every check passed; otherwise the problems of all the failed ones in one
    /// error (or the first failure that is not a validation error).
    pub fn all(
        checks: impl IntoIterator<Item = Result<(), DomainError>>,
    ) -> Result<(), DomainError> {
        let mut errors = Self::default();
        for check in checks {
            match check {
                Ok(()) => {}
                Err(DomainError::Invalid(found)) => errors.0.extend(found.0),
                Err(other) => return Err(other),
            }
        }
        errors.into_result(())
    }

    /// A single-problem error.
    pub fn single(path: impl Into<String>, message: impl Into<String>) -> DomainError {
        let mut errors = Self::default();
        errors.push(path, message);
        DomainError::Invalid(errors)
    }
}

/// Why a use-case refused to act.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DomainError {
    /// The input is malformed or breaks a rule.
    #[error("{}", .0.0.first().map(|e| e.message.as_str()).unwrap_or("invalid input"))]
    Invalid(ValidationErrors),
    /// A toggle name is taken by an active or archived toggle (spec §7: 403).
    #[error("{0}")]
    ToggleNameTaken(String),
    /// Another resource with that identity exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// The addressed resource does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The operation is not allowed on this resource (e.g. a built-in strategy).
    #[error("{0}")]
    Forbidden(String),
    /// The operation would break what other records rely on (a project that still has
    /// toggles, a context field that constraints use, the `default` project).
    #[error("{0}")]
    InUse(String),
}
