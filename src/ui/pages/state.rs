//! Import and export of the whole configuration: an import is previewed first (the service's
//! dry run: what each toggle would become, section counts), then applied from the same
//! document; the export is the API's document, downloaded.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;

use crate::domain::export::{export, ExportSections};
use crate::domain::import::{parse_document, DocumentFormat, ImportOptions};
use crate::service::import::ImportReport;
use crate::state::AppState;
use crate::ui::form::Errors;
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::{see_other, with_notice};

/// The import form's fields.
#[derive(Deserialize, Default)]
pub struct ImportForm {
    #[serde(default)]
    document: String,
    #[serde(default)]
    drop: Option<String>,
    #[serde(default)]
    keep: Option<String>,
    /// `preview` (the dry run) or `apply`.
    #[serde(default)]
    step: String,
}

fn render(
    viewer: &Viewer,
    form: &ImportForm,
    errors: &Errors,
    report: Option<&ImportReport>,
) -> Response {
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = html! {
        section aria-labelledby="h-export" {
            h2 #h-export { "Export" }
            p { "The whole configuration (toggles, strategies, tags, projects) as the API exports it." }
            p #export-secrets {
                strong { "Addon secrets are masked" } " (" code { "*****" } ") in this download. "
                "Imported here again, a masked secret keeps the one stored; imported into a fresh "
                "installation, each addon with a masked secret is refused, naming the parameter. "
                "For a full backup, use the API: " code { "GET /api/admin/state/export?addonSecrets=true" }
                " (with an admin token)."
            }
            a role="button" href="/ui/state/export" hx-boost="false" download="flagpole-export.json" { "Download export (JSON)" }
        }
        section aria-labelledby="h-import" {
            h2 #h-import { "Import" }
            (errors.summary())
            @if let Some(report) = report {
                section.notice role="status" aria-labelledby="h-preview" {
                    h3 #h-preview { "Preview: what the import would change" }
                    @if !report.changed { p { "Nothing would change." } }
                    pre { (serde_json::to_string_pretty(&report.summary).unwrap_or_default()) }
                    @if let Some(toggles) = &report.toggles {
                        ul.diff {
                            @for t in toggles {
                                li {
                                    strong { (t.name) } " — " (t.change)
                                    @if !t.diffs.is_empty() {
                                        ul { @for d in &t.diffs {
                                            li { code { (d["path"].to_string()) } ": "
                                                @if !d["lhs"].is_null() { del { (d["lhs"].to_string()) } " " }
                                                @if !d["rhs"].is_null() { ins { (d["rhs"].to_string()) } } }
                                        } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            form method="post" action="/ui/state" {
                (csrf(viewer))
                label for="f-document" { "Document (JSON or YAML, as exported)" }
                textarea id="f-document" name="document" rows="10" spellcheck="false"
                    aria-invalid=[errors.has("document").then_some("true")]
                    aria-describedby="f-document-error" { (form.document) }
                (errors.under("f-document", "document"))
                label { input type="checkbox" name="drop" value="true" checked[form.drop.is_some()]; "Remove what the document does not list (toggles are archived)" }
                label { input type="checkbox" name="keep" value="true" checked[form.keep.is_some()]; "Keep existing records; only add what is missing" }
                div.actions {
                    button type="submit" name="step" value="preview" { "Preview changes" }
                    @if report.is_some() {
                        button.contrast type="submit" name="step" value="apply"
                            data-confirm="Apply this import to the live configuration?" { "Apply import" }
                    }
                }
            }
        }
    };
    page(
        status,
        "Import and export",
        Some(viewer),
        Section::State,
        body,
    )
}

/// `GET /ui/state`.
pub async fn form(viewer: Viewer) -> Response {
    render(&viewer, &ImportForm::default(), &Errors::default(), None)
}

/// `POST /ui/state`: a preview (dry run), or the import itself.
pub async fn submit(State(state): State<AppState>, posted: Posted<ImportForm>) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let document = match parse_document(form.document.as_bytes(), DocumentFormat::Sniff) {
        Ok(document) => document,
        Err(e) => {
            let errors = Errors::of(crate::service::ServiceError::from(e), "document")?;
            let errors = if errors.is_empty() {
                Errors::field("document", "The document could not be read.")
            } else {
                errors
            };
            return Ok(render(&viewer, &form, &errors, None));
        }
    };
    let options = ImportOptions {
        drop: form.drop.is_some(),
        keep: form.keep.is_some(),
    };
    let dry_run = form.step != "apply";
    match state
        .service
        .import_state(&viewer.actor, document, options, dry_run)
        .await
    {
        Ok(report) if dry_run => Ok(render(&viewer, &form, &Errors::default(), Some(&report))),
        Ok(report) => Ok(see_other(&with_notice(
            "/ui/toggles",
            if report.changed {
                "Import applied."
            } else {
                "Import applied: nothing changed."
            },
        ))),
        Err(e) => Ok(render(&viewer, &form, &Errors::of(e, "document")?, None)),
    }
}

/// `GET /ui/state/export`: the export, as a download.
pub async fn download(_viewer: Viewer, State(state): State<AppState>) -> PageResult {
    let config = state.service.state()?;
    let body = serde_json::to_vec_pretty(&export(&config, ExportSections::default()))
        .map_err(|e| Problem(crate::error::ApiError::Internal(e.to_string())))?;
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"flagpole-export.json\""),
    );
    Ok(response)
}
