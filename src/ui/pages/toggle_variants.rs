//! Editing a toggle's variants in one environment (`default`'s, which the 3.x toggle `PUT`
//! carries, unless `?environment=` names another): a page of its own with one row per variant
//! and a blank one to add another, saved through the service that `PUT`'s variants go through
//! (for another environment, the one of Unleash 7's `PUT …/environments/:env/variants`).
//! Weights are typed in percent; variable variants share what the fixed ones leave, as
//! Unleash's UI shares them. A refused save shows the API's messages next to the rows and
//! keeps what was typed.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::{html, Markup};
use serde_json::{json, Value};

use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::variant::{Variant, VariantSpec, WeightType, WEIGHT_TOTAL};
use crate::error::ApiError;
use crate::service::feature_environments::Target;
use crate::state::AppState;
use crate::ui::form::Errors;
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::strategy_form::{Fields, PAYLOAD_TYPES};
use super::toggle::active_toggle;
use super::{see_other, toggle_path, with_notice};

/// Rows the form has at least (one blank row past the filled ones is always shown).
const MIN_ROWS: usize = 1;

/// The path of a toggle's variants page in `environment` (and of its form's target).
pub fn variants_path(name: &str, environment: &str) -> String {
    if environment == DEFAULT_ENVIRONMENT {
        return format!("{}/variants", toggle_path(name));
    }
    let encoded: String = url::form_urlencoded::byte_serialize(environment.as_bytes()).collect();
    format!("{}/variants?environment={encoded}", toggle_path(name))
}

/// The environment a variants page is about (`default` when not named).
#[derive(Debug, serde::Deserialize)]
pub struct VariantsOf {
    environment: Option<String>,
}

impl VariantsOf {
    fn environment(&self) -> &str {
        self.environment.as_deref().unwrap_or(DEFAULT_ENVIRONMENT)
    }
}

impl Fields {
    /// The form's fields describing `variants` (overrides one `context: value` a line).
    pub fn of_toggle_variants(variants: &[Variant]) -> Self {
        let mut fields = Self::default();
        for (i, v) in variants.iter().enumerate() {
            let p = format!("tv{i}");
            fields.push(format!("{p}.name"), v.name.as_str());
            let fixed = v.weight_type == WeightType::Fix;
            fields.push(
                format!("{p}.weightType"),
                if fixed { "fix" } else { "variable" },
            );
            if fixed {
                fields.push(
                    format!("{p}.weight"),
                    (f64::from(v.weight) / 10.0).to_string(),
                );
            }
            fields.push(format!("{p}.stickiness"), v.stickiness.as_str());
            if let Some(payload) = &v.payload {
                fields.push(format!("{p}.payloadType"), payload.kind.as_str());
                fields.push(format!("{p}.payload"), payload.value.as_str());
            }
            let overrides: Vec<String> = v
                .overrides
                .iter()
                .flat_map(|o| {
                    o.values
                        .iter()
                        .map(move |value| format!("{}: {value}", o.context_name))
                })
                .collect();
            fields.push(format!("{p}.overrides"), overrides.join("\n"));
        }
        fields
    }
}

/// The overrides typed as `context: value` lines, grouped by context field in the order each
/// first appears (a value keeps its commas, further colons and spaces).
fn overrides_of(lines: &[&str]) -> Result<Vec<Value>, String> {
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        let Some((context, value)) = line.split_once(':') else {
            return Err(format!(
                "“{line}” is not “context field: value” (one value a line)."
            ));
        };
        // The page writes `context: value`: the one space after the colon is its own, the rest
        // of the value is kept as stored (an override may match a value with spaces).
        let (context, value) = (context.trim(), value.strip_prefix(' ').unwrap_or(value));
        match grouped.iter_mut().find(|(c, _)| c == context) {
            Some((_, values)) => values.push(value.to_string()),
            None => grouped.push((context.to_string(), vec![value.to_string()])),
        }
    }
    Ok(grouped
        .into_iter()
        .map(|(context, values)| json!({"contextName": context, "values": values}))
        .collect())
}

/// The variants the form describes, as the API's variant documents (with the row each came
/// from), weights shared as Unleash's UI shares them: fixed variants keep theirs (in all at
/// most 100%), variable ones split the rest evenly, the remainder one each in order.
fn variants_body(
    fields: &Fields,
    shares_weights_as_is: bool,
) -> Result<Vec<(usize, Value)>, Errors> {
    fields.check_rows(&[("tv", "variants")])?;
    let mut rows = Vec::new();
    let mut fixed_total: u32 = 0;
    for i in 0..fields.rows("tv", MIN_ROWS) {
        let p = format!("tv{i}");
        let name = fields.get(&format!("{p}.name"));
        if name.is_empty() || fields.get(&format!("{p}.remove")) == "true" {
            continue;
        }
        let stickiness = match fields.get(&format!("{p}.stickiness")) {
            "" => "default",
            s => s,
        };
        let mut v = json!({"name": name, "stickiness": stickiness, "weightType": "variable"});
        if fields.get(&format!("{p}.weightType")) == "fix" {
            let typed = fields.get(&format!("{p}.weight"));
            let percent: f64 = typed.parse().map_err(|_| {
                Errors::field(
                    &format!("{p}.weight"),
                    format!("A fixed weight is a percentage from 0 to 100, not “{typed}”."),
                )
            })?;
            let weight = (percent * 10.0).round();
            v["weightType"] = json!("fix");
            v["weight"] = json!(weight);
            // A weight out of range counts too (the sum names it); the API refuses it anyway.
            fixed_total = fixed_total.saturating_add(weight.max(0.0) as u32);
        }
        // Browsers send a textarea's line breaks as CRLF; the payload keeps plain LF.
        let payload = fields.raw(&format!("{p}.payload")).replace("\r\n", "\n");
        let kind = fields.get(&format!("{p}.payloadType"));
        if !kind.is_empty() {
            v["payload"] = json!({"type": kind, "value": payload});
        } else if !payload.trim().is_empty() {
            // A payload typed without a type is not silently dropped.
            return Err(Errors::field(
                &format!("{p}.payloadType"),
                "Choose the payload's type (or leave the payload empty).",
            ));
        }
        let overrides = overrides_of(&fields.lines(&format!("{p}.overrides")))
            .map_err(|m| Errors::field(&format!("{p}.overrides"), m))?;
        v["overrides"] = json!(overrides);
        rows.push((i, v));
    }
    if fixed_total > WEIGHT_TOTAL {
        return Err(Errors::field(
            "variants",
            format!(
                "The fixed weights add up to {}%, more than 100%.",
                f64::from(fixed_total) / 10.0
            ),
        ));
    }
    let variable = rows
        .iter()
        .filter(|(_, v)| v["weightType"] == "variable")
        .count() as u32;
    // Outside `default` the weights are shared out as Unleash 7 saves them, which needs a
    // variable variant: say so here, as the API would.
    if variable == 0 && !rows.is_empty() && !shares_weights_as_is {
        return Err(Errors::field(
            "variants",
            "There must be at least one variable variant in this environment.".to_string(),
        ));
    }
    if variable == 0 && !rows.is_empty() && fixed_total != WEIGHT_TOTAL {
        return Err(Errors::field(
            "variants",
            format!(
                "The fixed weights add up to {}%; with no variable variant to take the rest they must add up to 100%.",
                f64::from(fixed_total) / 10.0
            ),
        ));
    }
    let left = WEIGHT_TOTAL - fixed_total;
    if let (Some(share), Some(mut remainder)) =
        (left.checked_div(variable), left.checked_rem(variable))
    {
        for (_, v) in rows
            .iter_mut()
            .filter(|(_, v)| v["weightType"] == "variable")
        {
            v["weight"] = json!(share + u32::from(remainder > 0));
            remainder = remainder.saturating_sub(1);
        }
    }
    Ok(rows)
}

/// One labelled input of row `i`.
fn row_input(i: usize, key: &str, label: &str, fields: &Fields, errors: &Errors) -> Markup {
    let name = format!("tv{i}.{key}");
    let id = format!("tv{i}-{key}");
    let invalid = errors.has(&name);
    html! {
        label for=(id) { "Variant " (i + 1) " " (label)
            input type="text" id=(id) name=(name) value=(fields.get(&name))
                aria-invalid=[invalid.then_some("true")]
                aria-describedby=[invalid.then(|| format!("{id}-error"))];
        }
        (errors.under(&id, &name))
    }
}

/// A labelled `<select>` of row `i` keeping what was chosen (a value the list lacks is
/// offered, chosen, so saving keeps it).
fn row_select(
    i: usize,
    key: &str,
    label: &str,
    options: &[(&str, &str)],
    fields: &Fields,
    errors: &Errors,
) -> Markup {
    let name = format!("tv{i}.{key}");
    let id = format!("tv{i}-{key}");
    let chosen = fields.get(&name);
    let known = options.iter().any(|(value, _)| *value == chosen);
    html! {
        label for=(id) { "Variant " (i + 1) " " (label)
            select id=(id) name=(name) aria-invalid=[errors.has(&name).then_some("true")] {
                @for (value, text) in options {
                    option value=(value) selected[*value == chosen] { (text) }
                }
                @if !known { option value=(chosen) selected { (chosen) } }
            }
        }
        (errors.under(&id, &name))
    }
}

/// The form: a fieldset per variant row, each with its problems.
fn variants_form(
    viewer: &Viewer,
    name: &str,
    environment: &str,
    fields: &Fields,
    errors: &Errors,
) -> Markup {
    let rows = fields.shown_rows("tv", "name", MIN_ROWS);
    let mut payload_types = vec![("", "none")];
    payload_types.extend(PAYLOAD_TYPES.iter().map(|t| (*t, *t)));
    html! {
        form method="post" action=(variants_path(name, environment)) {
            (csrf(viewer))
            (errors.summary())
            (errors.under("variants", "variants"))
            @for i in 0..rows {
                @let p = format!("tv{i}");
                fieldset {
                    legend { "Variant " (i + 1) @if fields.get(&format!("{p}.name")).is_empty() { " (new)" } }
                    div.grid {
                        (row_input(i, "name", "name", fields, errors))
                        (row_select(i, "weightType", "weight type", &[("variable", "variable (shares the rest)"), ("fix", "fixed")], fields, errors))
                        (row_input(i, "weight", "fixed weight (%)", fields, errors))
                        (row_input(i, "stickiness", "stickiness", fields, errors))
                    }
                    @let payload = format!("{p}.payload");
                    @let overrides = format!("{p}.overrides");
                    div.grid {
                        (row_select(i, "payloadType", "payload type", &payload_types, fields, errors))
                        label for={ (p) "-payload" } { "Variant " (i + 1) " payload value"
                            textarea id={ (p) "-payload" } name=(payload) rows="2"
                                aria-invalid=[errors.has(&payload).then_some("true")] { (fields.raw(&payload)) }
                        }
                        label for={ (p) "-overrides" } { "Variant " (i + 1) " overrides (one “context field: value” a line)"
                            textarea id={ (p) "-overrides" } name=(overrides) rows="2"
                                aria-invalid=[errors.has(&overrides).then_some("true")] { (fields.raw(&overrides)) }
                        }
                    }
                    (errors.under(&format!("{p}-payload"), &payload))
                    (errors.under(&format!("{p}-overrides"), &overrides))
                    @if !fields.get(&format!("{p}.name")).is_empty() {
                        label { input type="checkbox" name={ (p) ".remove" } value="true"
                            checked[fields.get(&format!("{p}.remove")) == "true"];
                            "Remove variant " (i + 1) }
                    }
                }
            }
            button type="submit" { "Save toggle variants" }
        }
    }
}

/// The variants page of `name`, filled with `typed` (what a refused save sent) or else with
/// the toggle's variants.
fn render(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    environment: &str,
    typed: Option<(&Fields, &Errors)>,
) -> PageResult {
    let config = state.service.state()?;
    let toggle = active_toggle(&config, name)?;
    if !config.environments.contains_key(environment) {
        return Err(Problem(ApiError::NotFound(format!(
            "Could not find environment \"{environment}\""
        ))));
    }
    let held = Fields::of_toggle_variants(&toggle.environment(environment).variants);
    let no_errors = Errors::default();
    let (fields, errors, status) = match typed {
        Some((fields, errors)) => (fields, errors, errors.status()),
        None => (&held, &no_errors, StatusCode::OK),
    };
    let body = html! {
        p { "The variants of " a href=(toggle_path(name)) { (name) } " in the " code { (environment) } " environment, which a strategy without variants of its own hands out there"
            @if environment == DEFAULT_ENVIRONMENT { " (the 3.x API's toggle variants)" }
            ". Fixed weights are in percent; variable variants share the rest evenly. Leave a name empty, or tick Remove, to drop a variant." }
        (variants_form(viewer, name, environment, fields, errors))
        p { a href=(toggle_path(name)) { "Back to " (name) " without saving" } }
    };
    Ok(page(
        status,
        &format!("Toggle variants of {name} in {environment}"),
        Some(viewer),
        Section::Toggles,
        body,
    ))
}

/// `GET /ui/toggles/{name}/variants`.
pub async fn form(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(of): Query<VariantsOf>,
) -> PageResult {
    render(&state, &viewer, &name, of.environment(), None)
}

/// `POST /ui/toggles/{name}/variants`.
pub async fn save(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(of): Query<VariantsOf>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let environment = of.environment();
    let outcome = match variants_body(&form, environment == DEFAULT_ENVIRONMENT) {
        Err(errors) => Err(errors),
        Ok(rows) => {
            let specs: Vec<VariantSpec> = rows
                .iter()
                .map(|(_, v)| serde_json::from_value(v.clone()))
                .collect::<Result<_, _>>()
                .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
            let saved = if environment == DEFAULT_ENVIRONMENT {
                state
                    .service
                    .set_toggle_variants(&viewer.actor, &name, specs)
                    .await
            } else {
                let project = state
                    .service
                    .state()?
                    .features
                    .get(&name)
                    .map(|t| t.project.to_string())
                    .unwrap_or_default();
                let target = Target {
                    project: &project,
                    feature: &name,
                    environment,
                };
                state
                    .service
                    .set_toggle_environment_variants(&viewer.actor, target, specs)
                    .await
            };
            match saved {
                Ok(_) => Ok(()),
                Err(e) => {
                    // The API names the j-th variant sent; the form shows it on its row.
                    let mut errors = Errors::keeping_input(e, "");
                    for (j, (i, _)) in rows.iter().enumerate() {
                        errors.rename_prefix(&format!("variants[{j}]"), &format!("tv{i}"));
                    }
                    Err(errors)
                }
            }
        }
    };
    match outcome {
        Ok(()) => Ok(see_other(&with_notice(
            &toggle_path(&name),
            &format!("Toggle variants saved in {environment}."),
        ))),
        Err(errors) => render(&state, &viewer, &name, environment, Some((&form, &errors))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        serde_json::from_value(json!(pairs
            .iter()
            .map(|(k, v)| [k.to_string(), v.to_string()])
            .collect::<Vec<_>>()))
        .expect("fields")
    }

    #[test]
    fn variable_variants_share_what_fixed_ones_leave() {
        let rows = variants_body(
            &fields(&[
                ("tv0.name", "red"),
                ("tv0.weightType", "fix"),
                ("tv0.weight", "40"),
                ("tv1.name", "green"),
                ("tv1.weightType", "variable"),
                ("tv2.name", "blue"),
                ("tv3.name", "gone"),
                ("tv3.remove", "true"),
                ("tv4.name", ""),
            ]),
            true,
        )
        .expect("valid");
        let weights: Vec<(usize, u64)> = rows
            .iter()
            .map(|(i, v)| (*i, v["weight"].as_f64().unwrap_or(-1.0) as u64))
            .collect();
        assert_eq!(weights, [(0, 400), (1, 300), (2, 300)]);
        assert_eq!(rows[1].1["stickiness"], "default");
    }

    #[test]
    fn fixed_weights_must_add_up_and_be_numbers() {
        let over = variants_body(
            &fields(&[
                ("tv0.name", "a"),
                ("tv0.weightType", "fix"),
                ("tv0.weight", "60"),
                ("tv1.name", "b"),
                ("tv1.weightType", "fix"),
                ("tv1.weight", "50"),
            ]),
            true,
        );
        assert!(over.is_err_and(|e| e.about_text("variants").contains("110%")));
        let short = variants_body(
            &fields(&[
                ("tv0.name", "a"),
                ("tv0.weightType", "fix"),
                ("tv0.weight", "60"),
            ]),
            true,
        );
        assert!(short.is_err_and(|e| e.has("variants")));
        let typo = variants_body(
            &fields(&[
                ("tv0.name", "a"),
                ("tv0.weightType", "fix"),
                ("tv0.weight", "ten"),
            ]),
            true,
        );
        assert!(typo.is_err_and(|e| e.has("tv0.weight")));
        // Fixed weights of 100% in all: kept as they are in `default`, refused elsewhere (the
        // API shares weights out there, which needs a variable variant).
        let all_fixed = [
            ("tv0.name", "a"),
            ("tv0.weightType", "fix"),
            ("tv0.weight", "100"),
        ];
        assert!(variants_body(&fields(&all_fixed), true).is_ok());
        let elsewhere = variants_body(&fields(&all_fixed), false);
        assert!(elsewhere.is_err_and(|e| e.about_text("variants").contains("variable variant")));
    }

    #[test]
    fn variants_round_trip_through_the_form() {
        let variants: Vec<Variant> = serde_json::from_value(json!([
            {"name": "a", "weight": 250, "weightType": "fix", "stickiness": "userId",
             "payload": {"type": "string", "value": "x, y\nz"},
             "overrides": [{"contextName": "userId", "values": ["1", "a, b: c"]},
                           {"contextName": "region", "values": ["eu"]}]},
            {"name": "b", "weight": 750, "weightType": "variable", "stickiness": "default"},
        ]))
        .expect("variants");
        let rows = variants_body(&Fields::of_toggle_variants(&variants), true).expect("valid");
        let specs: Vec<VariantSpec> = rows
            .into_iter()
            .map(|(_, v)| serde_json::from_value(v).expect("spec"))
            .collect();
        let mut errors = crate::domain::ValidationErrors::default();
        let again = crate::domain::variant::validate_variants(specs, &mut errors);
        assert_eq!(again, variants);
    }

    #[test]
    fn override_values_keep_their_spaces_commas_and_colons() {
        let parsed = overrides_of(&["userId: a", "userId:  padded ", " tenant :x, y: z"])
            .expect("overrides");
        assert_eq!(
            parsed,
            vec![
                json!({"contextName": "userId", "values": ["a", " padded "]}),
                json!({"contextName": "tenant", "values": ["x, y: z"]}),
            ]
        );
        assert!(overrides_of(&["no colon here"]).is_err());
    }
}
