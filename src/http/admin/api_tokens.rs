//! `/api/admin/api-tokens` (the v4 shapes of API-FACTS §9.3): list (secrets masked), create
//! (`201`, the secret shown this once), a new expiry, revoke.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
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
/// one shape per token type, each with [`TokenSpec`]'s `username` and `expiresAt`. An admin
/// token covers every project, so its `projects` can only be `["*"]`; a client token's are
/// `*` or project ids. Two rules are left to the handler, as no schema can say them: a client
/// token's projects must exist, and `expiresAt` must be in the future (the examples name the
/// `default` project, which always exists, and a date far ahead).
struct NewToken;

impl utoipa::PartialSchema for NewToken {
    fn schema() -> RefOr<Schema> {
        let spec = serde_json::to_value(<TokenSpec as utoipa::PartialSchema>::schema())
            .unwrap_or_default();
        let shared = |name: &str| spec["properties"][name].clone();
        let shape = |kind: &str, kind_pattern: &str, projects: Value, example: Value| {
            json!({
                "type": "object",
                "title": format!("{kind} token"),
                "required": ["username", "type"],
                "properties": {
                    "username": shared("username"),
                    "type": {
                        "type": "string",
                        "description": format!("`{kind}`, in any case"),
                        "pattern": kind_pattern,
                        "example": kind,
                    },
                    "projects": projects,
                    "expiresAt": shared("expiresAt"),
                },
                "additionalProperties": false,
                "example": example,
            })
        };
        let client = shape(
            "client",
            "^[Cc][Ll][Ii][Ee][Nn][Tt]$",
            json!({
                "type": ["array", "null"],
                "description": "The projects it sees: existing projects' ids, or `*` for all; \
                                `[\"*\"]` when absent or `null`",
                "minItems": 1,
                "items": {
                    "anyOf": [
                        {"type": "string", "enum": [ALL_PROJECTS]},
                        {
                            "type": "string",
                            "minLength": 2,
                            "maxLength": 100,
                            "pattern": "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
                        },
                    ],
                },
                "example": ["default"],
            }),
            json!({
                "username": "deploy-bot",
                "type": "client",
                "projects": ["default"],
                "expiresAt": "2099-12-31T23:59:59Z",
            }),
        );
        let admin = shape(
            "admin",
            "^[Aa][Dd][Mm][Ii][Nn]$",
            json!({
                "type": ["array", "null"],
                "description": "Every project (`[\"*\"]`, the default)",
                "minItems": 1,
                "maxItems": 1,
                "items": {"type": "string", "enum": [ALL_PROJECTS]},
                "example": [ALL_PROJECTS],
            }),
            json!({"username": "ci", "type": "admin"}),
        );
        one_of(
            "A new API token: a client token (for SDKs, optionally scoped to projects) or an \
             admin token (for automation, every project).",
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
