//! The strategies of a toggle in one environment: each shown with its parameters,
//! constraints, segments and variants, and the form adding one (a constraint editor offering
//! every operator, segments, strategy variants whose weights must add up), turned into the
//! API's request body.

use maud::{html, Markup};
use serde_json::{json, Map, Value};

use crate::domain::config_state::ConfigState;
use crate::domain::feature_strategy::Strategy;
use crate::domain::toggle::Toggle;
use crate::domain::variant::{Variant, WeightType};
use crate::ui::form::Errors;
use crate::ui::layout::csrf;
use crate::ui::session::Viewer;

pub use super::constraint_form::Fields;
use super::constraint_form::{constraint_fieldset, constraints_body};
use super::{segment, toggle_path};

/// Variant rows in the add-strategy form.
pub const VARIANT_ROWS: usize = 3;

impl Fields {
    /// The form's fields describing `strategy`, to edit it in place (a blank row of each kind
    /// is left for adding one).
    pub fn of_strategy(strategy: &Strategy) -> Self {
        let mut fields = Self::default();
        fields.push("name", strategy.name.as_str());
        if let Some(title) = &strategy.title {
            fields.push("title", title.as_str());
        }
        if strategy.disabled {
            fields.push("disabled", "true");
        }
        let mut params = Vec::new();
        for (k, v) in strategy.parameters.iter() {
            match k.as_str() {
                "rollout" | "stickiness" | "groupId" => fields.push(k.as_str(), v.to_string()),
                _ => params.push(format!("{k}={v}")),
            }
        }
        fields.push("params", params.join("\n"));
        fields.push_constraints(&strategy.constraints);
        for id in &strategy.segments {
            fields.push("segment", id.to_string());
        }
        for (i, v) in strategy.variants.iter().enumerate() {
            let p = format!("v{i}");
            fields.push(format!("{p}.name"), v.name.as_str());
            if v.weight_type != Some(WeightType::Variable) {
                fields.push(
                    format!("{p}.weight"),
                    (f64::from(v.weight) / 10.0).to_string(),
                );
            }
            if let Some(stickiness) = &v.stickiness {
                fields.push(format!("{p}.stickiness"), stickiness.as_str());
            }
            if let Some(payload) = &v.payload {
                fields.push(format!("{p}.payloadType"), payload.kind.as_str());
                fields.push(format!("{p}.payload"), payload.value.as_str());
            }
        }
        fields
    }
}

/// A toggle's variants in one environment, read only (`default`'s are edited on their own
/// page, `toggle_variants`; see docs/ui.md).
pub fn toggle_variants(variants: &[Variant]) -> Markup {
    html! {
        @if !variants.is_empty() {
            p { "Toggle variants (for strategies without variants of their own):" }
            ul.variants {
                @for v in variants {
                    li {
                        code { (v.name) } ": " (format!("{:.1}", f64::from(v.weight) / 10.0)) "%"
                        @if v.weight_type == WeightType::Fix { " (fixed)" }
                        ", stickiness " (v.stickiness)
                        @if let Some(p) = &v.payload { ", payload (" (p.kind) ") " code { (p.value) } }
                        @for o in &v.overrides {
                            ", when " code { (o.context_name) } " is "
                            (o.values.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", "))
                        }
                    }
                }
            }
        }
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
    let edit = format!(
        "{}/environments/{}/strategies/{}",
        toggle_path(&toggle.name),
        segment(environment),
        segment(&strategy.id)
    );
    let delete = format!("{edit}/delete");
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
            a href=(edit) {
                "Edit strategy " span.visually-hidden { (title) " in " (environment) }
            }
            " "
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

/// The add-strategy form of one environment (open, with what was typed and its problems,
/// when `draft` is about this environment).
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
    let action = format!(
        "{}/environments/{}/strategies",
        toggle_path(&toggle.name),
        segment(environment)
    );
    html! {
        details open[open] {
            summary { "Add a strategy in " (environment) }
            form method="post" action=(action) {
                (csrf(viewer))
                (strategy_inputs(state, toggle, environment, fields, errors, open))
                button type="submit" { "Add strategy in " (environment) }
            }
        }
    }
}

/// The form editing the strategy `id` in place: the add form's fields, filled with what the
/// strategy holds (or with what was typed, when a save was refused).
pub fn strategy_edit_form(
    viewer: &Viewer,
    state: &ConfigState,
    toggle: &Toggle,
    environment: &str,
    id: &str,
    fields: &Fields,
    errors: &Errors,
) -> Markup {
    let action = format!(
        "{}/environments/{}/strategies/{}",
        toggle_path(&toggle.name),
        segment(environment),
        segment(id)
    );
    html! {
        form method="post" action=(action) {
            (csrf(viewer))
            (strategy_inputs(state, toggle, environment, fields, errors, true))
            button type="submit" { "Save strategy" }
        }
    }
}

/// The fields of a strategy form. `filled`: the fields are what a person typed or what a
/// strategy holds (blank means blank); otherwise they start from the defaults.
fn strategy_inputs(
    state: &ConfigState,
    toggle: &Toggle,
    environment: &str,
    fields: &Fields,
    errors: &Errors,
    filled: bool,
) -> Markup {
    let id = |name: &str| format!("s-{}-{name}", segment(environment).replace('%', "_"));
    let value_or = |name: &str, default: &'static str| -> String {
        let v = fields.get(name);
        if v.is_empty() && !filled {
            default.to_string()
        } else {
            v.to_string()
        }
    };
    // A row past the ones filled, for adding one.
    let variant_rows = fields.shown_rows("v", "name", VARIANT_ROWS);
    let chosen_segments = fields.all("segment");
    html! {
        (errors.summary())
        div.grid {
            label for=(id("name")) { "Strategy"
                select id=(id("name")) name="name" {
                    @for s in state.strategies.values() {
                        @if !s.deprecated || fields.get("name") == s.name.as_str() {
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
                input type="text" id=(id("group")) name="groupId" value=(if filled { fields.get("groupId").to_string() } else { toggle.name.to_string() });
            }
        }
        (errors.under(&id("rollout"), "parameters"))
        label for=(id("params")) { "Other parameters (one name=value a line)"
            textarea id=(id("params")) name="params" rows="2" { (fields.get("params")) }
        }
        label { input type="checkbox" name="disabled" value="true" checked[fields.get("disabled") == "true"]; "Disabled (kept, but not sent to SDKs)" }
        (constraint_fieldset(state, fields, errors, &id("c"), "Constraints (all must hold)"))
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
            @for i in 0..variant_rows {
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
                    label for=(id(&format!("{p}-stickiness"))) { "Variant " (i + 1) " stickiness (blank: the strategy's)"
                        input type="text" id=(id(&format!("{p}-stickiness"))) name={ (p) ".stickiness" } value=(fields.get(&format!("{p}.stickiness")));
                    }
                    (payload_type_select(&id(&format!("{p}-ptype")), &format!("{p}.payloadType"), &format!("Variant {} payload type", i + 1), fields.get(&format!("{p}.payloadType"))))
                    label for=(id(&format!("{p}-payload"))) { "Variant " (i + 1) " payload"
                        input type="text" id=(id(&format!("{p}-payload"))) name={ (p) ".payload" } value=(fields.get(&format!("{p}.payload")));
                    }
                }
            }
            (errors.under(&id("variants"), "variants"))
        }
    }
}

/// The payload types the API accepts for a variant.
pub const PAYLOAD_TYPES: [&str; 4] = ["string", "json", "csv", "number"];

/// A labelled choice of a payload type (`string` unless `chosen` names another; a stored
/// type the list does not have is offered, chosen, so that saving keeps it).
pub fn payload_type_select(id: &str, name: &str, label: &str, chosen: &str) -> Markup {
    html! {
        label for=(id) { (label)
            select id=(id) name=(name) {
                @for t in PAYLOAD_TYPES {
                    option value=(t) selected[chosen == t] { (t) }
                }
                @if !chosen.is_empty() && !PAYLOAD_TYPES.contains(&chosen) {
                    option value=(chosen) selected { (chosen) }
                }
            }
        }
    }
}

/// The strategy described by the add-strategy form, as the API's request body.
pub fn strategy_body(fields: &Fields) -> Result<Value, Errors> {
    fields.check_rows(&[("c", "constraints"), ("v", "variants")])?;
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
    let constraints = constraints_body(fields);
    let mut variants = Vec::new();
    let mut fixed_total = 0.0;
    let mut all_fixed = true;
    for i in 0..fields.rows("v", VARIANT_ROWS) {
        let p = format!("v{i}");
        let name = fields.get(&format!("{p}.name"));
        if name.is_empty() {
            continue;
        }
        // A variant's own stickiness, else the strategy's, else `default`.
        let stickiness = [
            fields.get(&format!("{p}.stickiness")),
            fields.get("stickiness"),
        ]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or("default");
        let mut v = json!({"name": name, "stickiness": stickiness});
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
            let kind = match fields.get(&format!("{p}.payloadType")) {
                "" => "string",
                kind => kind,
            };
            v["payload"] = json!({"type": kind, "value": payload});
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
    if fields.get("disabled") == "true" {
        body["disabled"] = json!(true);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(value: Value) -> Strategy {
        serde_json::from_value(value).expect("a stored strategy")
    }

    #[test]
    fn an_unchanged_edit_form_describes_the_same_strategy() {
        let held = strategy(json!({
            "id": "s1", "name": "flexibleRollout", "title": "Beta", "disabled": true,
            "parameters": {"rollout": "25", "stickiness": "default", "groupId": "g", "extra": "x"},
            "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["a", "b"], "inverted": true},
                {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2026-01-01T00:00:00Z"},
                {"contextName": "appName", "operator": "IN", "values": ["w"]},
                {"contextName": "appName", "operator": "STR_CONTAINS", "values": ["q"], "caseInsensitive": true},
                {"contextName": "customer", "operator": "IN", "values": ["Smith, John", " padded ", "x,y"]}
            ],
            "segments": [3],
            "variants": [
                {"name": "red", "weight": 400, "weightType": "fix", "stickiness": "userId",
                 "payload": {"type": "json", "value": "{}"}},
                {"name": "black", "weight": 600, "weightType": "variable", "stickiness": "default",
                 "payload": {"type": "semver", "value": "1.2.3"}}
            ]
        }));
        let fields = Fields::of_strategy(&held);
        // The form as a browser sends it back: every control's chosen option, every textarea
        // as shown. An unknown context name or payload type must be offered and chosen.
        let state = ConfigState::default();
        let empty = Errors::default();
        let toggle: Toggle = serde_json::from_value(json!({"name": "t", "type": "release", "project": "default", "stale": false, "createdAt": "2026-01-01T00:00:00Z"})).expect("a toggle");
        let html =
            strategy_inputs(&state, &toggle, "production", &fields, &empty, true).into_string();
        assert!(
            html.contains(r#"<option value="customer" selected>customer</option>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<option value="semver" selected>semver</option>"#),
            "{html}"
        );
        assert!(
            html.contains("Smith, John\n padded \nx,y</textarea>"),
            "{html}"
        );
        assert!(
            html.contains(r#"name="v0.stickiness" value="userId""#),
            "{html}"
        );
        let body = strategy_body(&fields).unwrap_or_else(|_| panic!("valid"));
        assert_eq!(body["title"], "Beta");
        assert_eq!(body["disabled"], true);
        assert_eq!(
            body["parameters"],
            json!({"rollout": "25", "stickiness": "default", "groupId": "g", "extra": "x"})
        );
        let constraints = body["constraints"].as_array().expect("constraints");
        assert_eq!(
            constraints.len(),
            5,
            "more constraints than the form's minimum rows"
        );
        assert_eq!(constraints[4]["contextName"], "customer");
        assert_eq!(
            constraints[4]["values"],
            json!(["Smith, John", " padded ", "x,y"]),
            "values are kept as they are, commas and spaces too"
        );
        assert_eq!(constraints[0]["values"], json!(["a", "b"]));
        assert_eq!(constraints[0]["inverted"], true);
        assert_eq!(constraints[1]["value"], "2026-01-01T00:00:00Z");
        assert_eq!(constraints[3]["caseInsensitive"], true);
        assert_eq!(body["segments"], json!([3]));
        let variants = body["variants"].as_array().expect("variants");
        assert_eq!(variants[0]["name"], "red");
        assert_eq!(variants[0]["weight"], json!(400.0));
        assert_eq!(
            variants[0]["payload"],
            json!({"type": "json", "value": "{}"})
        );
        assert_eq!(variants[1]["weightType"], "variable");
        assert_eq!(
            variants[0]["stickiness"], "userId",
            "a variant's own stickiness"
        );
        assert_eq!(variants[1]["stickiness"], "default");
        assert_eq!(
            variants[1]["payload"],
            json!({"type": "semver", "value": "1.2.3"})
        );
    }

    #[test]
    fn rows_reach_past_the_highest_row_sent() {
        let fields: Fields = serde_json::from_value(json!([
            ["c0.contextName", "userId"],
            ["c4.values", "x"],
            ["v1.name", "a"],
            ["cx.y", "z"]
        ]))
        .expect("fields");
        assert_eq!(fields.rows("c", 3), 5);
        assert_eq!(fields.rows("v", 3), 3);
        assert_eq!(Fields::default().rows("c", 3), 3);
    }

    #[test]
    fn a_huge_row_number_is_refused_without_looping_over_the_rows() {
        use super::super::constraint_form::MAX_ROWS;
        for name in [
            "c4000000000.values",
            "v4000000000.name",
            "c99999999999999999999999.x",
        ] {
            let fields: Fields =
                serde_json::from_value(json!([["name", "default"], [name, "x"]])).expect("fields");
            assert_eq!(fields.rows("c", 3).max(fields.rows("v", 3)), MAX_ROWS);
            assert!(fields.shown_rows("c", "contextName", 3) <= MAX_ROWS);
            let Err(errors) = strategy_body(&fields) else {
                panic!("refused")
            };
            assert!(!errors.is_empty());
        }
        let within: Fields =
            serde_json::from_value(json!([["c299.contextName", "userId"]])).expect("fields");
        assert!(within.check_rows(&[("c", "constraints")]).is_ok());
        assert_eq!(within.rows("c", 3), 300);
    }
}
