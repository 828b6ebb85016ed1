//! `/api/docs`: the OpenAPI document rendered by Swagger UI, whose files are compiled into the
//! binary (`utoipa-swagger-ui` with its `vendored` feature), so the page works offline.

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::Config;

use super::openapi::DOCUMENT_PATH;
use crate::error::{ApiError, ErrorBody};
use crate::http::extract::AppPath;
use crate::state::AppState;

/// The page's own files only, plus the inline styles Swagger UI sets on elements (the admin
/// API's default policy allows no active content at all).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     frame-ancestors 'none'";

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(docs_page))
        .routes(routes!(docs_file))
}

/// The API documentation page.
#[utoipa::path(
    get,
    path = "/api/docs",
    tag = "service",
    responses((status = 303, description = "To the page, `/api/docs/index.html`"))
)]
async fn docs_page() -> Redirect {
    // A file path, not `/api/docs/`: trailing slashes are trimmed before routing, and the
    // page's files are named relative to it.
    Redirect::to("/api/docs/index.html")
}

/// The file of the documentation page a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct DocsFilePath {
    /// `index.html`, or a file it loads
    #[param(example = "index.html")]
    file: String,
}

/// A file of the API documentation page.
#[utoipa::path(
    get,
    path = "/api/docs/{file}",
    tag = "service",
    params(DocsFilePath),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/html"),
            (String = "text/css"),
            (String = "text/javascript"),
            (String = "application/javascript"),
            (String = "image/png"),
        )),
        (status = 404, description = "No such file", body = ErrorBody),
    )
)]
async fn docs_file(
    AppPath(DocsFilePath { file }): AppPath<DocsFilePath>,
) -> Result<Response, ApiError> {
    let config = Arc::new(Config::from(DOCUMENT_PATH));
    let found = utoipa_swagger_ui::serve(&file, config)
        .map_err(|e| ApiError::Internal(format!("documentation page file {file}: {e}")))?;
    let Some(found) = found else {
        return Err(ApiError::NotFound(format!(
            "No documentation page file \"{file}\""
        )));
    };
    let mut response = (StatusCode::OK, found.bytes.into_owned()).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&found.content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if found.gzpipped {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    Ok(response)
}
