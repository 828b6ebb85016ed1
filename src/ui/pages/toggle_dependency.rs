//! A toggle's dependency on a parent toggle, on the toggle's page: the parent it has (with a
//! button removing it), the toggles depending on it, and the form setting a parent (replacing
//! the one it had) — posted to the service the dependency API uses, whose rules and messages
//! are shown next to the fields.

use axum::extract::{Path, State};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;

use crate::domain::config_state::ConfigState;
use crate::domain::dependency::{children_of, parent_variant_names, DependencySpec};
use crate::domain::toggle::Toggle;
use crate::error::ApiError;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::csrf;
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::toggle::{project_of, render, Drafts};
use super::{see_other, toggle_path, with_notice};

/// How many possible parents the name field suggests (a project may hold thousands).
const SUGGESTED_PARENTS: usize = 200;

/// The dependency form's fields.
#[derive(Deserialize, Default)]
pub struct DependencyForm {
    #[serde(default)]
    feature: String,
    /// `"true"` (the parent must be on) or `"false"` (off).
    #[serde(default)]
    enabled: String,
    /// Variant names, comma-separated.
    #[serde(default)]
    variants: String,
}

/// The dependency form as it was sent, with its problems.
pub struct DependencyDraft<'a> {
    pub form: &'a DependencyForm,
    pub errors: &'a Errors,
}

/// The section of the toggle page about dependencies.
pub fn dependency_section(
    viewer: &Viewer,
    state: &ConfigState,
    toggle: &Toggle,
    draft: Option<&DependencyDraft<'_>>,
) -> Markup {
    let path = toggle_path(&toggle.name);
    let empty = DependencyForm::default();
    let no_errors = Errors::default();
    let (form, errors) = draft.map_or((&empty, &no_errors), |d| (d.form, d.errors));
    let children: Vec<&str> = children_of(state, &toggle.name)
        .map(|t| t.name.as_str())
        .collect();
    let suggestions: Vec<&str> = state
        .features
        .values()
        .filter(|t| {
            t.project == toggle.project && t.name != toggle.name && t.dependencies.is_empty()
        })
        .take(SUGGESTED_PARENTS)
        .map(|t| t.name.as_str())
        .collect();
    let parent_must_be_off = form.enabled == "false";
    html! {
        section aria-labelledby="h-deps" {
            h2 #h-deps { "Dependencies" }
            @if toggle.dependencies.is_empty() {
                p { "No parent: this toggle does not depend on another." }
            }
            ul.dependencies {
                @for d in &toggle.dependencies {
                    li {
                        "Depends on " a href=(toggle_path(&d.feature)) { (d.feature) }
                        ": on only while it is " strong { (if d.enabled { "on" } else { "off" }) }
                        @if !d.variants.is_empty() {
                            " with the variant " code { (d.variants.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")) }
                        }
                        " "
                        form.inline method="post" action={ (path) "/dependency/remove" } {
                            (csrf(viewer))
                            input type="hidden" name="parent" value=(d.feature);
                            button.secondary.outline type="submit"
                                data-confirm={ "Remove the dependency on " (d.feature) "?" } {
                                "Remove dependency " span.visually-hidden { "on " (d.feature) }
                            }
                        }
                    }
                }
            }
            @if !children.is_empty() {
                p { "Toggles depending on this one: "
                    @for (i, c) in children.iter().enumerate() {
                        @if i > 0 { ", " }
                        a href=(toggle_path(c)) { (c) }
                    }
                }
            }
            details open[draft.is_some()] {
                summary { @if toggle.dependencies.is_empty() { "Set a parent" } @else { "Replace the parent" } }
                form method="post" action={ (path) "/dependency" } {
                    (csrf(viewer))
                    (errors.summary())
                    label for="f-dep-feature" { "Parent toggle" }
                    input type="text" id="f-dep-feature" name="feature" value=(form.feature)
                        list="dep-parents" autocomplete="off"
                        aria-invalid=[errors.has("feature").then_some("true")]
                        aria-describedby=(if errors.has("feature") { "f-dep-feature-error" } else { "f-dep-feature-help" });
                    @if !errors.has("feature") {
                        small id="f-dep-feature-help" { "An active toggle of project " (toggle.project) " that has no parent of its own." }
                    }
                    (errors.under("f-dep-feature", "feature"))
                    datalist #dep-parents { @for s in &suggestions { option value=(s) {} } }
                    fieldset {
                        legend { "This toggle is on only while the parent is" }
                        label { input type="radio" name="enabled" value="true" checked[!parent_must_be_off]; "On" }
                        label { input type="radio" name="enabled" value="false" checked[parent_must_be_off]; "Off" }
                    }
                    (text_field("Parent's variants (optional, comma-separated; only when it must be on)", "variants", &form.variants, errors,
                        Some(&parent_variant_help(state, toggle))))
                    button type="submit" { "Set parent" }
                }
            }
        }
    }
}

/// Which variant names the current parent offers, as help under the variants field.
fn parent_variant_help(state: &ConfigState, toggle: &Toggle) -> String {
    let offered = toggle
        .dependencies
        .first()
        .and_then(|d| state.features.get(d.feature.as_str()))
        .map(|parent| (parent.name.to_string(), parent_variant_names(parent)));
    match offered {
        Some((parent, names)) if !names.is_empty() => {
            format!("{parent} has the variants {}.", names.join(", "))
        }
        _ => "Any variant of the parent when blank.".to_string(),
    }
}

/// `POST /ui/toggles/{name}/dependency`: sets the parent (replacing the one it had).
pub async fn set(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<DependencyForm>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = project_of(&state, &name)?;
    let variants: Vec<&str> = form
        .variants
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    let mut body = json!({"feature": form.feature.trim(), "enabled": form.enabled != "false"});
    if !variants.is_empty() {
        body["variants"] = json!(variants);
    }
    let spec: DependencySpec = serde_json::from_value(body)
        .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
    match state
        .service
        .add_dependency(&viewer.actor, &project, &name, spec)
        .await
    {
        Ok(()) => Ok(see_other(&with_notice(
            &toggle_path(&name),
            &format!("{name} now depends on {}.", form.feature.trim()),
        ))),
        Err(e) => {
            let errors = Errors::keeping_input(e, "feature");
            let draft = DependencyDraft {
                form: &form,
                errors: &errors,
            };
            let drafts = Drafts {
                dependency: Some(draft),
                ..Drafts::default()
            };
            render(&state, &viewer, &name, None, drafts, &Default::default()).await
        }
    }
}

/// The remove form's field.
#[derive(Deserialize)]
pub struct RemoveForm {
    parent: String,
}

/// `POST /ui/toggles/{name}/dependency/remove`.
pub async fn remove(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<RemoveForm>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = project_of(&state, &name)?;
    state
        .service
        .remove_dependency(&viewer.actor, &project, &name, &form.parent)
        .await?;
    Ok(see_other(&with_notice(
        &toggle_path(&name),
        &format!("The dependency on {} was removed.", form.parent),
    )))
}
