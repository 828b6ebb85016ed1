//! Forms: the API's validation messages placed next to the fields they name, and labelled
//! inputs that keep what was typed.

use axum::http::StatusCode;
use maud::{html, Markup};

use crate::error::ApiError;
use crate::service::ServiceError;

use super::problem::Problem;

/// The problems of a submitted form: per field (by the API's path), and for the whole form.
#[derive(Debug, Default)]
pub struct Errors {
    fields: Vec<(String, String)>,
    general: Vec<String>,
    /// The status of a failure that was not about the input (the store, a timeout).
    failure: Option<StatusCode>,
}

impl Errors {
    /// The problems of a refused write, with those about the resource as a whole (a taken
    /// name, a conflict) placed on `main_field`; a failure that is not about the input (the
    /// store, a fault) stays a problem page.
    pub fn of(e: ServiceError, main_field: &str) -> Result<Self, Problem> {
        Self::of_api(ApiError::from(e), main_field).map_err(Problem)
    }

    /// As [`Errors::of`], but a failure that is not about the input (the store unavailable,
    /// a timeout, a fault) is a problem with the whole form too: the form is shown again
    /// with what was typed, to be sent again, instead of a problem page losing the edits.
    pub fn keeping_input(e: ServiceError, main_field: &str) -> Self {
        Self::of_api(ApiError::from(e), main_field).unwrap_or_else(|failure| {
            if let ApiError::Internal(cause) = &failure {
                tracing::error!(%cause, "admin UI save failed");
            }
            Self {
                fields: Vec::new(),
                general: vec![format!(
                    "{failure} What you typed is kept below; send it again when the service answers."
                )],
                failure: Some(failure.status()),
            }
        })
    }

    /// The status of the page showing the form again: 422, or the failure's own status
    /// when the write failed for another reason than the input.
    pub fn status(&self) -> StatusCode {
        self.failure.unwrap_or(StatusCode::UNPROCESSABLE_ENTITY)
    }

    fn of_api(e: ApiError, main_field: &str) -> Result<Self, ApiError> {
        let mut errors = Self::default();
        match e {
            ApiError::BadRequest { message, details } => {
                if details.is_empty() {
                    errors.general.push(message);
                }
                for detail in details {
                    if detail.path.is_empty() {
                        errors.general.push(detail.message);
                    } else {
                        errors.fields.push((detail.path, detail.message));
                    }
                }
            }
            ApiError::Forbidden(m) | ApiError::Conflict(m) | ApiError::NotFound(m) => {
                if main_field.is_empty() {
                    errors.general.push(m);
                } else {
                    errors.fields.push((main_field.to_string(), m));
                }
            }
            other => return Err(other),
        }
        Ok(errors)
    }

    /// Shows the problems the API reports at `path` on the form's field `field`.
    pub fn rename(&mut self, path: &str, field: &str) {
        for (p, _) in &mut self.fields {
            if p == path {
                *p = field.to_string();
            }
        }
    }

    /// Shows the problems the API reports at `from` or below it (`from.x`, `from[i]`) at
    /// `to` and below instead (a list's j-th item shown on the form's row i).
    pub fn rename_prefix(&mut self, from: &str, to: &str) {
        for (p, _) in &mut self.fields {
            if p == from || p.starts_with(&format!("{from}.")) || p.starts_with(&format!("{from}["))
            {
                *p = format!("{to}{}", &p[from.len()..]);
            }
        }
    }

    /// A problem with one field.
    pub fn field(name: &str, message: impl Into<String>) -> Self {
        Self {
            fields: vec![(name.to_string(), message.into())],
            general: Vec::new(),
            failure: None,
        }
    }

    /// A problem with the form as a whole.
    pub fn general(message: impl Into<String>) -> Self {
        Self {
            fields: Vec::new(),
            general: vec![message.into()],
            failure: None,
        }
    }

    /// Whether nothing is wrong.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.general.is_empty()
    }

    /// The messages about `name` (its path, or paths below it).
    fn about(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(path, _)| {
                path == name
                    || path.starts_with(&format!("{name}."))
                    || path.starts_with(&format!("{name}["))
            })
            .map(|(_, m)| m.as_str())
            .collect()
    }

    /// The summary at the top of a form: every problem, so none is missed (also those about
    /// fields this form does not show).
    pub fn summary(&self) -> Markup {
        html! {
            @if !self.is_empty() {
                div.errors role="alert" {
                    p { strong { "Nothing was saved:" } }
                    ul {
                        @for m in &self.general { li { (m) } }
                        @for (path, m) in &self.fields { li { code { (path) } ": " (m) } }
                    }
                }
            }
        }
    }

    /// The error line under a field, with the id its input points at.
    pub fn under(&self, id: &str, name: &str) -> Markup {
        let messages = self.about(name);
        html! {
            @if !messages.is_empty() {
                small.error id={ (id) "-error" } { (messages.join("; ")) }
            }
        }
    }

    /// The messages about `name`, joined.
    pub fn about_text(&self, name: &str) -> String {
        self.about(name).join("; ")
    }

    /// Whether `name` has a problem.
    pub fn has(&self, name: &str) -> bool {
        !self.about(name).is_empty()
    }
}

/// A labelled text input keeping `value`, marked invalid with its message when `errors` has
/// one for `name`.
pub fn text_field(
    label: &str,
    name: &str,
    value: &str,
    errors: &Errors,
    help: Option<&str>,
) -> Markup {
    let id = format!("f-{}", name.replace(['.', '[', ']'], "-"));
    let invalid = errors.has(name);
    let described = match (invalid, help.is_some()) {
        (true, _) => Some(format!("{id}-error")),
        (false, true) => Some(format!("{id}-help")),
        _ => None,
    };
    html! {
        label for=(id) { (label) }
        input type="text" id=(id) name=(name) value=(value)
            aria-invalid=[invalid.then_some("true")]
            aria-describedby=[described];
        @if let Some(help) = help { @if !invalid { small id={ (id) "-help" } { (help) } } }
        (errors.under(&id, name))
    }
}
