//! The registries on one page: segments, environments (switched on or off), projects, context
//! fields, strategy definitions and tag types, each listed with a form creating one and (but
//! environments) a link to each record's edit page (`settings_edit`).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::config_state::ConfigState;
use crate::domain::feature_view::environments_in_order;
use crate::error::ApiError;
use crate::service::ServiceError;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::settings_edit::{edit_path, editable};
use super::toggles::Notice;
use super::{see_other, segment, with_notice};

/// A registry: its path segment, heading, and the fields of its create form (API name, label).
struct Registry {
    kind: &'static str,
    title: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

const REGISTRIES: [Registry; 6] = [
    Registry {
        kind: "segments",
        title: "Segments",
        fields: &[
            ("name", "Segment name"),
            ("description", "Segment description"),
        ],
    },
    Registry {
        kind: "environments",
        title: "Environments",
        fields: &[("name", "Environment name"), ("type", "Environment type")],
    },
    Registry {
        kind: "projects",
        title: "Projects",
        fields: &[
            ("id", "Project id"),
            ("name", "Project name"),
            ("description", "Project description"),
        ],
    },
    Registry {
        kind: "context-fields",
        title: "Context fields",
        fields: &[
            ("name", "Context field name"),
            ("description", "Context field description"),
            ("legalValues", "Legal values (one a line, optional)"),
        ],
    },
    Registry {
        kind: "strategies",
        title: "Strategy definitions",
        fields: &[
            ("name", "Strategy name"),
            ("description", "Strategy description"),
        ],
    },
    Registry {
        kind: "tag-types",
        title: "Tag types",
        fields: &[
            ("name", "Tag type name"),
            ("description", "Tag type description"),
        ],
    },
];

/// A create form as sent: its fields by API name.
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> &str {
        self.raw(name).trim()
    }

    /// The value of `name` as typed.
    fn raw(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// The lines of the multi-line field `name`, one value each, kept as typed (a value may
    /// hold commas); blank lines are left out.
    fn lines(&self, name: &str) -> Vec<&str> {
        self.raw(name)
            .split('\n')
            .map(|line| line.strip_suffix('\r').unwrap_or(line))
            .filter(|line| !line.trim().is_empty())
            .collect()
    }
}

/// The fields of create forms typed one value a line (a value may hold commas).
const MULTI_LINE_FIELDS: [&str; 1] = ["legalValues"];

/// The rows of a registry's table: (key, name, description, extra).
fn rows(state: &ConfigState, kind: &str) -> Vec<(String, String, String, String)> {
    match kind {
        "segments" => state
            .segments
            .values()
            .map(|s| {
                (
                    s.id.to_string(),
                    s.name.clone(),
                    s.description.clone().unwrap_or_default(),
                    format!("{} constraints", s.constraints.len()),
                )
            })
            .collect(),
        "environments" => environments_in_order(state)
            .into_iter()
            .map(|e| {
                (
                    e.name.clone(),
                    e.name.clone(),
                    e.kind.clone(),
                    if e.enabled { "on".into() } else { "off".into() },
                )
            })
            .collect(),
        "projects" => {
            let mut rows = vec![(
                String::new(),
                "default".to_string(),
                "Default".to_string(),
                String::new(),
            )];
            rows.extend(
                state
                    .projects
                    .values()
                    .filter(|p| p.id != "default")
                    .map(|p| {
                        (
                            p.id.clone(),
                            p.id.clone(),
                            p.name.clone(),
                            p.description.clone(),
                        )
                    }),
            );
            rows
        }
        "context-fields" => state
            .context_fields
            .values()
            .map(|c| {
                (
                    c.name.clone(),
                    c.name.clone(),
                    c.description.clone(),
                    c.legal_values.join(", "),
                )
            })
            .collect(),
        "strategies" => state
            .strategies
            .values()
            .map(|s| {
                (
                    if s.built_in {
                        String::new()
                    } else {
                        s.name.clone()
                    },
                    s.name.clone(),
                    s.description.clone(),
                    if s.deprecated {
                        "deprecated".into()
                    } else {
                        String::new()
                    },
                )
            })
            .collect(),
        _ => state
            .tag_types
            .values()
            .map(|t| {
                (
                    t.name.clone(),
                    t.name.clone(),
                    t.description.clone(),
                    String::new(),
                )
            })
            .collect(),
    }
}

fn section(
    viewer: &Viewer,
    state: &ConfigState,
    registry: &Registry,
    draft: Option<(&str, &Fields, &Errors)>,
) -> Markup {
    let empty = Fields::default();
    let none = Errors::default();
    let (fields, errors) = match draft {
        Some((kind, fields, errors)) if kind == registry.kind => (fields, errors),
        _ => (&empty, &none),
    };
    let heading = format!("h-{}", registry.kind);
    html! {
        section aria-labelledby=(heading) {
            h2 id=(heading) { (registry.title) }
            div.table-scroll tabindex="0" role="region" aria-labelledby=(heading) {
                table {
                    tbody {
                        @for (key, name, description, extra) in rows(state, registry.kind) {
                            tr {
                                th scope="row" { (name) }
                                td { (description) }
                                td {
                                    @if registry.kind == "environments" && name != "default" {
                                        form.inline method="post" action={ "/ui/settings/environments/" (segment(&name)) } {
                                            (csrf(viewer))
                                            input type="hidden" name="enabled" value=(if extra == "on" { "false" } else { "true" });
                                            button.toggle type="submit" role="switch" aria-checked=(extra == "on")
                                                aria-label={ "Environment " (name) " enabled" } { (if extra == "on" { "On" } else { "Off" }) }
                                        }
                                    } @else { (extra) }
                                }
                                @if editable(registry.kind) {
                                    td {
                                        @if !key.is_empty() {
                                            a href=(edit_path(registry.kind, &key)) aria-label={ "Edit " (name) } { "Edit" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            details open[draft.is_some_and(|(k, _, _)| k == registry.kind)] {
                summary { "New " (registry.title.to_lowercase()) }
                form method="post" action={ "/ui/settings/" (registry.kind) } {
                    (csrf(viewer))
                    (errors.summary())
                    @for (name, label) in registry.fields {
                        @let field = format!("{}.{name}", registry.kind);
                        @if MULTI_LINE_FIELDS.contains(name) {
                            @let id = format!("f-{}", field.replace('.', "-"));
                            label for=(id) { (label) }
                            textarea id=(id) name=(field) rows="3"
                                aria-invalid=[errors.has(&field).then_some("true")]
                                aria-describedby=[errors.has(&field).then(|| format!("{id}-error"))] { (fields.raw(name)) }
                            (errors.under(&id, &field))
                        } @else {
                            (text_field(label, &field, fields.get(name), errors, None))
                        }
                    }
                    button type="submit" { "Create" }
                }
            }
        }
    }
}

fn render(
    state: &AppState,
    viewer: &Viewer,
    notice: Option<&str>,
    draft: Option<(&str, &Fields, &Errors)>,
) -> PageResult {
    let config = state.service.state()?;
    let status = if draft.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        nav aria-label="Registries" { ul { @for r in &REGISTRIES { li { a href={ "#h-" (r.kind) } { (r.title) } } } } }
        @for r in &REGISTRIES { (section(viewer, &config, r, draft)) }
    };
    Ok(page(
        status,
        "Settings",
        Some(viewer),
        Section::Settings,
        body,
    ))
}

/// `GET /ui/settings`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(notice): Query<Notice>,
) -> PageResult {
    render(&state, &viewer, notice.notice.as_deref(), None)
}

fn spec<T: DeserializeOwned>(body: Value) -> Result<T, Problem> {
    serde_json::from_value(body).map_err(|e| Problem(ApiError::bad_request("", e.to_string())))
}

/// Creates one record of `kind` from `fields`.
async fn create_one(
    state: &AppState,
    viewer: &Viewer,
    kind: &str,
    f: &Fields,
) -> Result<Result<(), ServiceError>, Problem> {
    let service = &state.service;
    let actor = &viewer.actor;
    let text = |name: &str| f.get(name).to_string();
    Ok(match kind {
        "segments" => service.create_segment(actor, spec(json!({"name": text("name"), "description": text("description"), "constraints": []}))?).await.map(drop),
        "environments" => service.create_environment(actor, spec(json!({"name": text("name"), "type": if text("type").is_empty() { "development".into() } else { text("type") }}))?).await.map(drop),
        "projects" => service.create_project(actor, spec(json!({"id": text("id"), "name": if text("name").is_empty() { text("id") } else { text("name") }, "description": text("description")}))?).await.map(drop),
        "context-fields" => {
            let legal = f.lines("legalValues");
            service.create_context_field(actor, spec(json!({"name": text("name"), "description": text("description"), "legalValues": legal}))?).await.map(drop)
        }
        "strategies" => service.create_strategy(actor, spec(json!({"name": text("name"), "description": text("description"), "parameters": []}))?).await.map(drop),
        "tag-types" => service.create_tag_type(actor, spec(json!({"name": text("name"), "description": text("description")}))?).await.map(drop),
        other => return Err(Problem(ApiError::NotFound(format!("There is no registry {other}.")))),
    })
}

/// `POST /ui/settings/{kind}`.
pub async fn create(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form } = posted;
    // The form's fields are named `<kind>.<field>` (unique ids on the page).
    let prefix = format!("{kind}.");
    let fields = Fields(
        form.0
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|k| (k.to_string(), v)))
            .collect(),
    );
    match create_one(&state, &viewer, &kind, &fields).await? {
        Ok(()) => Ok(see_other(&with_notice(
            "/ui/settings",
            &format!("Created in {kind}."),
        ))),
        Err(e) => {
            let main = if kind == "projects" { "id" } else { "name" };
            let mut errors = Errors::of(e, main)?;
            for (name, _) in REGISTRIES
                .iter()
                .find(|r| r.kind == kind)
                .map_or(&[][..], |r| r.fields)
            {
                errors.rename_prefix(name, &format!("{kind}.{name}"));
            }
            render(&state, &viewer, None, Some((&kind, &fields, &errors)))
        }
    }
}

/// The environment switch's field.
#[derive(Deserialize)]
pub struct EnabledForm {
    enabled: bool,
}

/// `POST /ui/settings/environments/{name}`.
pub async fn environment_enabled(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<EnabledForm>,
) -> PageResult {
    state
        .service
        .set_environment_enabled(&posted.viewer.actor, &name, posted.form.enabled)
        .await?;
    Ok(see_other(&with_notice(
        "/ui/settings",
        &format!(
            "Environment {name} switched {}.",
            if posted.form.enabled { "on" } else { "off" }
        ),
    )))
}
