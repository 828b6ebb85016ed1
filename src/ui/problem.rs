//! Failures as pages: the API's error (`ApiError`, the one mapping from domain and store
//! errors to statuses and messages) rendered as HTML for people.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::error::ApiError;
use crate::service::ServiceError;

use super::layout::{page, Section};

/// A page saying what went wrong, with `status`.
pub fn problem_page(status: StatusCode, message: &str) -> Response {
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Not allowed",
        s if s.is_server_error() => "Something went wrong",
        _ => "That did not work",
    };
    page(
        status,
        title,
        None,
        Section::None,
        html! {
            p role="alert" { (message) }
            p { a href="/ui/toggles" { "Back to the toggles" } }
        },
    )
}

/// An error of a UI handler, shown as a page.
#[derive(Debug)]
pub struct Problem(pub ApiError);

impl From<ServiceError> for Problem {
    fn from(e: ServiceError) -> Self {
        Problem(ApiError::from(e))
    }
}

impl From<ApiError> for Problem {
    fn from(e: ApiError) -> Self {
        Problem(e)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if let ApiError::Internal(cause) = &self.0 {
            tracing::error!(%cause, "admin UI request failed");
        }
        problem_page(status, &self.0.to_string())
    }
}

/// What UI handlers return.
pub type PageResult = Result<Response, Problem>;
