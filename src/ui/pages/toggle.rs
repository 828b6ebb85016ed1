//! A toggle's page: per environment its switch and strategies (with a constraint editor for
//! every operator, segments and strategy variants), its tags, stale and archive, and its
//! history with what each event changed. Each form posts to the service the API uses.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;
use serde_json::json;

use crate::domain::config_state::ConfigState;
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::event_diff::with_diffs;
use crate::domain::feature_strategy::StrategySpec;
use crate::domain::feature_view::environments_in_order;
use crate::domain::tag::{TagRef, TagSpec};
use crate::domain::toggle::Toggle;
use crate::error::ApiError;
use crate::service::feature_environments::Target;
use crate::state::AppState;
use crate::ui::form::Errors;
use crate::ui::layout::{csrf, page, time, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};
use crate::usage::hourly::hourly_usage;
use crate::usage::views::{current_config_versions, toggle_detail, DEFAULT_STALE_AFTER_SECONDS};

use super::strategy_form::{
    strategy_body, strategy_form, strategy_row, toggle_variants, Fields, StrategyDraft,
};
use super::toggle_dependency::{dependency_section, DependencyDraft};
use super::toggle_usage::{history, hourly_chart, reach_table, usage_chart, UsageChoice};
use super::toggle_variants::variants_path;
use super::toggles::{switch, Notice};
use super::{see_other, toggle_path, with_notice};

/// How many of its events the history shows.
const HISTORY: usize = 50;

/// The project of the active toggle `name` (what the per-environment writes address it by).
pub(super) fn project_of(state: &AppState, name: &str) -> Result<String, Problem> {
    let config = state.service.state()?;
    Ok(active_toggle(&config, name)?.project.to_string())
}

/// The active toggle `name` (404 when it is archived or unknown).
pub(super) fn active_toggle(
    state: &ConfigState,
    name: &str,
) -> Result<std::sync::Arc<Toggle>, Problem> {
    state.features.get(name).cloned().ok_or_else(|| {
        Problem(ApiError::NotFound(format!(
            "There is no active toggle named “{name}” (it may be archived)."
        )))
    })
}

/// The forms of a toggle page sent back with their problems (at most one at a time).
#[derive(Default)]
pub(super) struct Drafts<'a> {
    pub strategy: Option<StrategyDraft<'a>>,
    /// The tag value typed, and its problems.
    pub tag: Option<(&'a str, &'a Errors)>,
    pub dependency: Option<DependencyDraft<'a>>,
}

impl Drafts<'_> {
    fn any(&self) -> bool {
        self.strategy.is_some() || self.tag.is_some() || self.dependency.is_some()
    }
}

/// The toggle's page; with a draft, the form that was refused shows its problems (422).
pub(super) async fn render(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    notice: Option<&str>,
    drafts: Drafts<'_>,
    usage_choice: &UsageChoice,
) -> PageResult {
    let config = state.service.state()?;
    let toggle = active_toggle(&config, name)?;
    // A form shown again after a failed save is shown without the history when the store
    // cannot be read either (what was typed matters more).
    let events = match state.service.events(HISTORY, Some(name)).await {
        Ok(events) => events,
        Err(_) if drafts.any() => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let events = with_diffs(&events);
    let usage = toggle_detail(state.usage.store(), name).await.ok();
    let hourly = hourly_usage(state.usage.store(), name, usage_choice.hours())
        .await
        .ok();
    let reach = current_config_versions(&state.usage, &state.snapshot, DEFAULT_STALE_AFTER_SECONDS)
        .await
        .ok();
    let path = toggle_path(name);
    let status = if let Some(d) = &drafts.dependency {
        d.errors.status()
    } else if drafts.any() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let environments = environments_in_order(&config);
    let no_errors = Errors::default();
    let (typed_tag, tag_errors) = drafts.tag.unwrap_or(("", &no_errors));
    let draft = drafts.strategy;
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if !toggle.description.is_empty() { p { (toggle.description) } }
        dl.facts {
            dt { "Project" } dd { (toggle.project) }
            dt { "Type" } dd { (toggle.kind) }
            dt { "Created" } dd { (time(&toggle.created_at)) }
            dt { "State" } dd { @if toggle.stale { mark { "Stale" } } @else { "Active" } }
        }
        div.actions {
            form.inline method="post" action={ (path) "/stale" } {
                (csrf(viewer))
                input type="hidden" name="stale" value=(if toggle.stale { "false" } else { "true" });
                button.secondary type="submit" { (if toggle.stale { "Mark not stale" } else { "Mark stale" }) }
            }
            form.inline method="post" action={ (path) "/archive" } {
                (csrf(viewer))
                button.contrast type="submit" data-confirm={ "Archive " (name) "? SDKs stop getting it; it can be revived from the archive." } { "Archive" }
            }
        }
        section aria-labelledby="h-envs" {
            h2 #h-envs { "Environments" }
            @for (j, env) in environments.iter().enumerate() {
                @let fe = toggle.environment(&env.name);
                @let swap = format!("env-{j}");
                article id=(swap) aria-labelledby={ "h-env-" (j) } {
                    header {
                        h3 id={ "h-env-" (j) } { (env.name) @if !env.enabled { " " small { "(environment disabled)" } } }
                        (switch(viewer, &toggle, &env.name, &path, &format!("sw-env-{j}"), &swap))
                    }
                    @if fe.strategies.is_empty() {
                        p { "No strategies: when switched on, everyone gets it (a 100% rollout is added)." }
                    } @else {
                        ol.strategies { @for s in &fe.strategies { (strategy_row(viewer, &config, &toggle, &env.name, s)) } }
                    }
                    (toggle_variants(&fe.variants))
                    p { a href=(variants_path(name, &env.name)) { "Edit variants in " (env.name) } }
                    (strategy_form(viewer, &config, &toggle, &env.name, draft.as_ref()))
                }
            }
        }
        section aria-labelledby="h-variants" {
            h2 #h-variants { "Toggle variants" }
            @let variants = &toggle.default_environment().variants;
            @if variants.is_empty() { p { "None: strategies without variants of their own hand out none." } }
            @else { (toggle_variants(variants)) }
            p { a href=(variants_path(name, DEFAULT_ENVIRONMENT)) { "Edit toggle variants" } }
        }
        (dependency_section(viewer, &config, &toggle, drafts.dependency.as_ref()))
        section aria-labelledby="h-tags" {
            h2 #h-tags { "Tags" }
            ul.tags {
                @for t in &toggle.tags {
                    li {
                        span.tag { (t.kind) ":" (t.value) } " "
                        form.inline method="post" action={ (path) "/tags/remove" } {
                            (csrf(viewer))
                            input type="hidden" name="type" value=(t.kind);
                            input type="hidden" name="value" value=(t.value);
                            button.secondary.outline type="submit" { "Remove " span.visually-hidden { "tag " (t.kind) ":" (t.value) } }
                        }
                    }
                }
            }
            form method="post" action={ (path) "/tags" } {
                (csrf(viewer))
                (tag_errors.summary())
                div.grid {
                    label for="f-tag-type" { "Tag type"
                        select id="f-tag-type" name="type" {
                            @for t in config.tag_types.keys() { option value=(t) { (t) } }
                        }
                    }
                    label for="f-tag-value" { "Tag value"
                        input type="text" id="f-tag-value" name="value" value=(typed_tag)
                            aria-invalid=[tag_errors.has("value").then_some("true")];
                    }
                }
                (tag_errors.under("f-tag-value", "value"))
                button type="submit" { "Add tag" }
            }
        }
        section aria-labelledby="h-usage" {
            h2 #h-usage { "Usage per hour" }
            @match &hourly {
                Some(hourly) => { (hourly_chart(hourly, usage_choice)) }
                None => { p { "Usage could not be read from the store just now." } }
            }
            h3 #h-usage-apps { "Per application in the last hour" }
            @match &usage {
                Some(detail) => { (usage_chart(detail)) }
                None => { p { "Usage could not be read from the store just now." } }
            }
        }
        section aria-labelledby="h-reach" {
            h2 #h-reach { "Does it reach the SDKs?" }
            @match &reach {
                Some(reach) => { (reach_table(reach)) }
                None => { p { "The instances could not be read from the store just now." } }
            }
        }
        section aria-labelledby="h-history" {
            h2 #h-history { "History" }
            (history(&events))
        }
    };
    Ok(page(status, name, Some(viewer), Section::Toggles, body))
}

/// `GET /ui/toggles/{name}`.
pub async fn page_handler(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(notice): Query<Notice>,
    Query(usage): Query<UsageChoice>,
) -> PageResult {
    render(
        &state,
        &viewer,
        &name,
        notice.notice.as_deref(),
        Drafts::default(),
        &usage,
    )
    .await
}

/// The switch's fields.
#[derive(Deserialize)]
pub struct SwitchForm {
    enabled: bool,
    #[serde(default)]
    back: String,
}

/// `POST /ui/toggles/{name}/environments/{env}`.
pub async fn switch_handler(
    State(state): State<AppState>,
    Path((name, env)): Path<(String, String)>,
    posted: Posted<SwitchForm>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = project_of(&state, &name)?;
    let target = Target {
        project: &project,
        feature: &name,
        environment: &env,
    };
    state
        .service
        .set_toggle_environment_enabled(&viewer.actor, target, form.enabled)
        .await?;
    let back = if form.back.starts_with("/ui/") {
        form.back
    } else {
        toggle_path(&name)
    };
    Ok(see_other(&back))
}

/// `POST /ui/toggles/{name}/environments/{env}/strategies`.
pub async fn add_strategy(
    State(state): State<AppState>,
    Path((name, env)): Path<(String, String)>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = project_of(&state, &name)?;
    let outcome = match strategy_body(&form) {
        Err(errors) => Err(errors),
        Ok(body) => {
            let spec: StrategySpec = serde_json::from_value(body)
                .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
            let target = Target {
                project: &project,
                feature: &name,
                environment: &env,
            };
            match state
                .service
                .add_toggle_strategy(&viewer.actor, target, spec)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => Err(Errors::of(e, "")?),
            }
        }
    };
    match outcome {
        Ok(()) => Ok(see_other(&with_notice(
            &toggle_path(&name),
            &format!("Strategy added in {env}."),
        ))),
        Err(errors) => {
            let draft = StrategyDraft {
                environment: &env,
                fields: &form,
                errors: &errors,
            };
            let drafts = Drafts {
                strategy: Some(draft),
                ..Drafts::default()
            };
            render(
                &state,
                &viewer,
                &name,
                None,
                drafts,
                &UsageChoice::default(),
            )
            .await
        }
    }
}

/// `POST /ui/toggles/{name}/environments/{env}/strategies/{id}/delete`.
pub async fn delete_strategy(
    State(state): State<AppState>,
    Path((name, env, id)): Path<(String, String, String)>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    let project = project_of(&state, &name)?;
    let target = Target {
        project: &project,
        feature: &name,
        environment: &env,
    };
    state
        .service
        .delete_toggle_strategy(&posted.viewer.actor, target, &id)
        .await?;
    Ok(see_other(&with_notice(
        &toggle_path(&name),
        &format!("Strategy deleted in {env}."),
    )))
}

/// The stale form's field.
#[derive(Deserialize)]
pub struct StaleForm {
    stale: bool,
}

/// `POST /ui/toggles/{name}/stale`.
pub async fn stale(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<StaleForm>,
) -> PageResult {
    let stale = posted.form.stale;
    state
        .service
        .set_stale(&posted.viewer.actor, &name, stale)
        .await?;
    let notice = if stale {
        "Marked stale."
    } else {
        "Marked not stale."
    };
    Ok(see_other(&with_notice(&toggle_path(&name), notice)))
}

/// `POST /ui/toggles/{name}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    state
        .service
        .archive_toggle(&posted.viewer.actor, &name)
        .await?;
    Ok(see_other(&with_notice(
        "/ui/archive",
        &format!("{name} archived."),
    )))
}

/// A tag form's fields.
#[derive(Deserialize)]
pub struct TagForm {
    #[serde(rename = "type")]
    kind: String,
    value: String,
}

/// `POST /ui/toggles/{name}/tags`.
pub async fn add_tag(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<TagForm>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let spec: TagSpec =
        serde_json::from_value(json!({"type": form.kind, "value": form.value.trim()}))
            .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
    match state
        .service
        .add_toggle_tag(&viewer.actor, &name, spec)
        .await
    {
        Ok(_) => Ok(see_other(&with_notice(&toggle_path(&name), "Tag added."))),
        Err(e) => {
            let errors = Errors::of(e, "value")?;
            let drafts = Drafts {
                tag: Some((&form.value, &errors)),
                ..Drafts::default()
            };
            render(
                &state,
                &viewer,
                &name,
                None,
                drafts,
                &UsageChoice::default(),
            )
            .await
        }
    }
}

/// `POST /ui/toggles/{name}/tags/remove`.
pub async fn remove_tag(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<TagForm>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let tag = TagRef {
        kind: form.kind.as_str().into(),
        value: form.value.as_str().into(),
    };
    state
        .service
        .remove_toggle_tag(&viewer.actor, &name, tag)
        .await?;
    Ok(see_other(&with_notice(&toggle_path(&name), "Tag removed.")))
}
