//! API tokens (issue 10; Unleash 7's shapes, MODERN-MODEL §5): admin tokens for automation,
//! client/backend tokens for SDK fleets (bound to an environment, optionally scoped to
//! projects), frontend tokens for the frontend API. A secret is shaped as Unleash issues it,
//! `<project|*|[]>:<environment>.<hex>`, yet only its SHA-256 is ever stored: the secret is
//! shown once, when the token is created (Unleash returns secrets to admins in listings; we
//! cannot).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::environment::DEFAULT_ENVIRONMENT;
use super::error::{DomainError, ValidationErrors};
use super::fields::{refuse_unsupported, ExtraFields};
use super::known::KnownNames;

/// The scope that covers every project (and, for admin tokens, every environment).
pub const ALL_PROJECTS: &str = "*";
/// The environment of admin tokens: every one.
pub const ALL_ENVIRONMENTS: &str = "*";
/// What a secret names as its project when the token covers several.
const SEVERAL_PROJECTS: &str = "[]";
/// Longest token name.
const USERNAME_MAX: usize = 100;
/// Hex characters of the SHA-256 that make a token's id.
pub const ID_LENGTH: usize = 16;
/// Characters of a secret's random part kept to recognise its token in listings (not enough
/// to guess it).
const SHOWN_PREFIX: usize = 6;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenType {
    /// The admin API (and the client API, any environment).
    Admin,
    /// The client API only, in its environment (Unleash's deprecated name for `backend`).
    Client,
    /// The client API only, in its environment (Unleash 7.2+).
    Backend,
    /// The frontend API only (not served yet): refused on the client and admin APIs.
    Frontend,
}

impl TokenType {
    /// The type named `name`, in any case.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Admin, Self::Client, Self::Backend, Self::Frontend]
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(name))
    }

    /// The type's name as served.
    pub fn name(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Client => "client",
            Self::Backend => "backend",
            Self::Frontend => "frontend",
        }
    }
}

fn default_environment() -> String {
    DEFAULT_ENVIRONMENT.to_string()
}

/// A token as stored, keyed by the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    /// Hex SHA-256 of the secret.
    pub hash: String,
    /// The secret's first characters, to recognise it in listings.
    pub prefix: String,
    /// The token's name (Unleash's `tokenName`).
    pub username: String,
    #[serde(rename = "type")]
    pub kind: TokenType,
    /// Projects the token sees (`["*"]`: all).
    pub projects: Vec<String>,
    /// The environment a client, backend or frontend token is served (`*` for admin tokens;
    /// tokens stored before environments existed were `default`'s).
    #[serde(default = "default_environment")]
    pub environment: String,
    /// Unleash's `alias` (old proxy tokens), kept when imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A token as sent by a client (`POST`): Unleash's body (`tokenName`, `type`, `environment`,
/// `project` or `projects`, `expiresAt`) or Flagpole's first one (`username` for the name).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenSpec {
    /// Not blank (or `username`).
    #[schema(
        nullable = false,
        max_length = 100,
        pattern = "\\S",
        example = "deploy-bot"
    )]
    pub token_name: Option<String>,
    /// The name, when `tokenName` is not sent (Flagpole's first body; deprecated in Unleash).
    #[schema(nullable = false, max_length = 100, pattern = "\\S")]
    pub username: Option<String>,
    /// `admin`, `client`, `backend` or `frontend`, in any case.
    #[serde(rename = "type")]
    #[schema(
        required = true,
        nullable = false,
        pattern = "^([Aa][Dd][Mm][Ii][Nn]|[Cc][Ll][Ii][Ee][Nn][Tt]|[Bb][Aa][Cc][Kk][Ee][Nn][Dd]|[Ff][Rr][Oo][Nn][Tt][Ee][Nn][Dd])$",
        example = "backend"
    )]
    pub kind: Option<String>,
    /// An existing environment (`default` when absent); admin tokens: `*`.
    #[schema(nullable = false, example = "production")]
    pub environment: Option<String>,
    /// One existing project, or `*` (instead of `projects`).
    #[schema(nullable = false, example = "default")]
    pub project: Option<String>,
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

/// What a listing shows of `secret`: its `<project>:<environment>.` part, which is no secret,
/// and the first characters of the rest.
fn shown_prefix(secret: &str) -> String {
    let random = secret
        .find(':')
        .and_then(|colon| secret[colon..].find('.').map(|dot| colon + dot + 1))
        .unwrap_or(0);
    let (scope, rest) = secret.split_at(random);
    scope
        .chars()
        .chain(rest.chars().take(SHOWN_PREFIX))
        .collect()
}

/// What a secret names as its project: the one project, `*` for all, `[]` for several.
fn project_label(projects: &[String]) -> &str {
    match projects {
        [one] => one,
        _ => SEVERAL_PROJECTS,
    }
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
    /// Validates a new token against the configuration (its projects must exist in `known`,
    /// its environment in `has_environment`) and makes it with the random part `random`;
    /// returns it with its whole secret, `<project|*|[]>:<environment>.<random>`.
    pub fn create(
        self,
        random: &str,
        known: &dyn KnownNames,
        has_environment: &dyn Fn(&str) -> bool,
        now: DateTime<Utc>,
    ) -> Result<(ApiToken, String), DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(
            &self.extra,
            "",
            &["secret", "createdAt", "seenAt", "alias"],
            &mut errors,
        );
        let (name_field, name) = match (self.token_name, self.username) {
            (Some(name), _) => ("tokenName", name),
            (None, Some(name)) => ("username", name),
            (None, None) => ("tokenName", String::new()),
        };
        let username = name.trim().to_string();
        if username.is_empty() {
            errors.push(name_field, format!("\"{name_field}\" is required"));
        } else if username.chars().count() > USERNAME_MAX {
            errors.push(
                name_field,
                format!("\"{name_field}\" must be at most {USERNAME_MAX} characters long"),
            );
        }
        // The enterprise 3.x UI sent ADMIN and CLIENT.
        let kind = match self.kind.as_deref() {
            Some(name) => {
                let kind = TokenType::parse(name);
                if kind.is_none() {
                    errors.push(
                        "type",
                        "\"type\" must be admin, client, backend or frontend",
                    );
                }
                kind
            }
            None => {
                errors.push(
                    "type",
                    "\"type\" is required (admin, client, backend or frontend)",
                );
                None
            }
        };
        let admin = kind == Some(TokenType::Admin);
        let (projects_field, projects) = match (self.project, self.projects) {
            (Some(_), Some(_)) => {
                errors.push(
                    "project",
                    "\"project\" and \"projects\" cannot both be sent",
                );
                ("projects", vec![ALL_PROJECTS.to_string()])
            }
            (Some(project), None) => ("project", vec![project]),
            (None, Some(projects)) => ("projects", projects),
            (None, None) => ("projects", vec![ALL_PROJECTS.to_string()]),
        };
        if projects.is_empty() {
            errors.push(
                "projects",
                "\"projects\" must name at least one project, or \"*\"",
            );
        }
        let all = projects.iter().any(|p| p == ALL_PROJECTS);
        if admin && !all {
            errors.push(projects_field, "admin tokens cover every project");
        }
        if !all {
            for (i, project) in projects.iter().enumerate() {
                if !known.has_project(project) {
                    let path = match projects_field {
                        "project" => "project".to_string(),
                        _ => format!("projects[{i}]"),
                    };
                    errors.push(path, format!("there is no project \"{project}\""));
                }
            }
        }
        let environment = match (admin, self.environment) {
            (true, None) => ALL_ENVIRONMENTS.to_string(),
            (true, Some(environment)) => {
                if environment != ALL_ENVIRONMENTS {
                    errors.push(
                        "environment",
                        "admin tokens cover every environment (\"*\")",
                    );
                }
                ALL_ENVIRONMENTS.to_string()
            }
            (false, environment) => {
                let environment = environment.unwrap_or_else(default_environment);
                if environment == ALL_ENVIRONMENTS {
                    errors.push(
                        "environment",
                        "only admin tokens cover every environment; name one",
                    );
                } else if !has_environment(&environment) {
                    errors.push(
                        "environment",
                        format!("there is no environment \"{environment}\""),
                    );
                }
                environment
            }
        };
        check_expiry(self.expires_at, now, &mut errors);
        let mut projects = if all {
            vec![ALL_PROJECTS.to_string()]
        } else {
            projects
        };
        projects.sort();
        projects.dedup();
        let kind = kind.unwrap_or(TokenType::Client);
        let secret = match admin {
            true => format!("{ALL_PROJECTS}:{ALL_ENVIRONMENTS}.{random}"),
            false => format!("{}:{environment}.{random}", project_label(&projects)),
        };
        let token = ApiToken::imported(
            &secret,
            kind,
            projects,
            environment,
            username,
            self.expires_at,
            now,
        );
        errors.into_result((token, secret))
    }
}

impl TokenExpiry {
    /// Validates a new expiry.
    pub fn validate(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(
            &self.extra,
            "",
            &[
                "secret",
                "username",
                "tokenName",
                "type",
                "environment",
                "project",
                "projects",
                "createdAt",
            ],
            &mut errors,
        );
        check_expiry(self.expires_at, now, &mut errors);
        errors.into_result(self.expires_at)
    }
}

impl ApiToken {
    /// A token whose secret is given (an Unleash token moved here keeps working): stored, as
    /// every token, by the SHA-256 of `secret` only. The caller has checked the rest.
    pub fn imported(
        secret: &str,
        kind: TokenType,
        projects: Vec<String>,
        environment: String,
        name: String,
        expires_at: Option<DateTime<Utc>>,
        created_at: DateTime<Utc>,
    ) -> Self {
        Self {
            hash: hash_secret(secret),
            prefix: shown_prefix(secret),
            username: name,
            kind,
            projects,
            environment,
            alias: None,
            expires_at,
            created_at,
        }
    }

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

    /// The environment it is served, `*` for every one (admin tokens, whatever was stored).
    pub fn environment(&self) -> &str {
        match self.kind {
            TokenType::Admin => ALL_ENVIRONMENTS,
            _ => &self.environment,
        }
    }

    /// The token as listings and events show it: the secret masked.
    pub fn view(&self) -> TokenView {
        TokenView {
            id: self.id().to_string(),
            secret: masked(&self.prefix),
            token_name: self.username.clone(),
            username: self.username.clone(),
            kind: self.kind,
            environment: self.environment().to_string(),
            project: project_label(&self.projects).to_string(),
            projects: self.projects.clone(),
            alias: self.alias.clone(),
            expires_at: self.expires_at,
            created_at: self.created_at,
        }
    }
}

/// A token as served and recorded in events (Unleash's `apiTokenSchema`, plus `id` and
/// `username`): the secret masked (shown whole only in the answer to its creation).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    /// A prefix of the secret's SHA-256: usable in place of the secret to update or revoke it.
    pub id: String,
    /// Whole in the answer to its creation; else its `<project>:<environment>.` part and a
    /// few characters, then `…`.
    pub secret: String,
    pub token_name: String,
    /// The same as `tokenName` (Flagpole's first name for it).
    pub username: String,
    #[serde(rename = "type")]
    pub kind: TokenType,
    /// The environment it is served; `*` for admin tokens.
    pub environment: String,
    /// The one project it sees, `*` for all, `[]` for several.
    pub project: String,
    /// Projects it sees (`["*"]`: all).
    pub projects: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
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

    /// Knows projects `a` and `b` and environments `default` and `production`.
    struct Known;

    impl KnownNames for Known {
        fn has_project(&self, id: &str) -> bool {
            ["a", "b"].contains(&id)
        }
        fn context_field(
            &self,
            _name: &str,
        ) -> Option<&crate::domain::context_field::ContextField> {
            None
        }
        fn has_segment(&self, _id: u32) -> bool {
            false
        }
    }

    fn has_environment(name: &str) -> bool {
        ["default", "production"].contains(&name)
    }

    fn made(body: serde_json::Value) -> (ApiToken, String) {
        spec(body)
            .create("0123456789", &Known, &has_environment, Utc::now())
            .expect("valid")
    }

    #[test]
    fn tokens_are_validated() {
        let known = NothingKnown;
        let now = Utc::now();
        let (token, secret) = spec(json!({"username": "ci", "type": "ADMIN"}))
            .create("0123456789", &known, &has_environment, now)
            .expect("valid");
        assert_eq!(token.kind, TokenType::Admin);
        assert_eq!(token.projects, ["*"]);
        assert_eq!(secret, "*:*.0123456789");
        assert_eq!(token.hash, hash_secret(&secret));
        assert_eq!(token.prefix, "*:*.012345");
        assert_eq!(token.scope(), None);
        assert_eq!(token.environment(), "*");
        let refused = spec(json!({"type": "root", "projects": ["nope"], "expiresAt": "2000-01-01T00:00:00Z", "color": "red", "environment": "staging"}))
            .create("s", &known, &has_environment, now)
            .expect_err("invalid");
        let DomainError::Invalid(errors) = refused else {
            panic!("invalid")
        };
        let paths: Vec<&str> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "color",
                "tokenName",
                "type",
                "projects[0]",
                "environment",
                "expiresAt"
            ]
        );
    }

    #[test]
    fn secrets_are_shaped_as_unleash_issues_them() {
        let (token, secret) = made(
            json!({"tokenName": "one", "type": "client", "project": "a", "environment": "production"}),
        );
        assert_eq!(secret, "a:production.0123456789");
        assert_eq!(
            (token.kind, token.environment()),
            (TokenType::Client, "production")
        );
        assert_eq!(token.view().project, "a");
        let (token, secret) =
            made(json!({"tokenName": "two", "type": "Backend", "projects": ["b", "a"]}));
        assert_eq!(secret, "[]:default.0123456789");
        assert_eq!(token.projects, ["a", "b"]);
        assert_eq!(token.view().project, "[]");
        assert_eq!(token.view().secret, "[]:default.012345…");
        let (token, secret) =
            made(json!({"tokenName": "all", "type": "frontend", "environment": "production"}));
        assert_eq!(secret, "*:production.0123456789");
        assert_eq!(token.kind, TokenType::Frontend);
        assert_eq!(token.scope(), None);
    }

    #[test]
    fn environments_follow_unleash_rules() {
        let refused = |body: serde_json::Value| {
            let Err(DomainError::Invalid(errors)) =
                spec(body).create("x", &Known, &has_environment, Utc::now())
            else {
                panic!("invalid")
            };
            errors.0.iter().map(|e| e.path.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            refused(json!({"tokenName": "t", "type": "backend", "environment": "*"})),
            ["environment"]
        );
        assert_eq!(
            refused(json!({"tokenName": "t", "type": "admin", "environment": "production"})),
            ["environment"]
        );
        assert_eq!(
            refused(json!({"tokenName": "t", "type": "client", "project": "a", "projects": ["a"]})),
            ["project"]
        );
        assert_eq!(
            refused(json!({"tokenName": "t", "type": "client", "project": "zzz"})),
            ["project"]
        );
    }

    #[test]
    fn imported_tokens_keep_their_secret_and_old_records_read_as_default() {
        let token = ApiToken::imported(
            "default:development.abcdef0123",
            TokenType::Backend,
            vec!["default".into()],
            "development".into(),
            "sdk".into(),
            None,
            Utc::now(),
        );
        assert_eq!(token.hash, hash_secret("default:development.abcdef0123"));
        assert_eq!(token.prefix, "default:development.abcdef");
        let old = json!({"hash": "h", "prefix": "abcdef", "username": "u", "type": "client",
            "projects": ["*"], "createdAt": "2024-01-01T00:00:00Z"});
        let old: ApiToken = serde_json::from_value(old).expect("old record");
        assert_eq!(old.environment(), "default");
    }
}
