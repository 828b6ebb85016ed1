//! Variants: a toggle's (per environment, with overrides) and a strategy's (Unleash 5.4+),
//! and the rules that check them on admin writes (API-FACTS §14; MODERN-MODEL §2).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::error::ValidationErrors;
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{check_name, NAME_MAX};
use super::text::Text;

/// A variant of a toggle (spec §2.4, API-FACTS §14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    #[schema(value_type = String)]
    pub name: Text,
    /// 0–1,000 on admin writes; imports keep any weight (SDKs walk cumulative weights).
    pub weight: u32,
    pub weight_type: WeightType,
    #[schema(value_type = String)]
    pub stickiness: Text,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub overrides: Vec<Override>,
}

/// How a variant's weight is treated when weights are redistributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WeightType {
    Variable,
    Fix,
}

/// A variant payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Payload {
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: Text,
    #[schema(value_type = String)]
    pub value: Text,
}

/// Selects a variant when a context field has one of the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Override {
    #[schema(value_type = String)]
    pub context_name: Text,
    #[serde(deserialize_with = "exact_capacity::vec")]
    #[schema(value_type = Vec<String>)]
    pub values: Vec<Text>,
}

/// A variant as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariantSpec {
    /// Unique among the toggle's variants.
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$"
    )]
    pub name: Option<String>,
    /// A whole number.
    #[schema(
        required = true,
        nullable = false,
        minimum = 0,
        maximum = 1000,
        multiple_of = 1
    )]
    pub weight: Option<f64>,
    #[schema(value_type = Option<WeightType>)]
    pub weight_type: Option<String>,
    pub stickiness: Option<String>,
    pub payload: Option<PayloadSpec>,
    pub overrides: Option<Vec<OverrideSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A payload as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct PayloadSpec {
    #[serde(rename = "type")]
    #[schema(required = true, nullable = false)]
    pub kind: Option<String>,
    #[schema(required = true, nullable = false)]
    pub value: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// An override as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverrideSpec {
    #[schema(required = true, nullable = false, min_length = 1)]
    pub context_name: Option<String>,
    #[schema(value_type = Option<Vec<String>>)]
    pub values: Option<Vec<Text>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Validates variants: unique names, weights 0–1000, known weight types (API-FACTS §14).
pub fn validate_variants(specs: Vec<VariantSpec>, errors: &mut ValidationErrors) -> Vec<Variant> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let path = format!("variants[{i}]");
        let before = errors.0.len();
        refuse_unsupported(&spec.extra, &path, &[], errors);
        let name = spec.name.unwrap_or_default();
        if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
            errors.push(format!("{path}.name"), m);
        } else if !seen.insert(name.clone()) {
            errors.push(
                format!("{path}.name"),
                format!("variant name \"{name}\" is used twice; names must be unique"),
            );
        }
        let weight = match spec.weight {
            Some(w) if (0.0..=1000.0).contains(&w) && w.fract() == 0.0 => w as u32,
            Some(_) => {
                errors.push(
                    format!("{path}.weight"),
                    "\"weight\" must be a whole number from 0 to 1000",
                );
                0
            }
            None => {
                errors.push(format!("{path}.weight"), "\"weight\" is required");
                0
            }
        };
        let weight_type = read_weight_type(spec.weight_type.as_deref(), &path, errors);
        let payload = spec.payload.and_then(|p| {
            refuse_unsupported(&p.extra, &format!("{path}.payload"), &[], errors);
            match (p.kind, p.value) {
                (Some(kind), Some(value)) => Some(Payload {
                    kind: kind.into(),
                    value: value.into(),
                }),
                _ => {
                    errors.push(
                        format!("{path}.payload"),
                        "\"payload\" needs both \"type\" and \"value\"",
                    );
                    None
                }
            }
        });
        let overrides = spec
            .overrides
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(j, o)| {
                refuse_unsupported(&o.extra, &format!("{path}.overrides[{j}]"), &[], errors);
                match o.context_name {
                    Some(context_name) if !context_name.is_empty() => Some(Override {
                        context_name: context_name.into(),
                        values: o.values.unwrap_or_default(),
                    }),
                    _ => {
                        errors.push(
                            format!("{path}.overrides[{j}].contextName"),
                            "\"contextName\" is required",
                        );
                        None
                    }
                }
            })
            .collect();
        if errors.0.len() == before {
            out.push(Variant {
                name: name.into(),
                weight,
                weight_type,
                stickiness: spec
                    .stickiness
                    .map_or_else(|| Text::from("default"), Text::from),
                payload,
                overrides,
            });
        }
    }
    out
}

/// A variant's `weightType` (`variable` when not sent); anything else is a problem at
/// `{path}.weightType`.
fn read_weight_type(value: Option<&str>, path: &str, errors: &mut ValidationErrors) -> WeightType {
    match value {
        None | Some("variable") => WeightType::Variable,
        Some("fix") => WeightType::Fix,
        Some(_) => {
            errors.push(
                format!("{path}.weightType"),
                format!("\"{path}.weightType\" must be one of [variable, fix]"),
            );
            WeightType::Variable
        }
    }
}

/// The total weight variable and fixed variants share (Unleash's `fixVariantWeights`).
pub const WEIGHT_TOTAL: u32 = 1000;

/// A variant of a strategy (Unleash 5.4+): handed out when its strategy enables the toggle.
/// Weight type and stickiness stay absent when an import had none (Node then reads the
/// strategy's stickiness, MODERN-MODEL §2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyVariant {
    #[schema(value_type = String)]
    pub name: Text,
    pub weight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_type: Option<WeightType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub stickiness: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
}

/// A strategy variant as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyVariantSpec {
    /// Unique among the strategy's variants.
    #[schema(required = true, nullable = false, min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// A whole number 0–1000; required for `fix` variants (variable ones share what the fixed
    /// ones leave).
    #[schema(minimum = 0, maximum = 1000, multiple_of = 1)]
    pub weight: Option<f64>,
    /// `variable` when not sent.
    #[schema(value_type = Option<WeightType>)]
    pub weight_type: Option<String>,
    /// The strategy's `stickiness` parameter (else `default`) when not sent.
    pub stickiness: Option<String>,
    pub payload: Option<PayloadSpec>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Validates a strategy's variants (`path` is `…variants`) and shares the weights as Unleash 7
/// does on admin writes: fixed variants keep theirs (at most 1,000 in all), variable ones
/// split the rest evenly with the remainder handed out one each in order, and the list comes
/// back sorted by name. Variants of a strategy need at least one variable variant.
pub fn validate_strategy_variants(
    specs: Vec<StrategyVariantSpec>,
    path: &str,
    default_stickiness: &str,
    errors: &mut ValidationErrors,
) -> Vec<StrategyVariant> {
    if specs.is_empty() {
        return Vec::new();
    }
    let before = errors.0.len();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let path = format!("{path}[{i}]");
        refuse_unsupported(&spec.extra, &path, &[], errors);
        let name = spec.name.unwrap_or_default();
        if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
            errors.push(format!("{path}.name"), m);
        } else if !seen.insert(name.clone()) {
            errors.push(
                format!("{path}.name"),
                format!("variant name \"{name}\" is used twice; names must be unique"),
            );
        }
        let weight_type = read_weight_type(spec.weight_type.as_deref(), &path, errors);
        let weight = match spec.weight {
            Some(w) if (0.0..=1000.0).contains(&w) && w.fract() == 0.0 => w as u32,
            Some(_) => {
                errors.push(
                    format!("{path}.weight"),
                    "\"weight\" must be a whole number from 0 to 1000",
                );
                0
            }
            None if weight_type == WeightType::Fix => {
                errors.push(
                    format!("{path}.weight"),
                    "\"weight\" is required for a variant of weightType \"fix\"",
                );
                0
            }
            None => 0,
        };
        let payload = spec
            .payload
            .and_then(|p| validate_payload(p, &format!("{path}.payload"), errors));
        out.push(StrategyVariant {
            name: name.into(),
            weight,
            weight_type: Some(weight_type),
            stickiness: Some(
                spec.stickiness
                    .unwrap_or_else(|| default_stickiness.to_string())
                    .into(),
            ),
            payload,
        });
    }
    if errors.0.len() > before {
        return out;
    }
    share_weights(&mut out, path, errors);
    out
}

/// A variant whose weight Unleash's `fixVariantWeights` shares out.
trait SharedWeight {
    fn is_fix(&self) -> bool;
    fn weight_mut(&mut self) -> &mut u32;
    fn name(&self) -> &str;
}

impl SharedWeight for StrategyVariant {
    fn is_fix(&self) -> bool {
        self.weight_type == Some(WeightType::Fix)
    }
    fn weight_mut(&mut self) -> &mut u32 {
        &mut self.weight
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl SharedWeight for Variant {
    fn is_fix(&self) -> bool {
        self.weight_type == WeightType::Fix
    }
    fn weight_mut(&mut self) -> &mut u32 {
        &mut self.weight
    }
    fn name(&self) -> &str {
        &self.name
    }
}

/// Shares out toggle variants' weights as Unleash 7 does when it saves them per environment
/// (`fixVariantWeights`, see `validate_strategy_variants`); none is fine.
pub fn share_toggle_variant_weights(
    variants: &mut [Variant],
    path: &str,
    errors: &mut ValidationErrors,
) {
    if !variants.is_empty() {
        share_weights(variants, path, errors);
    }
}

/// Unleash's `fixVariantWeights`: see `validate_strategy_variants`.
fn share_weights<V: SharedWeight>(variants: &mut [V], path: &str, errors: &mut ValidationErrors) {
    let fixed: u32 = variants
        .iter_mut()
        .filter(|v| v.is_fix())
        .map(|v| *v.weight_mut())
        .sum();
    let variable = variants.iter().filter(|v| !v.is_fix()).count() as u32;
    if fixed > WEIGHT_TOTAL {
        errors.push(
            path,
            format!("the weights of \"fix\" variants add up to {fixed}; at most {WEIGHT_TOTAL}"),
        );
        return;
    }
    if variable == 0 {
        errors.push(path, "there must be at least one \"variable\" variant");
        return;
    }
    let share = (WEIGHT_TOTAL - fixed) / variable;
    let mut remainder = (WEIGHT_TOTAL - fixed) % variable;
    for variant in variants.iter_mut().filter(|v| !v.is_fix()) {
        *variant.weight_mut() = share + u32::from(remainder > 0);
        remainder = remainder.saturating_sub(1);
    }
    variants.sort_by(|a, b| a.name().cmp(b.name()));
}

/// A payload needs a type and a value; a `json` one must parse.
fn validate_payload(
    spec: PayloadSpec,
    path: &str,
    errors: &mut ValidationErrors,
) -> Option<Payload> {
    refuse_unsupported(&spec.extra, path, &[], errors);
    match (spec.kind, spec.value) {
        (Some(kind), Some(value)) => {
            if !PAYLOAD_TYPES.contains(&kind.as_str()) {
                errors.push(
                    format!("{path}.type"),
                    format!(
                        "\"{path}.type\" must be one of [{}]",
                        PAYLOAD_TYPES.join(", ")
                    ),
                );
            } else if kind == "json" && serde_json::from_str::<serde_json::Value>(&value).is_err() {
                errors.push(
                    format!("{path}.value"),
                    "a \"json\" payload must be valid JSON",
                );
            }
            Some(Payload {
                kind: kind.into(),
                value: value.into(),
            })
        }
        _ => {
            errors.push(path, "\"payload\" needs both \"type\" and \"value\"");
            None
        }
    }
}

/// The payload types Unleash 7 accepts on strategy variants.
const PAYLOAD_TYPES: [&str; 4] = ["json", "csv", "string", "number"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn variants(v: serde_json::Value) -> Result<Vec<StrategyVariant>, ValidationErrors> {
        let specs: Vec<StrategyVariantSpec> = serde_json::from_value(v).expect("parses");
        let mut errors = ValidationErrors::default();
        let out = validate_strategy_variants(specs, "variants", "userId", &mut errors);
        if errors.0.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn weights_are_shared_as_unleash_does_and_sorted_by_name() {
        let out = variants(json!([
            {"name": "c", "weightType": "variable"},
            {"name": "b", "weight": 100, "weightType": "fix"},
            {"name": "a", "weight": 5},
            {"name": "d"}
        ]))
        .expect("valid");
        let weights: Vec<(&str, u32)> = out.iter().map(|v| (v.name.as_str(), v.weight)).collect();
        // 900 over three variable variants: 300 each, no remainder.
        assert_eq!(weights, [("a", 300), ("b", 100), ("c", 300), ("d", 300)]);
        assert_eq!(out[0].stickiness.as_deref(), Some("userId"));
        let out = variants(json!([{"name": "x"}, {"name": "y"}, {"name": "z"}])).expect("valid");
        let weights: Vec<u32> = out.iter().map(|v| v.weight).collect();
        assert_eq!(weights, [334, 333, 333]);
    }

    #[test]
    fn fixed_weights_over_the_total_or_no_variable_variant_are_refused() {
        let paths = |e: ValidationErrors| e.0.into_iter().map(|e| e.path).collect::<Vec<_>>();
        let err = variants(json!([{"name": "a", "weight": 600, "weightType": "fix"},
            {"name": "b", "weight": 600, "weightType": "fix"}, {"name": "c"}]))
        .unwrap_err();
        assert_eq!(paths(err), ["variants"]);
        let err = variants(json!([{"name": "a", "weight": 600, "weightType": "fix"}])).unwrap_err();
        assert_eq!(paths(err), ["variants"]);
        let err = variants(
            json!([{"name": "a", "payload": {"type": "json", "value": "{"}},
            {"name": "a", "weightType": "odd"}]),
        )
        .unwrap_err();
        assert_eq!(
            paths(err),
            [
                "variants[0].payload.value",
                "variants[1].name",
                "variants[1].weightType"
            ]
        );
    }
}
