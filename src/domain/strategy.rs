//! Strategy definitions: the built-in ones and those admins add (API-FACTS §2).

use serde::{Deserialize, Serialize};

use super::error::{DomainError, ValidationErrors};
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{resolve_name, NAME_MAX};

/// A strategy definition as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDefinition {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: Vec<ParameterDefinition>,
    #[serde(default)]
    pub deprecated: bool,
    /// Built-in definitions cannot be edited or deleted.
    #[serde(default)]
    pub built_in: bool,
}

/// One parameter a strategy takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ParameterDefinition {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
}

/// A strategy definition as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct StrategyDefinitionSpec {
    /// Required on create; on replace, when sent, it must be the name in the path.
    #[schema(
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "byRegion"
    )]
    pub name: Option<String>,
    pub description: Option<String>,
    #[schema(required = true, nullable = false)]
    pub parameters: Option<Vec<ParameterSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Fields of the served definition that tools echo back; ignored (deprecation has its own
/// routes).
const READ_ONLY_STRATEGY_FIELDS: [&str; 2] = ["editable", "deprecated"];

/// A parameter definition as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct ParameterSpec {
    #[schema(required = true, nullable = false, min_length = 1)]
    pub name: Option<String>,
    /// E.g. `string`, `percentage`, `list`, `number`, `boolean`.
    #[serde(rename = "type")]
    #[schema(required = true, nullable = false, min_length = 1)]
    pub kind: Option<String>,
    pub description: Option<String>,
    pub required: Option<bool>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

impl StrategyDefinitionSpec {
    /// Validates a definition; `path_name` is the name from the URL on update.
    pub fn validate(self, path_name: Option<&str>) -> Result<StrategyDefinition, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &READ_ONLY_STRATEGY_FIELDS, &mut errors);
        let name = resolve_name("name", self.name, path_name, NAME_MAX, &mut errors);
        let parameters = match self.parameters {
            None => {
                errors.push("parameters", "\"parameters\" is required");
                Vec::new()
            }
            Some(list) => list
                .into_iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    refuse_unsupported(&p.extra, &format!("parameters[{i}]"), &[], &mut errors);
                    match (p.name, p.kind) {
                        (Some(name), Some(kind)) if !name.is_empty() && !kind.is_empty() => {
                            Some(ParameterDefinition {
                                name,
                                kind,
                                description: p.description.unwrap_or_default(),
                                required: p.required.unwrap_or(false),
                            })
                        }
                        _ => {
                            errors.push(
                                format!("parameters[{i}]"),
                                "a parameter needs a \"name\" and a \"type\"",
                            );
                            None
                        }
                    }
                })
                .collect(),
        };
        errors.into_result(StrategyDefinition {
            name,
            description: self.description.unwrap_or_default(),
            parameters,
            deprecated: false,
            built_in: false,
        })
    }
}

fn param(name: &str, kind: &str, required: bool, description: &str) -> ParameterDefinition {
    ParameterDefinition {
        name: name.into(),
        kind: kind.into(),
        description: description.into(),
        required,
    }
}

fn built_in(
    name: &str,
    description: &str,
    parameters: Vec<ParameterDefinition>,
) -> StrategyDefinition {
    StrategyDefinition {
        name: name.into(),
        description: description.into(),
        parameters,
        deprecated: false,
        built_in: true,
    }
}

/// The strategies every installation starts with (API-FACTS §2.4).
pub fn built_in_strategies() -> Vec<StrategyDefinition> {
    const GROUP: &str =
        "Used to define a activation groups, which allows you to correlate across feature toggles.";
    vec![
        built_in("default", "Default on/off strategy.", vec![]),
        built_in(
            "userWithId",
            "Active for users with a userId defined in the userIds-list",
            vec![param("userIds", "list", false, "")],
        ),
        built_in(
            "applicationHostname",
            "Active for client instances with a hostName in the hostNames-list.",
            vec![param(
                "hostNames",
                "list",
                false,
                "List of hostnames to enable the feature toggle for.",
            )],
        ),
        built_in(
            "gradualRolloutRandom",
            "Randomly activate the feature toggle. No stickiness.",
            vec![param("percentage", "percentage", false, "")],
        ),
        built_in(
            "gradualRolloutSessionId",
            "Gradually activate feature toggle. Stickiness based on session id.",
            vec![
                param("percentage", "percentage", false, ""),
                param("groupId", "string", true, GROUP),
            ],
        ),
        built_in(
            "gradualRolloutUserId",
            "Gradually activate feature toggle for logged in users. Stickiness based on user id.",
            vec![
                param("percentage", "percentage", false, ""),
                param("groupId", "string", true, GROUP),
            ],
        ),
        built_in(
            "remoteAddress",
            "Active for remote addresses defined in the IPs list.",
            vec![param(
                "IPs",
                "list",
                true,
                "List of IPs to enable the feature toggle for.",
            )],
        ),
        built_in(
            "flexibleRollout",
            "Gradually activate feature toggle based on sane stickiness",
            vec![
                param("rollout", "percentage", false, ""),
                param(
                    "stickiness",
                    "string",
                    true,
                    "Used define stickiness. Possible values: default, userId, sessionId, random",
                ),
                param("groupId", "string", true, GROUP),
            ],
        ),
    ]
}
