//! Projects: groups of toggles (spec §2.8, API-FACTS §13.1). `default` always exists.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::{DomainError, ValidationErrors};
use super::fields::{check_description, refuse_unsupported, ExtraFields};
use super::name::{resolve_name, NAME_MAX};

/// The project every toggle belongs to unless told otherwise. It exists by rule, stored or not.
pub const DEFAULT_PROJECT: &str = "default";

const DISPLAY_NAME_MAX: usize = 100;

/// A project as stored and served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub created_at: DateTime<Utc>,
}

/// A project as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct ProjectSpec {
    /// Required to create. A replacement (`PUT`) takes the id from its path; when the body
    /// repeats it, it must be that one.
    #[schema(
        required = true,
        nullable = false,
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "checkout"
    )]
    pub id: Option<String>,
    /// Not blank.
    #[schema(
        required = true,
        nullable = false,
        max_length = 100,
        pattern = "\\S",
        example = "Checkout"
    )]
    pub name: Option<String>,
    #[schema(max_length = 250)]
    pub description: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// The validated content of a [`ProjectSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidProject {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

impl ProjectSpec {
    /// Validates a project; `path_id` is the id from the URL on update.
    pub fn validate(self, path_id: Option<&str>) -> Result<ValidProject, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &["createdAt"], &mut errors);
        let id = resolve_name("id", self.id, path_id, NAME_MAX, &mut errors);
        let name = self.name.unwrap_or_default();
        if name.trim().is_empty() {
            errors.push("name", "\"name\" is required");
        } else if name.chars().count() > DISPLAY_NAME_MAX {
            errors.push(
                "name",
                format!("\"name\" must be at most {DISPLAY_NAME_MAX} characters long"),
            );
        }
        check_description(self.description.as_deref(), &mut errors);
        errors.into_result(ValidProject {
            id,
            name,
            description: self.description,
        })
    }
}

impl Project {
    /// A new project from validated input.
    pub fn create(valid: ValidProject, now: DateTime<Utc>) -> Self {
        Self {
            id: valid.id,
            name: valid.name,
            description: valid.description.unwrap_or_default(),
            created_at: now,
        }
    }

    /// PUT semantics: name replaced, description replaced when sent.
    pub fn replaced_by(&self, valid: ValidProject) -> Self {
        Self {
            id: self.id.clone(),
            name: valid.name,
            description: valid
                .description
                .unwrap_or_else(|| self.description.clone()),
            created_at: self.created_at,
        }
    }

    /// A project created for toggles that name it but have no project record (stores
    /// written before projects were checked).
    pub fn adopted(id: &str, now: DateTime<Utc>) -> Self {
        Self {
            id: id.to_string(),
            name: id.to_string(),
            description: String::new(),
            created_at: now,
        }
    }
}

/// Projects in listing order: by name, ids (unique) breaking ties (API-FACTS G7).
pub fn by_name<'a>(projects: impl Iterator<Item = &'a Project>) -> Vec<&'a Project> {
    let mut list: Vec<_> = projects.collect();
    list.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    list
}

/// The project every installation has (API-FACTS §13.1).
pub fn default_project(now: DateTime<Utc>) -> Project {
    Project {
        id: DEFAULT_PROJECT.to_string(),
        name: "Default".to_string(),
        description: "Default project".to_string(),
        created_at: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_follow_the_name_rule_and_names_are_required() {
        let spec: ProjectSpec =
            serde_json::from_value(json!({"id": "a b", "owner": "me"})).expect("parses");
        let DomainError::Invalid(errors) = spec.validate(None).unwrap_err() else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["owner", "id", "name"]);
    }
}
