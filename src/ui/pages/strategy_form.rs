//! The strategies of a toggle in one environment: each shown with its parameters,
//! constraints, segments and variants, and the form adding one (a constraint editor offering
//! every operator, segments, strategy variants whose weights must add up), turned into the
//! API's request body.

use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::domain::config_state::ConfigState;
use crate::domain::constraint::Operator;
use crate::domain::feature_strategy::Strategy;
use crate::domain::toggle::Toggle;
use crate::ui::form::Errors;
use crate::ui::layout::csrf;
use crate::ui::session::Viewer;

use super::{segment, toggle_path};

/// Constraint rows in the add-strategy form (blank rows are ignored).
pub const CONSTRAINT_ROWS: usize = 3;
/// Variant rows in the add-strategy form.
pub const VARIANT_ROWS: usize = 3;

/// A submitted form as its fields in order (rows of repeated fields are numbered).
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.trim())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// The add-strategy form of one environment as it was sent, with its problems.
pub struct StrategyDraft<'a> {
    pub environment: &'a str,
    pub fields: &'a Fields,
    pub errors: &'a Errors,
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

pub fn strategy_row(
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

pub fn strategy_form(
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

/// The strategy described by the add-strategy form, as the API's request body.
pub fn strategy_body(fields: &Fields) -> Result<Value, Errors> {
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
        let mut v = json!({"name": name, "stickiness": if fields.get("stickiness").is_empty() { "default" } else { fields.get("stickiness") }});
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
