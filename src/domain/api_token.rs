//! API tokens (issue 10; the shapes of API-FACTS §9.3, v4): admin tokens for automation,
//! client tokens for SDK fleets, optionally scoped to projects. Only the SHA-256 of a secret
//! is ever stored; the secret is shown once, when the token is created.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::{DomainError, ValidationErrors};
use super::fields::{refuse_unsupported, ExtraFields};
use super::known::KnownNames;

/// The scope that covers every project.
pub const ALL_PROJECTS: &str = "*";
/// Longest token username.
const USERNAME_MAX: usize = 100;
/// Hex characters of the SHA-256 that make a token's id.
pub const ID_LENGTH: usize = 16;
/// Characters of a secret kept to recognise its token in listings (not enough to guess it).
const SHOWN_PREFIX: usize = 6;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenType {
    /// The admin API (and the client API).
    Admin,
    /// The client API only.
    Client,
}

/// A token as stored, keyed by the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    /// Hex SHA-256 of the secret.
    pub hash: String,
    /// The secret's first characters, to recognise it in listings.
    pub prefix: String,
    pub username: String,
    #[serde(rename = "type")]
    pub kind: TokenType,
    /// Projects a client token sees (`["*"]`: all).
    pub projects: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A token as sent by a client (`POST`).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenSpec {
    /// Not blank.
    #[schema(
        required = true,
        nullable = false,
        max_length = 100,
        pattern = "\\S",
        example = "deploy-bot"
    )]
    pub username: Option<String>,
    /// `admin` or `client`, in any case.
    #[serde(rename = "type")]
    #[schema(
        required = true,
        nullable = false,
        pattern = "^([Aa][Dd][Mm][Ii][Nn]|[Cc][Ll][Ii][Ee][Nn][Tt])$",
        example = "client"
    )]
    pub kind: Option<String>,
    /// Existing projects, or `*` for all (admin tokens: `*`); `["*"]` when not sent.
    #[schema(min_items = 1, example = json!(["*"]))]
    pub projects: Option<Vec<String>>,
    /// In the future; `null` or absent: never.
    #[schema(example = "2099-12-31T23:59:59Z")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A new expiry (`PUT`).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenExpiry {
    /// In the future; `null` or absent: never.
    #[schema(example = "2099-12-31T23:59:59Z")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Hex SHA-256 of a secret: how tokens are stored and looked up. (On the client path for
/// every request with `--auth token`: one allocation, no formatting machinery.)
pub fn hash_secret(secret: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(secret.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

/// A secret as listings show it: its first characters and an ellipsis.
pub fn masked(prefix: &str) -> String {
    format!("{prefix}…")
}

/// Refuses an expiry that has passed.
fn check_expiry(
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) {
    if expires_at.is_some_and(|at| at <= now) {
        errors.push("expiresAt", "\"expiresAt\" must be in the future");
    }
}

impl TokenSpec {
    /// Validates a new token against the configuration (its projects must exist in `known`) and
    /// makes it with `secret`.
    pub fn create(
        self,
        secret: &str,
        known: &dyn KnownNames,
        now: DateTime<Utc>,
    ) -> Result<ApiToken, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &["secret", "createdAt"], &mut errors);
        let username = self.username.unwrap_or_default().trim().to_string();
        if username.is_empty() {
            errors.push("username", "\"username\" is required");
        } else if username.chars().count() > USERNAME_MAX {
            errors.push(
                "username",
                format!("\"username\" must be at most {USERNAME_MAX} characters long"),
            );
        }
        // The enterprise 3.x UI sent ADMIN and CLIENT.
        let kind = match self.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("admin") => Some(TokenType::Admin),
            Some("client") => Some(TokenType::Client),
            None => {
                errors.push("type", "\"type\" is required (admin or client)");
                None
            }
            Some(_) => {
                errors.push("type", "\"type\" must be admin or client");
                None
            }
        };
        let projects = self
            .projects
            .unwrap_or_else(|| vec![ALL_PROJECTS.to_string()]);
        if projects.is_empty() {
            errors.push(
                "projects",
                "\"projects\" must name at least one project, or \"*\"",
            );
        }
        let all = projects.iter().any(|p| p == ALL_PROJECTS);
        if kind == Some(TokenType::Admin) && !all {
            errors.push("projects", "admin tokens cover every project");
        }
        if !all {
            for (i, project) in projects.iter().enumerate() {
                if !known.has_project(project) {
                    errors.push(
                        format!("projects[{i}]"),
                        format!("there is no project \"{project}\""),
                    );
                }
            }
        }
        check_expiry(self.expires_at, now, &mut errors);
        let mut projects = if all {
            vec![ALL_PROJECTS.to_string()]
        } else {
            projects
        };
        projects.sort();
        projects.dedup();
        let kind = kind.unwrap_or(TokenType::Client);
        errors.into_result(ApiToken {
            hash: hash_secret(secret),
            prefix: secret.chars().take(SHOWN_PREFIX).collect(),
            username,
            kind,
            projects,
            expires_at: self.expires_at,
            created_at: now,
        })
    }
}

impl TokenExpiry {
    /// Validates a new expiry.
    pub fn validate(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(
            &self.extra,
            "",
            &["secret", "username", "type", "projects", "createdAt"],
            &mut errors,
        );
        check_expiry(self.expires_at, now, &mut errors);
        errors.into_result(self.expires_at)
    }
}

impl ApiToken {
    /// The token's id: a prefix of its SHA-256, shown in listings so that a token whose secret
    /// was lost can still be changed or revoked (and so that secrets stay out of URLs).
    pub fn id(&self) -> &str {
        self.hash.get(..ID_LENGTH).unwrap_or(&self.hash)
    }

    /// Whether the token has expired at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// The projects a client holding it sees; `None` for all.
    pub fn scope(&self) -> Option<&[String]> {
        (!self.projects.iter().any(|p| p == ALL_PROJECTS)).then_some(&self.projects)
    }

    /// The token as listings and events show it: the secret masked.
    pub fn view(&self) -> TokenView {
        TokenView {
            id: self.id().to_string(),
            secret: masked(&self.prefix),
            username: self.username.clone(),
            kind: self.kind,
            projects: self.projects.clone(),
            expires_at: self.expires_at,
            created_at: self.created_at,
        }
    }
}

/// A token as served and recorded in events: the secret masked (shown whole only in the answer
/// to its creation).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    /// A prefix of the secret's SHA-256: usable in place of the secret to update or revoke it.
    pub id: String,
    pub secret: String,
    pub username: String,
    #[serde(rename = "type")]
    pub kind: TokenType,
    /// Projects a client token sees (`["*"]`: all).
    pub projects: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::known::NothingKnown;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> TokenSpec {
        serde_json::from_value(value).expect("spec")
    }

    #[test]
    fn hashes_are_sha256_hex() {
        // python3: hashlib.sha256(b"abc").hexdigest()
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn tokens_are_validated() {
        let known = NothingKnown;
        let now = Utc::now();
        let token = spec(json!({"username": "ci", "type": "ADMIN"}))
            .create("0123456789", &known, now)
            .expect("valid");
        assert_eq!(token.kind, TokenType::Admin);
        assert_eq!(token.projects, ["*"]);
        assert_eq!(token.prefix, "012345");
        assert_eq!(token.scope(), None);
        let refused = spec(json!({"type": "root", "projects": ["nope"], "expiresAt": "2000-01-01T00:00:00Z", "color": "red"}))
            .create("s", &known, now)
            .expect_err("invalid");
        let DomainError::Invalid(errors) = refused else {
            panic!("invalid")
        };
        let paths: Vec<&str> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["color", "username", "type", "projects[0]", "expiresAt"]
        );
    }
}
