//! The `apiTokens` section of a version-2 document. A token moved in from Unleash carries its
//! `secret` verbatim, so SDKs keep working; only its SHA-256 is stored, as for every token. An
//! export, which has no secrets, writes `secretSha256` instead, which imports back the same
//! token. A document with secrets is itself a secret.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::apply::{merge, ImportOptions, RecordCounts};
use super::document::parse_item;
use crate::domain::api_token::{ApiToken, TokenType};
use crate::domain::config_state::ConfigState;
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::ValidationErrors;

/// An `apiTokens` item.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokenItem {
    /// The whole secret (from Unleash).
    #[serde(default)]
    secret: Option<String>,
    /// Or its hex SHA-256 with the prefix listings show (from a Flagpole export).
    #[serde(default)]
    secret_sha256: Option<String>,
    #[serde(default)]
    secret_prefix: Option<String>,
    token_name: String,
    #[serde(rename = "type")]
    kind: String,
    projects: Vec<String>,
    environment: String,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
}

/// Reads the `apiTokens` section.
pub fn read_tokens(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, ApiToken)> {
    let mut seen = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("apiTokens[{i}]");
        let Some(item) = parse_item::<TokenItem>(item, &path, errors) else {
            continue;
        };
        let Some(kind) = TokenType::parse(&item.kind) else {
            errors.push(
                format!("{path}.type"),
                "\"type\" must be admin, client, backend or frontend",
            );
            continue;
        };
        if item.projects.is_empty() {
            errors.push(format!("{path}.projects"), "\"projects\" may not be empty");
            continue;
        }
        let created_at = item.created_at.unwrap_or(now);
        let mut token = match (&item.secret, &item.secret_sha256) {
            (Some(secret), None) if !secret.trim().is_empty() => ApiToken::imported(
                secret,
                kind,
                item.projects,
                item.environment,
                item.token_name,
                item.expires_at,
                created_at,
            ),
            (None, Some(hash))
                if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                ApiToken {
                    hash: hash.to_ascii_lowercase(),
                    prefix: item.secret_prefix.unwrap_or_default(),
                    username: item.token_name,
                    kind,
                    projects: item.projects,
                    environment: item.environment,
                    alias: None,
                    expires_at: item.expires_at,
                    created_at,
                }
            }
            _ => {
                errors.push(
                    path,
                    "a token has either its \"secret\" or its \"secretSha256\" (64 hex digits)",
                );
                continue;
            }
        };
        token.alias = item.alias.filter(|a| !a.is_empty());
        if let Some(earlier) = seen.insert(token.hash.clone(), i) {
            errors.push(
                path,
                format!("the same token appears twice (also at apiTokens[{earlier}])"),
            );
            continue;
        }
        read.push((i, token));
    }
    read
}

/// Writes the document's tokens by the hash of their secret (unless `keep` and stored);
/// their projects and environment must exist. Tokens are never dropped: a `drop` import must
/// not lock out whoever runs it.
pub fn apply_tokens(
    next: &mut ConfigState,
    listed: &[(usize, ApiToken)],
    keep: bool,
    errors: &mut ValidationErrors,
) -> RecordCounts {
    for (i, token) in listed {
        let path = format!("apiTokens[{i}]");
        if token.environment != "*" && !next.environments.contains_key(&token.environment) {
            errors.push(
                format!("{path}.environment"),
                format!(
                    "there is no environment \"{}\" (in the document or stored)",
                    token.environment
                ),
            );
        }
        for project in &token.projects {
            if project != "*" && project != DEFAULT_PROJECT && !next.projects.contains_key(project)
            {
                errors.push(
                    format!("{path}.projects"),
                    format!("there is no project \"{project}\" (in the document or stored)"),
                );
            }
        }
    }
    let listed: Vec<ApiToken> = listed.iter().map(|(_, t)| t.clone()).collect();
    let options = ImportOptions { drop: false, keep };
    let carry = |old: &ApiToken, new: &mut ApiToken| new.created_at = old.created_at;
    merge(
        &mut next.api_tokens,
        listed,
        options,
        |t| &t.hash,
        carry,
        |_| true,
    )
    .0
}
