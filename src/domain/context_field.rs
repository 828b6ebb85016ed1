//! Context fields: the names constraints look up in an SDK's evaluation context (spec §2.9,
//! API-FACTS §13.2), the built-in ones and those admins add.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::{DomainError, ValidationErrors};
use super::fields::{check_description, refuse_unsupported, ExtraFields};
use super::name::{resolve_name, NAME_MAX};

/// Sort order of fields created without one (API-FACTS §13.2).
const DEFAULT_SORT_ORDER: i64 = 10;
const LEGAL_VALUE_MAX: usize = 100;

/// A context field as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextField {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Offered as a stickiness choice for gradual rollouts and variants.
    #[serde(default)]
    pub stickiness: bool,
    pub sort_order: i64,
    /// When not empty, the only values constraints on this field may compare with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legal_values: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// Built-in fields (those the SDKs fill in themselves) cannot be deleted.
    #[serde(default)]
    pub built_in: bool,
}

/// A context field as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextFieldSpec {
    /// Required to create. A replacement (`PUT`) takes the name from its path; when the body
    /// repeats it, it must be that one.
    #[schema(
        required = true,
        nullable = false,
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "region"
    )]
    pub name: Option<String>,
    #[schema(max_length = 250)]
    pub description: Option<String>,
    pub stickiness: Option<bool>,
    pub sort_order: Option<i64>,
    /// Each 1 to 100 characters, none twice.
    #[schema(value_type = Option<std::collections::BTreeSet<LegalValue>>)]
    pub legal_values: Option<Vec<String>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A legal value as sent (documentation only): 1 to 100 characters.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, min_length = 1, max_length = 100)]
#[allow(dead_code)]
pub struct LegalValue(String);

/// The validated content of a [`ContextFieldSpec`]; `None` means "not sent".
#[derive(Debug, Clone, PartialEq)]
pub struct ValidContextField {
    pub name: String,
    pub description: Option<String>,
    pub stickiness: bool,
    pub sort_order: Option<i64>,
    pub legal_values: Vec<String>,
}

impl ContextFieldSpec {
    /// Validates a field; `path_name` is the name from the URL on update.
    pub fn validate(self, path_name: Option<&str>) -> Result<ValidContextField, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &["createdAt"], &mut errors);
        let name = resolve_name("name", self.name, path_name, NAME_MAX, &mut errors);
        check_description(self.description.as_deref(), &mut errors);
        let legal_values = self.legal_values.unwrap_or_default();
        let mut seen = HashSet::new();
        for (i, value) in legal_values.iter().enumerate() {
            let path = format!("legalValues[{i}]");
            if value.is_empty() || value.chars().count() > LEGAL_VALUE_MAX {
                errors.push(
                    path,
                    format!("legal values must be 1 to {LEGAL_VALUE_MAX} characters long"),
                );
            } else if !seen.insert(value) {
                errors.push(path, format!("\"{value}\" is listed twice"));
            }
        }
        errors.into_result(ValidContextField {
            name,
            description: self.description,
            stickiness: self.stickiness.unwrap_or(false),
            sort_order: self.sort_order,
            legal_values,
        })
    }
}

impl ContextField {
    /// A new field with the defaults: no description, no legal values, sort order 10.
    pub fn new(name: &str, now: DateTime<Utc>) -> Self {
        Self {
            name: name.to_string(),
            description: String::new(),
            stickiness: false,
            sort_order: DEFAULT_SORT_ORDER,
            legal_values: Vec::new(),
            created_at: now,
            built_in: false,
        }
    }

    /// A new field from validated input.
    pub fn create(valid: ValidContextField, now: DateTime<Utc>) -> Self {
        Self {
            description: valid.description.unwrap_or_default(),
            stickiness: valid.stickiness,
            sort_order: valid.sort_order.unwrap_or(DEFAULT_SORT_ORDER),
            legal_values: valid.legal_values,
            ..Self::new(&valid.name, now)
        }
    }

    /// PUT semantics: the document replaces the field; an omitted description or sort order
    /// keeps the old one (as the reference does).
    pub fn replaced_by(&self, valid: ValidContextField) -> Self {
        Self {
            name: self.name.clone(),
            description: valid
                .description
                .unwrap_or_else(|| self.description.clone()),
            stickiness: valid.stickiness,
            sort_order: valid.sort_order.unwrap_or(self.sort_order),
            legal_values: valid.legal_values,
            created_at: self.created_at,
            built_in: self.built_in,
        }
    }
}

/// The built-in fields with their descriptions, in sort order.
const BUILT_IN: [(&str, &str); 7] = [
    (
        "environment",
        "Allows you to constrain on application environment",
    ),
    ("userId", "Allows you to constrain on userId"),
    ("appName", "Allows you to constrain on application name"),
    ("tenantId", "Allows you to constrain on tenantId"),
    ("sessionId", "Allows you to constrain on sessionId"),
    (
        "remoteAddress",
        "Allows you to constrain on the client's remote address",
    ),
    (
        "currentTime",
        "Allows you to constrain on the time of evaluation",
    ),
];

/// Whether `name` is a built-in field (which exists even before a store is seeded).
pub fn is_built_in(name: &str) -> bool {
    BUILT_IN.iter().any(|(n, _)| *n == name)
}

/// The fields every installation has: those the SDKs fill in from their own state.
pub fn built_in_context_fields(now: DateTime<Utc>) -> Vec<ContextField> {
    BUILT_IN
        .into_iter()
        .zip(0..)
        .map(|((name, description), sort_order)| ContextField {
            description: description.to_string(),
            sort_order,
            built_in: true,
            ..ContextField::new(name, now)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> ContextFieldSpec {
        serde_json::from_value(v).expect("spec parses")
    }

    #[test]
    fn problems_are_reported_together() {
        let err = spec(
            json!({"name": "a b", "legalValues": ["x", "x", ""], "icon": "globe",
            "createdAt": "2020-01-01T00:00:00Z"}),
        )
        .validate(None)
        .unwrap_err();
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["icon", "name", "legalValues[1]", "legalValues[2]"]);
    }

    #[test]
    fn update_keeps_what_was_not_sent() {
        let now = Utc::now();
        let field = ContextField::create(
            spec(json!({"name": "region", "description": "d", "sortOrder": 3, "legalValues": ["eu"]}))
                .validate(None)
                .expect("valid"),
            now,
        );
        let updated = field.replaced_by(
            spec(json!({"stickiness": true}))
                .validate(Some("region"))
                .expect("valid"),
        );
        assert_eq!(updated.description, "d");
        assert_eq!(updated.sort_order, 3);
        assert!(updated.legal_values.is_empty() && updated.stickiness);
    }
}
