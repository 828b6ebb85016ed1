//! Editing and deleting the records of the settings page — segments (with their constraints),
//! projects, context fields (legal values), strategy definitions (parameters) and tag types —
//! through the service calls the admin API uses. Each record has its own page: the form
//! filled with what it holds, and a delete button that asks first; a refused delete (409 "in
//! use") is shown on that page as the API words it.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::domain::config_state::ConfigState;
use crate::error::ApiError;
use crate::service::ServiceError;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::constraint_form::{constraint_fieldset, constraints_body, Fields};
use super::toggles::Notice;
use super::{see_other, segment, with_notice};

/// Parameter rows of a strategy definition's form at least.
const PARAMETER_ROWS: usize = 2;
/// The parameter types a strategy definition may declare.
const PARAMETER_TYPES: [&str; 5] = ["string", "percentage", "list", "number", "boolean"];

/// The registries whose records can be edited here, with their headings (singular).
const EDITABLE: [(&str, &str); 5] = [
    ("segments", "segment"),
    ("projects", "project"),
    ("context-fields", "context field"),
    ("strategies", "strategy definition"),
    ("tag-types", "tag type"),
];

/// Whether records of `kind` have an edit page.
pub fn editable(kind: &str) -> bool {
    EDITABLE.iter().any(|(k, _)| *k == kind)
}

/// The path of the edit page of the record `key` of `kind`.
pub fn edit_path(kind: &str, key: &str) -> String {
    format!("/ui/settings/{kind}/{}", segment(key))
}

fn not_found(kind: &str, key: &str) -> Problem {
    Problem(ApiError::NotFound(format!("There is no {kind} “{key}”.")))
}

/// The fields of the record `key` of `kind` as it is stored, named as its form names them.
fn held(state: &ConfigState, kind: &str, key: &str) -> Result<Fields, Problem> {
    let mut f = Fields::default();
    match kind {
        "segments" => {
            let s = state
                .segments
                .get(key)
                .ok_or_else(|| not_found(kind, key))?;
            f.push("name", s.name.as_str());
            f.push("description", s.description.clone().unwrap_or_default());
            f.push("project", s.project.clone().unwrap_or_default());
            f.push_constraints(&s.constraints);
        }
        "projects" => {
            let p = state
                .projects
                .get(key)
                .ok_or_else(|| not_found(kind, key))?;
            f.push("name", p.name.as_str());
            f.push("description", p.description.as_str());
        }
        "context-fields" => {
            let c = state
                .context_fields
                .get(key)
                .ok_or_else(|| not_found(kind, key))?;
            f.push("description", c.description.as_str());
            f.push("legalValues", c.legal_values.join("\n"));
            f.push("sortOrder", c.sort_order.to_string());
            if c.stickiness {
                f.push("stickiness", "true");
            }
        }
        "strategies" => {
            let s = state
                .strategies
                .get(key)
                .ok_or_else(|| not_found(kind, key))?;
            f.push("description", s.description.as_str());
            for (i, p) in s.parameters.iter().enumerate() {
                f.push(format!("p{i}.name"), p.name.as_str());
                f.push(format!("p{i}.type"), p.kind.as_str());
                f.push(format!("p{i}.description"), p.description.as_str());
                if p.required {
                    f.push(format!("p{i}.required"), "true");
                }
            }
        }
        "tag-types" => {
            let t = state
                .tag_types
                .get(key)
                .ok_or_else(|| not_found(kind, key))?;
            f.push("description", t.description.as_str());
            f.push("icon", t.icon.as_str());
        }
        _ => return Err(not_found("registry", kind)),
    }
    Ok(f)
}

/// The inputs of the form of `kind`.
fn inputs(state: &ConfigState, kind: &str, f: &Fields, errors: &Errors) -> Markup {
    let text = |label: &str, name: &str| text_field(label, name, f.get(name), errors, None);
    html! {
        (errors.summary())
        @match kind {
            "segments" => {
                (text("Name", "name"))
                (text("Description", "description"))
                (text_field("Project (blank: every project)", "project", f.get("project"), errors, None))
                (constraint_fieldset(state, f, errors, "seg-c", "Constraints (all must hold)"))
            }
            "projects" => {
                (text("Name", "name"))
                (text("Description", "description"))
            }
            "context-fields" => {
                (text("Description", "description"))
                label for="f-legalValues" { "Legal values (one a line; blank: any value)"
                    textarea id="f-legalValues" name="legalValues" rows="4"
                        aria-invalid=[errors.has("legalValues").then_some("true")]
                        aria-describedby=[errors.has("legalValues").then_some("f-legalValues-error")] {
                        (f.raw("legalValues"))
                    }
                }
                (errors.under("f-legalValues", "legalValues"))
                (text("Sort order", "sortOrder"))
                label { input type="checkbox" name="stickiness" value="true" checked[f.get("stickiness") == "true"]; "Usable as stickiness" }
            }
            "strategies" => {
                (text("Description", "description"))
                (parameter_rows(f, errors))
            }
            _ => {
                (text("Description", "description"))
                (text("Icon", "icon"))
            }
        }
    }
}

/// The parameter rows of a strategy definition's form (one blank row past those filled).
fn parameter_rows(f: &Fields, errors: &Errors) -> Markup {
    let rows = f.shown_rows("p", "name", PARAMETER_ROWS);
    html! {
        fieldset {
            legend { "Parameters" }
            @for i in 0..rows {
                @let p = format!("p{i}");
                div.grid {
                    label for={ "f-" (p) "-name" } { "Parameter " (i + 1) " name"
                        input type="text" id={ "f-" (p) "-name" } name={ (p) ".name" } value=(f.get(&format!("{p}.name")))
                            aria-invalid=[errors.has(&format!("parameters[{i}]")).then_some("true")];
                    }
                    label for={ "f-" (p) "-type" } { "Parameter " (i + 1) " type"
                        select id={ "f-" (p) "-type" } name={ (p) ".type" } {
                            @for t in PARAMETER_TYPES {
                                option value=(t) selected[f.get(&format!("{p}.type")) == t] { (t) }
                            }
                            // A stored type the form does not list stays as it is.
                            @let held = f.get(&format!("{p}.type"));
                            @if !held.is_empty() && !PARAMETER_TYPES.contains(&held) {
                                option value=(held) selected { (held) }
                            }
                        }
                    }
                    label for={ "f-" (p) "-description" } { "Parameter " (i + 1) " description"
                        input type="text" id={ "f-" (p) "-description" } name={ (p) ".description" } value=(f.get(&format!("{p}.description")));
                    }
                    label { input type="checkbox" name={ (p) ".required" } value="true" checked[f.get(&format!("{p}.required")) == "true"]; "Parameter " (i + 1) " required" }
                }
                (errors.under(&format!("f-{p}-name"), &format!("parameters[{i}]")))
            }
        }
    }
}

/// The edit page of the record `key` of `kind`: `typed` (a refused save) or what it holds;
/// `refused` is why a delete did not happen (status 409 or another 4xx).
fn render(
    state: &AppState,
    viewer: &Viewer,
    (kind, key): (&str, &str),
    typed: Option<(&Fields, &Errors)>,
    refused: Option<(StatusCode, &str)>,
    notice: Option<&str>,
) -> PageResult {
    let config = state.service.state()?;
    let Some((_, singular)) = EDITABLE.iter().find(|(k, _)| *k == kind) else {
        return Err(not_found("registry", kind));
    };
    let stored = held(&config, kind, key)?;
    let no_errors = Errors::default();
    let (fields, errors, mut status) = match typed {
        Some((fields, errors)) => (fields, errors, errors.status()),
        None => (&stored, &no_errors, StatusCode::OK),
    };
    if let Some((code, _)) = refused {
        status = code;
    }
    let shown = match kind {
        "segments" => config
            .segments
            .get(key)
            .map_or_else(|| key.to_string(), |s| s.name.clone()),
        _ => key.to_string(),
    };
    let path = edit_path(kind, key);
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some((_, message)) = refused {
            div.errors role="alert" { p { strong { "Not deleted: " } (message) } }
        }
        p { a href={ "/ui/settings#h-" (kind) } { "Back to the settings" } }
        form method="post" action=(path) {
            (csrf(viewer))
            (inputs(&config, kind, fields, errors))
            button type="submit" { "Save " (singular) }
        }
        section aria-labelledby="h-delete" {
            h2 #h-delete { "Delete" }
            form method="post" action={ (path) "/delete" } {
                (csrf(viewer))
                button.contrast type="submit"
                    data-confirm={ "Delete the " (singular) " “" (shown) "”? This cannot be undone." } {
                    "Delete " (singular) " " (shown)
                }
            }
        }
    };
    Ok(page(
        status,
        &format!("Edit {singular} {shown}"),
        Some(viewer),
        Section::Settings,
        body,
    ))
}

/// `GET /ui/settings/{kind}/{key}`.
pub async fn form(
    viewer: Viewer,
    State(state): State<AppState>,
    Path((kind, key)): Path<(String, String)>,
    Query(notice): Query<Notice>,
) -> PageResult {
    render(
        &state,
        &viewer,
        (&kind, &key),
        None,
        None,
        notice.notice.as_deref(),
    )
}

fn spec<T: DeserializeOwned>(body: Value) -> Result<T, Problem> {
    serde_json::from_value(body).map_err(|e| Problem(ApiError::bad_request("", e.to_string())))
}

/// A segment id from the path (a number), or 404.
fn segment_id(key: &str) -> Result<u32, Problem> {
    key.parse().map_err(|_| not_found("segment", key))
}

/// Saves the record `key` of `kind` from the form `f`, as the API's PUT does.
async fn save_one(
    state: &AppState,
    viewer: &Viewer,
    (kind, key): (&str, &str),
    f: &Fields,
) -> Result<Result<(), ServiceError>, Problem> {
    let service = &state.service;
    let actor = &viewer.actor;
    let text = |name: &str| f.get(name).to_string();
    let optional = |name: &str| (!f.get(name).is_empty()).then(|| f.get(name).to_string());
    Ok(match kind {
        "segments" => {
            let mut body = json!({"name": text("name"), "description": text("description"),
                "constraints": constraints_body(f)});
            if let Some(project) = optional("project") {
                body["project"] = json!(project);
            }
            service
                .update_segment(actor, segment_id(key)?, spec(body)?)
                .await
                .map(drop)
        }
        "projects" => {
            let body = json!({"id": key, "name": text("name"), "description": text("description")});
            service
                .update_project(actor, key, spec(body)?)
                .await
                .map(drop)
        }
        "context-fields" => {
            let legal = f.lines("legalValues");
            let mut body = json!({"name": key, "description": text("description"),
                "legalValues": legal, "stickiness": f.get("stickiness") == "true"});
            if let Some(order) = optional("sortOrder") {
                match order.parse::<i64>() {
                    Ok(n) => body["sortOrder"] = json!(n),
                    Err(_) => {
                        return Ok(Err(ServiceError::from(
                            crate::domain::ValidationErrors::single(
                                "sortOrder",
                                "the sort order is a whole number",
                            ),
                        )))
                    }
                }
            }
            service
                .update_context_field(actor, key, spec(body)?)
                .await
                .map(drop)
        }
        "strategies" => {
            let rows = f.rows("p", PARAMETER_ROWS);
            let parameters: Vec<Value> = (0..rows)
                .filter(|i| !f.get(&format!("p{i}.name")).is_empty())
                .map(|i| {
                    json!({"name": f.get(&format!("p{i}.name")), "type": f.get(&format!("p{i}.type")),
                        "description": f.get(&format!("p{i}.description")),
                        "required": f.get(&format!("p{i}.required")) == "true"})
                })
                .collect();
            let body =
                json!({"name": key, "description": text("description"), "parameters": parameters});
            service
                .update_strategy(actor, key, spec(body)?)
                .await
                .map(drop)
        }
        "tag-types" => {
            let body =
                json!({"name": key, "description": text("description"), "icon": text("icon")});
            service
                .update_tag_type(actor, key, spec(body)?)
                .await
                .map(drop)
        }
        other => return Err(not_found("registry", other)),
    })
}

/// `POST /ui/settings/{kind}/{key}`.
pub async fn save(
    State(state): State<AppState>,
    Path((kind, key)): Path<(String, String)>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form } = posted;
    if !editable(&kind) {
        return Err(not_found("registry", &kind));
    }
    if let Err(errors) = form.check_rows(&[("c", "constraints"), ("p", "parameters")]) {
        let typed = Some((&form, &errors));
        return render(&state, &viewer, (&kind, &key), typed, None, None);
    }
    match save_one(&state, &viewer, (&kind, &key), &form).await? {
        Ok(()) => Ok(see_other(&with_notice(&edit_path(&kind, &key), "Saved."))),
        Err(e) => {
            let main = match kind.as_str() {
                "context-fields" => "legalValues",
                "segments" | "projects" => "name",
                _ => "description",
            };
            let errors = Errors::keeping_input(e, main);
            render(
                &state,
                &viewer,
                (&kind, &key),
                Some((&form, &errors)),
                None,
                None,
            )
        }
    }
}

/// Deletes the record `key` of `kind` as the API's DELETE does.
async fn delete_one(
    state: &AppState,
    viewer: &Viewer,
    kind: &str,
    key: &str,
) -> Result<(), Problem> {
    let service = &state.service;
    let actor = &viewer.actor;
    let done = match kind {
        "segments" => service.delete_segment(actor, segment_id(key)?).await,
        "projects" => service.delete_project(actor, key).await,
        "context-fields" => service.delete_context_field(actor, key).await,
        "strategies" => service.delete_strategy(actor, key).await,
        "tag-types" => service.delete_tag_type(actor, key).await,
        other => return Err(not_found("registry", other)),
    };
    done.map_err(Problem::from)
}

/// `POST /ui/settings/{kind}/{key}/delete` (the button asks for a confirmation first).
pub async fn delete(
    State(state): State<AppState>,
    Path((kind, key)): Path<(String, String)>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    let viewer = posted.viewer;
    let shown = match kind.as_str() {
        "segments" => state
            .service
            .state()?
            .segments
            .get(&key)
            .map_or_else(|| key.clone(), |s| s.name.clone()),
        _ => key.clone(),
    };
    match delete_one(&state, &viewer, &kind, &key).await {
        Ok(()) => Ok(see_other(&format!(
            "{}#h-{kind}",
            with_notice("/ui/settings", &format!("Deleted {shown}."))
        ))),
        // In use, built in, not allowed: said on the record's page, which stays as it was.
        Err(Problem(e @ (ApiError::Conflict(_) | ApiError::Forbidden(_)))) => {
            let status = e.status();
            render(
                &state,
                &viewer,
                (&kind, &key),
                None,
                Some((status, &e.to_string())),
                None,
            )
        }
        Err(other) => Err(other),
    }
}
