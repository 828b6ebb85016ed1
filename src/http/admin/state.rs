//! `/api/admin/state`: export and import of the whole configuration (spec §4.4, API-FACTS §7).

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::export::{export, export_environment, ExportSections};
use crate::domain::import::{
    parse_document, read_client_document_in, DocumentFormat, ImportOptions,
};
use crate::domain::DomainError;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::QueryFlags;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource; an import body may be up to `import_limit` bytes.
pub fn router(import_limit: usize) -> OpenApiRouter<AppState> {
    let import = OpenApiRouter::default()
        .routes(routes!(import_state))
        .layer(DefaultBodyLimit::max(import_limit));
    OpenApiRouter::default()
        .routes(routes!(export_state))
        .merge(import)
}

/// Exports the configuration (JSON or YAML).
#[utoipa::path(
    get,
    path = "/state/export",
    tag = "state",
    params(
        ("format" = Option<String>, Query, description = "`yaml` for YAML; JSON otherwise"),
        ("download" = Option<String>, Query, description = "A true value: sent as an attachment"),
        ("featureToggles" = Option<String>, Query, description = "Include toggles (default true; API-FACTS §7.1 booleans)"),
        ("strategies" = Option<String>, Query, description = "Include strategy definitions (default true)"),
        ("tags" = Option<String>, Query, description = "Include tag types, tags and toggle tags (default true)"),
        ("projects" = Option<String>, Query, description = "Include projects (default true)"),
        ("addonSecrets" = Option<String>, Query, description = "Addons with their secrets (default false: masked as `*****`, which an import reads as \"keep the stored value\")"),
        ("environment" = Option<String>, Query, description = "Instead: the client document of this environment (every active toggle, segments by reference, every segment), which the import takes back with the same parameter"),
    ),
    responses(
        (status = 200, description = "The state document", content(
            (Object = "application/json"),
            (String = "text/yaml"),
        )),
        (status = 400, description = "A malformed query", body = ErrorBody),
    )
)]
async fn export_state(State(service): State<Service>, query: QueryFlags) -> ApiResult<Response> {
    let sections = ExportSections {
        features: query.flag("featureToggles", true),
        strategies: query.flag("strategies", true),
        tags: query.flag("tags", true),
        projects: query.flag("projects", true),
        addon_secrets: query.flag("addonSecrets", false),
    };
    let state = service.state()?;
    let yaml = query.get("format") == Some("yaml");
    let (body, content_type, extension) = match query.get("environment") {
        Some(environment) => {
            if !state.environments.contains_key(environment) {
                return Err(ApiError::bad_request(
                    "environment",
                    format!("there is no environment \"{environment}\""),
                ));
            }
            encode(&export_environment(&state, environment), yaml)?
        }
        None => encode(&export(&state, sections), yaml)?,
    };
    let mut response = Response::new(Body::from(body));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The whole configuration (with `addonSecrets`, webhook secrets): never kept by a cache.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if query.flag("download", false) {
        let name = format!(
            "attachment; filename=\"export-{}.{extension}\"",
            chrono::Utc::now().format("%Y-%m-%d_%H-%M-%S")
        );
        if let Ok(value) = HeaderValue::from_str(&name) {
            response
                .headers_mut()
                .insert(header::CONTENT_DISPOSITION, value);
        }
    }
    Ok(response)
}

/// `document` as YAML or JSON: the bytes, their content type and a file extension.
fn encode(
    document: &impl serde::Serialize,
    yaml: bool,
) -> ApiResult<(Vec<u8>, &'static str, &'static str)> {
    Ok(if yaml {
        let text = yaml_serde::to_string(document)
            .map_err(|e| ApiError::Internal(format!("export as YAML: {e}")))?;
        (text.into_bytes(), "text/yaml; charset=utf-8", "yml")
    } else {
        let bytes = serde_json::to_vec(document)
            .map_err(|e| ApiError::Internal(format!("export as JSON: {e}")))?;
        (bytes, "application/json; charset=utf-8", "json")
    })
}

/// Imports a state document in one commit (or shows what it would change).
#[utoipa::path(
    post,
    path = "/state/import",
    tag = "state",
    params(
        ("drop" = Option<String>, Query, description = "A true value: remove (archive) what the document does not list"),
        ("keep" = Option<String>, Query, description = "A true value: create what is missing, never override"),
        ("dryRun" = Option<String>, Query, description = "A true value: report the changes, write nothing"),
        ("environment" = Option<String>, Query, description = "Import a client document (what `GET /api/client/features` returns: `{version, features, segments?}`) into this environment, stored as written; `drop` then removes the environment's configuration from toggles it does not list"),
    ),
    request_body(description = "A state document (as exported), or with `environment` a client document: JSON, YAML, or a multipart `file` part", content(
        (Object = "application/json"),
        (String = "application/x-yaml"),
        (String = "multipart/form-data"),
    )),
    responses(
        (status = 200, description = "Dry run: what the import would change", body = Object),
        (status = 202, description = "Imported in one commit; a summary", body = Object),
        (status = 400, description = "The document's problems, each with its path", body = ErrorBody),
    )
)]
async fn import_state(
    State(service): State<Service>,
    actor: Actor,
    query: QueryFlags,
    request: Request,
) -> ApiResult<Response> {
    let options = ImportOptions {
        drop: query.flag("drop", false),
        keep: query.flag("keep", false),
    };
    let dry_run = query.flag("dryRun", false);
    let (bytes, format) = read_body(request).await?;
    let status = match dry_run {
        true => StatusCode::OK,
        false => StatusCode::ACCEPTED,
    };
    // Parsing megabytes is CPU work: off the runtime's workers.
    if let Some(environment) = query.get("environment") {
        let document = off_the_workers(move || read_client_document_in(&bytes, format)).await?;
        let report = service
            .import_client_document(
                &actor,
                document,
                environment.to_string(),
                options.drop,
                dry_run,
            )
            .await?;
        return Ok((status, Json(report)).into_response());
    }
    let document = off_the_workers(move || parse_document(&bytes, format)).await?;
    let report = service
        .import_state(&actor, document, options, dry_run)
        .await?;
    Ok((status, Json(report)).into_response())
}

/// Runs `parse` on a blocking thread.
async fn off_the_workers<T: Send + 'static>(
    parse: impl FnOnce() -> Result<T, DomainError> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(parse)
        .await
        .map_err(|e| ApiError::Internal(format!("parsing an import: {e}")))?
        .map_err(ApiError::from)
}

/// The document's bytes and what they are written in: a multipart `file` part (its file
/// name's extension, else sniffed), or the body (YAML when its Content-Type says so; JSON
/// when it says so; else sniffed).
async fn read_body(request: Request) -> ApiResult<(Bytes, DocumentFormat)> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(|e| ApiError::bad_request("", format!("Invalid multipart body: {e}")))?;
        while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
            if field.name() != Some("file") {
                continue;
            }
            let format = field
                .file_name()
                .map_or(DocumentFormat::Sniff, DocumentFormat::of_file_name);
            let bytes = field.bytes().await.map_err(multipart_error)?;
            return Ok((bytes, format));
        }
        return Err(ApiError::bad_request(
            "file",
            "a multipart import needs a \"file\" part holding the document",
        ));
    }
    let format = if content_type.contains("yaml") {
        DocumentFormat::Yaml
    } else if content_type.contains("json") {
        DocumentFormat::Json
    } else {
        DocumentFormat::Sniff
    };
    let bytes = Bytes::from_request(request, &()).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::bad_request("", format!("Could not read the body: {e}"))
        }
    })?;
    Ok((bytes, format))
}

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge(
        "The import is larger than allowed (--import-body-limit-mib); split it or raise the limit"
            .into(),
    )
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        ApiError::bad_request("file", format!("Invalid multipart body: {e}"))
    }
}
