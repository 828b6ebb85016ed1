//! A toggle's page: per environment its switch and strategies (with a constraint editor for
//! every operator, segments and strategy variants), its tags, stale and archive, and its
//! history with what each event changed. Each form posts to the service the API uses.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::domain::config_state::ConfigState;
use crate::domain::constraint::Operator;
use crate::domain::event_diff::with_diffs;
use crate::domain::feature_strategy::{Strategy, StrategySpec};
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
use crate::usage::views::{
    current_config_versions, toggle_detail, ConfigVersions, ToggleDetail,
    DEFAULT_STALE_AFTER_SECONDS,
};

use super::toggles::{switch, Notice};
use super::{see_other, segment, with_notice};

/// Constraint rows in the add-strategy form (blank rows are ignored).
const CONSTRAINT_ROWS: usize = 3;
/// Variant rows in the add-strategy form.
const VARIANT_ROWS: usize = 3;
/// How many of its events the history shows.
const HISTORY: usize = 50;

/// A submitted form as its fields in order (rows of repeated fields are numbered).
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.trim())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// The add-strategy form of one environment as it was sent, with its problems.
struct StrategyDraft<'a> {
    environment: &'a str,
    fields: &'a Fields,
    errors: &'a Errors,
}

fn toggle_path(name: &str) -> String {
    format!("/ui/toggles/{}", segment(name))
}

fn active(state: &ConfigState, name: &str) -> Result<std::sync::Arc<Toggle>, Problem> {
    state.features.get(name).cloned().ok_or_else(|| {
        Problem(ApiError::NotFound(format!(
            "There is no active toggle named “{name}” (it may be archived)."
        )))
    })
}

fn constraint_summary(c: &crate::domain::constraint::Constraint) -> Markup {
    let values = match (&c.values, &c.value) {
        (Some(values), _) => values.join(", "),
        (None, Some(value)) => value.to_string(),
        _ => String::new(),
    };
    html! {
        code { (c.context_name) } " "
        @if c.inverted == Some(true) { "NOT " }
        (c.operator.as_str()) " " code { (values) }
        @if c.case_insensitive == Some(true) { " (ignoring case)" }
    }
}

fn strategy_row(
    viewer: &Viewer,
    state: &ConfigState,
    toggle: &Toggle,
    environment: &str,
    strategy: &Strategy,
) -> Markup {
    let delete = format!(
        "{}/environments/{}/strategies/{}/delete",
        toggle_path(&toggle.name),
        segment(environment),
        segment(&strategy.id)
    );
    let title = strategy.title.as_deref().unwrap_or(&strategy.name);
    html! {
        li.strategy {
            strong { (title) } " "
            @if strategy.title.is_some() { small { "(" (strategy.name) ")" } }
            @if strategy.disabled { " " mark { "disabled" } }
            @if let Some(rollout) = strategy.parameters.get("rollout") {
                " " meter min="0" max="100" value=(rollout) aria-label={ "Rollout " (rollout) "%" } { (rollout) "%" }
                " " (rollout) "%"
            }
            ul {
                @for (k, v) in strategy.parameters.iter() {
                    @if k.as_str() != "rollout" { li { (k) " = " code { (v) } } }
                }
                @for c in &strategy.constraints { li { "Constraint: " (constraint_summary(c)) } }
                @for id in &strategy.segments {
                    li { "Segment: "
                        @match state.segments.get(&id.to_string()) {
                            Some(s) => { (s.name) }
                            None => { "#" (id) }
                        }
                    }
                }
                @for v in &strategy.variants {
                    li { "Variant " code { (v.name) } ": " (format!("{:.1}", f64::from(v.weight) / 10.0)) "%" }
                }
            }
            form.inline method="post" action=(delete) {
                (csrf(viewer))
                button.secondary.outline type="submit"
                    data-confirm={ "Delete the strategy “" (title) "” in " (environment) "?" } {
                    "Delete strategy " span.visually-hidden { (title) " in " (environment) }
                }
            }
        }
    }
}

fn strategy_form(
    viewer: &Viewer,
    state: &ConfigState,
    toggle: &Toggle,
    environment: &str,
    draft: Option<&StrategyDraft<'_>>,
) -> Markup {
    let empty = Fields::default();
    let no_errors = Errors::default();
    let (fields, errors, open) = match draft {
        Some(d) if d.environment == environment => (d.fields, d.errors, true),
        _ => (&empty, &no_errors, false),
    };
    let id = |name: &str| format!("s-{}-{name}", segment(environment).replace('%', "_"));
    let value_or = |name: &str, default: &'static str| -> String {
        let v = fields.get(name);
        if v.is_empty() && !open {
            default.to_string()
        } else {
            v.to_string()
        }
    };
    let action = format!(
        "{}/environments/{}/strategies",
        toggle_path(&toggle.name),
        segment(environment)
    );
    let mut contexts: Vec<String> = [
        "userId",
        "sessionId",
        "remoteAddress",
        "environment",
        "appName",
        "currentTime",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for name in state.context_fields.keys() {
        if !contexts.contains(name) {
            contexts.push(name.clone());
        }
    }
    let chosen_segments = fields.all("segment");
    html! {
        details open[open] {
            summary { "Add a strategy in " (environment) }
            form method="post" action=(action) {
                (csrf(viewer))
                (errors.summary())
                div.grid {
                    label for=(id("name")) { "Strategy"
                        select id=(id("name")) name="name" {
                            @for s in state.strategies.values() {
                                @if !s.deprecated {
                                    option value=(s.name) selected[value_or("name", "flexibleRollout") == s.name.as_str()] { (s.name) }
                                }
                            }
                        }
                    }
                    label for=(id("title")) { "Title (optional)"
                        input type="text" id=(id("title")) name="title" value=(fields.get("title"));
                    }
                }
                div.grid {
                    label for=(id("rollout")) { "Rollout (%)"
                        input type="number" min="0" max="100" id=(id("rollout")) name="rollout" value=(value_or("rollout", "100"))
                            aria-invalid=[errors.has("parameters.rollout").then_some("true")];
                    }
                    label for=(id("stickiness")) { "Stickiness"
                        input type="text" id=(id("stickiness")) name="stickiness" value=(value_or("stickiness", "default"));
                    }
                    label for=(id("group")) { "Group id"
                        input type="text" id=(id("group")) name="groupId" value=(if open { fields.get("groupId").to_string() } else { toggle.name.to_string() });
                    }
                }
                label for=(id("params")) { "Other parameters (one name=value a line)"
                    textarea id=(id("params")) name="params" rows="2" { (fields.get("params")) }
                }
                fieldset {
                    legend { "Constraints (all must hold)" }
                    @for i in 0..CONSTRAINT_ROWS {
                        @let p = format!("c{i}");
                        div.grid.constraint {
                            label for=(id(&format!("{p}-ctx"))) { "Context field " (i + 1)
                                select id=(id(&format!("{p}-ctx")) ) name={ (p) ".contextName" } {
                                    option value="" { "—" }
                                    @for c in &contexts {
                                        option value=(c) selected[fields.get(&format!("{p}.contextName")) == c] { (c) }
                                    }
                                }
                            }
                            label for=(id(&format!("{p}-op"))) { "Operator " (i + 1)
                                select id=(id(&format!("{p}-op"))) name={ (p) ".operator" } {
                                    @for op in Operator::ALL {
                                        option value=(op.as_str()) selected[fields.get(&format!("{p}.operator")) == op.as_str()] { (op.as_str()) }
                                    }
                                }
                            }
                            label for=(id(&format!("{p}-val"))) { "Values " (i + 1) " (comma-separated)"
                                input type="text" id=(id(&format!("{p}-val"))) name={ (p) ".values" }
                                    value=(fields.get(&format!("{p}.values")))
                                    aria-invalid=[errors.has(&format!("constraints[{i}]")).then_some("true")];
                            }
                            label { input type="checkbox" name={ (p) ".inverted" } value="true" checked[fields.get(&format!("{p}.inverted")) == "true"]; "Negate " (i + 1) }
                            label { input type="checkbox" name={ (p) ".caseInsensitive" } value="true" checked[fields.get(&format!("{p}.caseInsensitive")) == "true"]; "Ignore case " (i + 1) }
                        }
                        (errors.under(&id(&format!("{p}-val")), &format!("constraints[{i}]")))
                    }
                }
                @if !state.segments.is_empty() {
                    fieldset {
                        legend { "Segments" }
                        @for s in state.segments.values() {
                            label { input type="checkbox" name="segment" value=(s.id) checked[chosen_segments.contains(&s.id.to_string().as_str())]; (s.name) }
                        }
                    }
                }
                fieldset {
                    legend { "Strategy variants (weights in %, blank to share the rest; together at most 100)" }
                    @for i in 0..VARIANT_ROWS {
                        @let p = format!("v{i}");
                        div.grid {
                            label for=(id(&format!("{p}-name"))) { "Variant " (i + 1) " name"
                                input type="text" id=(id(&format!("{p}-name"))) name={ (p) ".name" } value=(fields.get(&format!("{p}.name")));
                            }
                            label for=(id(&format!("{p}-weight"))) { "Variant " (i + 1) " weight (%)"
                                input type="number" min="0" max="100" step="0.1" id=(id(&format!("{p}-weight"))) name={ (p) ".weight" }
                                    value=(fields.get(&format!("{p}.weight")))
                                    aria-invalid=[errors.has("variants").then_some("true")];
                            }
                            label for=(id(&format!("{p}-payload"))) { "Variant " (i + 1) " payload (text)"
                                input type="text" id=(id(&format!("{p}-payload"))) name={ (p) ".payload" } value=(fields.get(&format!("{p}.payload")));
                            }
                        }
                    }
                    (errors.under(&id("variants"), "variants"))
                }
                button type="submit" { "Add strategy in " (environment) }
            }
        }
    }
}

/// Yes and no per application over the last hour as bars (inline SVG, drawn in the text
/// colour of either theme), with the same numbers in a table.
fn usage_chart(detail: &ToggleDetail) -> Markup {
    let max = detail
        .applications
        .iter()
        .map(|a| a.last_hour.yes + a.last_hour.no)
        .max()
        .unwrap_or(0)
        .max(1);
    let rows = detail.applications.len().max(1);
    let height = rows * 22;
    let label = format!(
        "Evaluations in the last hour: {} yes and {} no, across {} applications",
        detail.last_hour.yes,
        detail.last_hour.no,
        detail.applications.len()
    );
    html! {
        svg.usage viewBox={ "0 0 300 " (height) } width="300" height=(height) role="img" aria-label=(label) {
            @for (i, app) in detail.applications.iter().enumerate() {
                @let y = i * 22;
                @let yes = app.last_hour.yes as f64 / max as f64 * 200.0;
                @let no = app.last_hour.no as f64 / max as f64 * 200.0;
                text x="0" y=(y + 15) font-size="12" fill="currentColor" { (app.app_name) }
                rect x="100" y=(y + 3) width=(format!("{yes:.1}")) height="16" fill="currentColor" {
                    title { (app.app_name) ": " (app.last_hour.yes) " yes" }
                }
                rect x=(format!("{:.1}", 100.0 + yes)) y=(y + 3) width=(format!("{no:.1}")) height="16"
                    fill="currentColor" fill-opacity="0.35" {
                    title { (app.app_name) ": " (app.last_hour.no) " no" }
                }
            }
        }
        table {
            caption { (label) }
            thead { tr { th scope="col" { "Application" } th scope="col" { "Yes" } th scope="col" { "No" } th scope="col" { "Last minute (yes/no)" } } }
            tbody {
                @for app in &detail.applications {
                    tr { th scope="row" { (app.app_name) } td { (app.last_hour.yes) } td { (app.last_hour.no) }
                         td { (app.last_minute.yes) " / " (app.last_minute.no) } }
                }
            }
        }
    }
}

/// Per application: how many instances hold the configuration they would be sent now.
fn reach_table(reach: &ConfigVersions) -> Markup {
    html! {
        @if reach.applications.is_empty() {
            p { "No SDK instance has registered or polled yet." }
        } @else {
            p { "Configuration version served now: " (reach.version) ". Instances not seen for "
                (reach.stale_after_seconds) " s are counted apart." }
            div.table-scroll tabindex="0" role="region" aria-labelledby="h-reach" {
                table {
                    thead { tr {
                        th scope="col" { "Application" } th scope="col" { "On the newest configuration" }
                        th scope="col" { "Behind" } th scope="col" { "Not seen recently" }
                    } }
                    tbody {
                        @for app in &reach.applications {
                            tr {
                                th scope="row" { (app.app_name) }
                                td { (app.current) " of " (app.instances) }
                                td { (app.behind) }
                                td { (app.not_seen_recently) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn history(events: &[Value]) -> Markup {
    html! {
        @if events.is_empty() { p { "No events yet." } }
        ol.history {
            @for e in events {
                li {
                    strong { (e["type"].as_str().unwrap_or("")) }
                    " by " (e["createdBy"].as_str().unwrap_or("")) " at "
                    @if let Some(at) = e["createdAt"].as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) {
                        (time(&at.with_timezone(&chrono::Utc)))
                    }
                    @match e["diffs"].as_array() {
                        Some(diffs) if !diffs.is_empty() => {
                            ul.diff {
                                @for d in diffs {
                                    @let path = d["path"].as_array().map(|p| p.iter().map(|s| match s { Value::String(s) => s.clone(), other => other.to_string() }).collect::<Vec<_>>().join(".")).unwrap_or_default();
                                    li {
                                        code { (path) } ": "
                                        @if !d["lhs"].is_null() { del { (d["lhs"].to_string()) } " " }
                                        @if !d["rhs"].is_null() { ins { (d["rhs"].to_string()) } }
                                        @if d["kind"] == "A" { " (list changed)" }
                                    }
                                }
                            }
                        }
                        _ => { details { summary { "Data" } pre { (serde_json::to_string_pretty(&e["data"]).unwrap_or_default()) } } }
                    }
                }
            }
        }
    }
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    notice: Option<&str>,
    draft: Option<StrategyDraft<'_>>,
    tag_errors: Option<(&str, &Errors)>,
) -> PageResult {
    let config = state.service.state()?;
    let toggle = active(&config, name)?;
    let events = state.service.events(HISTORY, Some(name)).await?;
    let events = with_diffs(&events);
    let usage = toggle_detail(state.usage.store(), name).await.ok();
    let reach = current_config_versions(&state.usage, &state.snapshot, DEFAULT_STALE_AFTER_SECONDS)
        .await
        .ok();
    let path = toggle_path(name);
    let status = if draft.is_some() || tag_errors.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let environments = environments_in_order(&config);
    let no_errors = Errors::default();
    let (typed_tag, tag_errors) = tag_errors.unwrap_or(("", &no_errors));
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
                    (strategy_form(viewer, &config, &toggle, &env.name, draft.as_ref()))
                }
            }
        }
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
            h2 #h-usage { "Usage in the last hour" }
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
) -> PageResult {
    render(&state, &viewer, &name, notice.notice.as_deref(), None, None).await
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
    let config = state.service.state()?;
    let project = active(&config, &name)?.project.to_string();
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

/// The strategy described by the add-strategy form, as the API's request body.
fn strategy_body(fields: &Fields) -> Result<Value, Errors> {
    let mut parameters = Map::new();
    for key in ["rollout", "stickiness", "groupId"] {
        if !fields.get(key).is_empty() {
            parameters.insert(key.into(), json!(fields.get(key)));
        }
    }
    for line in fields.get("params").lines() {
        if let Some((k, v)) = line.split_once('=') {
            parameters.insert(k.trim().into(), json!(v.trim()));
        }
    }
    let mut constraints = Vec::new();
    for i in 0..CONSTRAINT_ROWS {
        let p = format!("c{i}");
        let context = fields.get(&format!("{p}.contextName"));
        if context.is_empty() {
            continue;
        }
        let operator = fields.get(&format!("{p}.operator"));
        let raw = fields.get(&format!("{p}.values"));
        let mut c = json!({
            "contextName": context,
            "operator": operator,
            "inverted": fields.get(&format!("{p}.inverted")) == "true",
            "caseInsensitive": fields.get(&format!("{p}.caseInsensitive")) == "true",
        });
        let list = Operator::named(operator)
            .operand()
            .is_none_or(|o| o.is_list());
        if list {
            let values: Vec<&str> = raw
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect();
            c["values"] = json!(values);
        } else {
            c["value"] = json!(raw);
        }
        constraints.push(c);
    }
    let mut variants = Vec::new();
    let mut fixed_total = 0.0;
    let mut all_fixed = true;
    for i in 0..VARIANT_ROWS {
        let p = format!("v{i}");
        let name = fields.get(&format!("{p}.name"));
        if name.is_empty() {
            continue;
        }
        let mut v = json!({"name": name, "stickiness": fields.get("stickiness").is_empty().then_some("default").unwrap_or(fields.get("stickiness"))});
        let weight = fields.get(&format!("{p}.weight"));
        if weight.is_empty() {
            all_fixed = false;
            v["weightType"] = json!("variable");
        } else {
            let percent: f64 = weight.parse().map_err(|_| {
                Errors::field("variants", format!("The weight of {name} is not a number."))
            })?;
            fixed_total += percent;
            v["weightType"] = json!("fix");
            v["weight"] = json!((percent * 10.0).round());
        }
        let payload = fields.get(&format!("{p}.payload"));
        if !payload.is_empty() {
            v["payload"] = json!({"type": "string", "value": payload});
        }
        variants.push(v);
    }
    if !variants.is_empty() {
        if all_fixed && (fixed_total - 100.0).abs() > 0.05 {
            return Err(Errors::field(
                "variants",
                format!("The weights add up to {fixed_total}%; they must add up to 100% (or leave one blank to take the rest)."),
            ));
        }
        if fixed_total > 100.0 {
            return Err(Errors::field(
                "variants",
                format!("The weights add up to {fixed_total}%, more than 100%."),
            ));
        }
        if all_fixed {
            // The domain wants a variable variant: the last one takes what is left.
            if let Some(last) = variants.last_mut() {
                last["weightType"] = json!("variable");
            }
        }
    }
    let segments: Vec<Value> = fields
        .all("segment")
        .iter()
        .filter_map(|s| s.parse::<u32>().ok())
        .map(|s| json!(s))
        .collect();
    let mut body = json!({
        "name": fields.get("name"),
        "parameters": parameters,
        "constraints": constraints,
        "segments": segments,
        "variants": variants,
    });
    if !fields.get("title").is_empty() {
        body["title"] = json!(fields.get("title"));
    }
    Ok(body)
}

/// `POST /ui/toggles/{name}/environments/{env}/strategies`.
pub async fn add_strategy(
    State(state): State<AppState>,
    Path((name, env)): Path<(String, String)>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let config = state.service.state()?;
    let project = active(&config, &name)?.project.to_string();
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
            render(&state, &viewer, &name, None, Some(draft), None).await
        }
    }
}

/// `POST /ui/toggles/{name}/environments/{env}/strategies/{id}/delete`.
pub async fn delete_strategy(
    State(state): State<AppState>,
    Path((name, env, id)): Path<(String, String, String)>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    let config = state.service.state()?;
    let project = active(&config, &name)?.project.to_string();
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
            render(
                &state,
                &viewer,
                &name,
                None,
                None,
                Some((&form.value, &errors)),
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
