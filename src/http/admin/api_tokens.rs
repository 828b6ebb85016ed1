//! `/api/admin/api-tokens` (the v4 shapes of API-FACTS §9.3): list (secrets masked), create
//! (`201`, the secret shown this once), a new expiry, revoke.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::api_token::{TokenExpiry, TokenSpec, TokenView};
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
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

/// Lists the API tokens, secrets masked.
#[utoipa::path(
    get,
    path = "/api-tokens",
    tag = "auth",
    responses((status = 200, description = "Every token, secrets masked", body = TokenList))
)]
async fn list_tokens(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let tokens = service.api_tokens()?.iter().map(|t| t.view()).collect();
    Ok(Json(json!(TokenList { tokens })))
}

/// Creates an API token; its secret is shown this once.
#[utoipa::path(
    post,
    path = "/api-tokens",
    tag = "auth",
    request_body = TokenSpec,
    responses((status = 201, description = "Created; the secret is shown this once", body = TokenView))
)]
async fn create_token(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TokenSpec>,
) -> ApiResult<Response> {
    let (token, secret) = service.create_api_token(&actor, spec).await?;
    let shown = TokenView {
        secret,
        ..token.view()
    };
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// Sets an API token's expiry.
#[utoipa::path(
    put,
    path = "/api-tokens/{secret}",
    tag = "auth",
    params(("secret" = String, Path, description = "The token's secret, or its `id`")),
    request_body = TokenExpiry,
    responses(
        (status = 200, description = "The new expiry is set", body = TokenView),
        (status = 404, description = "No such token", body = ErrorBody),
    )
)]
async fn update_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(secret): AppPath<String>,
    AppJson(expiry): AppJson<TokenExpiry>,
) -> ApiResult<Json<Value>> {
    let token = service.update_api_token(&actor, &secret, expiry).await?;
    Ok(Json(json!(token.view())))
}

/// Revokes an API token.
#[utoipa::path(
    delete,
    path = "/api-tokens/{secret}",
    tag = "auth",
    params(("secret" = String, Path, description = "The token's secret, or its `id`")),
    responses(
        (status = 200, description = "Revoked"),
        (status = 404, description = "No such token", body = ErrorBody),
    )
)]
async fn delete_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(secret): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_api_token(&actor, &secret).await?;
    Ok(StatusCode::OK)
}
