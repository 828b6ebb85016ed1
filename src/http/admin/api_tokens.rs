//! `/api/admin/api-tokens` (Unleash 7's shapes, MODERN-MODEL §5): list (secrets masked: we
//! keep only their SHA-256), create (`201`, the secret shown this once), a new expiry, revoke.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::api_token::{TokenExpiry, TokenSpec, TokenView, ALL_PROJECTS};
use crate::domain::schema::one_of;
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::http::response::Created;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(update_token, delete_token))
}

/// Every token, secrets masked.
#[derive(Serialize, utoipa::ToSchema)]
struct TokenList {
    tokens: Vec<TokenView>,
}

/// The token a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct TokenPath {
    /// The token's secret, or its `id`
    secret: String,
}

/// The body of `POST` as documented (documentation only: the handler reads a [`TokenSpec`]):
/// one shape per kind of token, each named by `tokenName` (or `username`, Flagpole's first
/// body) with an optional `expiresAt`. An admin token covers every project and environment,
/// so its `projects` can only be `["*"]` and its `environment` only `*`; a client, backend or
/// frontend token's projects are `*` or project ids (`project` or `projects`), its environment
/// one of the registry. Left to the handler: one of `tokenName` and `username` is required,
/// `project` and `projects` exclude each other (utoipa's object schemas carry no `anyOf` or
/// `not`), the projects and the environment must exist (state), and `expiresAt` must be in the
/// future (time); the examples name `default`, which always exists, and a date far ahead.
struct NewToken;

/// The project-id rule, for the schema.
const PROJECT_PATTERN: &str = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$";

impl utoipa::PartialSchema for NewToken {
    fn schema() -> RefOr<Schema> {
        let spec = serde_json::to_value(<TokenSpec as utoipa::PartialSchema>::schema())
            .unwrap_or_default();
        let shared = |name: &str| spec["properties"][name].clone();
        let project_id = json!({
            "anyOf": [
                {"type": "string", "enum": [ALL_PROJECTS]},
                {"type": "string", "minLength": 2, "maxLength": 100, "pattern": PROJECT_PATTERN},
            ],
        });
        let client = json!({
            "type": "object",
            "title": "client, backend or frontend token",
            "required": ["type"],
            "properties": {
                "tokenName": shared("tokenName"),
                "username": shared("username"),
                "type": {
                    "type": "string",
                    "description": "`client` (Unleash's old name for `backend`), `backend` or \
                                    `frontend`, in any case",
                    "pattern": "^([Cc][Ll][Ii][Ee][Nn][Tt]|[Bb][Aa][Cc][Kk][Ee][Nn][Dd]|[Ff][Rr][Oo][Nn][Tt][Ee][Nn][Dd])$",
                    "example": "backend",
                },
                "environment": {
                    "type": "string",
                    "description": "An environment of the registry; `default` when absent",
                    "minLength": 1,
                    "maxLength": 100,
                    "pattern": PROJECT_PATTERN,
                    "example": "default",
                },
                "project": {
                    "description": "The one project it sees (an existing project's id), or \
                                    `*` for all",
                    "example": "default",
                    "anyOf": project_id["anyOf"],
                },
                "projects": {
                    "type": ["array", "null"],
                    "description": "The projects it sees: existing projects' ids, or `*` for \
                                    all; `[\"*\"]` when absent or `null`",
                    "minItems": 1,
                    "items": project_id,
                    "example": ["default"],
                },
                "expiresAt": shared("expiresAt"),
            },
            "additionalProperties": false,
            "example": {
                "tokenName": "deploy-bot",
                "type": "backend",
                "environment": "default",
                "projects": ["default"],
                "expiresAt": "2099-12-31T23:59:59Z",
            },
        });
        let admin = json!({
            "type": "object",
            "title": "admin token",
            "required": ["type"],
            "properties": {
                "tokenName": shared("tokenName"),
                "username": shared("username"),
                "type": {
                    "type": "string",
                    "description": "`admin`, in any case",
                    "pattern": "^[Aa][Dd][Mm][Ii][Nn]$",
                    "example": "admin",
                },
                "environment": {
                    "type": "string",
                    "description": "Every environment (`*`, the default)",
                    "enum": ["*"],
                },
                "projects": {
                    "type": ["array", "null"],
                    "description": "Every project (`[\"*\"]`, the default)",
                    "minItems": 1,
                    "maxItems": 1,
                    "items": {"type": "string", "enum": [ALL_PROJECTS]},
                    "example": [ALL_PROJECTS],
                },
                "expiresAt": shared("expiresAt"),
            },
            "additionalProperties": false,
            "example": {"tokenName": "ci", "type": "admin"},
        });
        one_of(
            "A new API token, as Unleash 7 takes it: a client or backend token (for SDKs: one \
             environment, optionally some projects), a frontend token (for the frontend API, \
             not served yet), or an admin token (for automation: everything).",
            vec![client, admin],
        )
    }
}

impl utoipa::ToSchema for NewToken {}

/// Lists the API tokens, secrets masked.
#[utoipa::path(
    get,
    path = "/api-tokens",
    tag = "auth",
    responses((status = 200, description = "Every token, secrets masked", body = TokenList))
)]
async fn list_tokens(State(service): State<Service>) -> ApiResult<Json<TokenList>> {
    let tokens = service.api_tokens()?.iter().map(|t| t.view()).collect();
    Ok(Json(TokenList { tokens }))
}

/// Creates an API token; its secret is shown this once.
#[utoipa::path(
    post,
    path = "/api-tokens",
    tag = "auth",
    request_body = NewToken,
    responses((status = 201, description = "Created; the secret is shown this once", body = TokenView))
)]
async fn create_token(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TokenSpec>,
) -> ApiResult<Created<TokenView>> {
    let (token, secret) = service.create_api_token(&actor, spec).await?;
    Ok(Created(TokenView {
        secret,
        ..token.view()
    }))
}

/// Sets an API token's expiry.
#[utoipa::path(
    put,
    path = "/api-tokens/{secret}",
    tag = "auth",
    params(TokenPath),
    request_body = TokenExpiry,
    responses(
        (status = 200, description = "The new expiry is set", body = TokenView),
        (status = 404, description = "No such token", body = ErrorBody),
    )
)]
async fn update_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(TokenPath { secret }): AppPath<TokenPath>,
    AppJson(expiry): AppJson<TokenExpiry>,
) -> ApiResult<Json<TokenView>> {
    let token = service.update_api_token(&actor, &secret, expiry).await?;
    Ok(Json(token.view()))
}

/// Revokes an API token.
#[utoipa::path(
    delete,
    path = "/api-tokens/{secret}",
    tag = "auth",
    params(TokenPath),
    responses(
        (status = 200, description = "Revoked"),
        (status = 404, description = "No such token", body = ErrorBody),
    )
)]
async fn delete_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(TokenPath { secret }): AppPath<TokenPath>,
) -> ApiResult<StatusCode> {
    service.delete_api_token(&actor, &secret).await?;
    Ok(StatusCode::OK)
}
