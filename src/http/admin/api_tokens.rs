//! `/api/admin/api-tokens` (the v4 shapes of API-FACTS §9.3): list (secrets masked), create
//! (`201`, the secret shown this once), a new expiry, revoke.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::api_token::{TokenExpiry, TokenSpec};
use crate::error::ApiResult;
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api-tokens", get(list_tokens).post(create_token))
        .route(
            "/api-tokens/{secret}",
            put(update_token).delete(delete_token),
        )
}

async fn list_tokens(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let tokens: Vec<Value> = service.api_tokens()?.iter().map(|t| t.view()).collect();
    Ok(Json(json!({"tokens": tokens})))
}

async fn create_token(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TokenSpec>,
) -> ApiResult<Response> {
    let (token, secret) = service.create_api_token(&actor, spec).await?;
    let mut shown = token.view();
    shown["secret"] = json!(secret);
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

async fn update_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(secret): AppPath<String>,
    AppJson(expiry): AppJson<TokenExpiry>,
) -> ApiResult<Json<Value>> {
    let token = service.update_api_token(&actor, &secret, expiry).await?;
    Ok(Json(token.view()))
}

async fn delete_token(
    State(service): State<Service>,
    actor: Actor,
    AppPath(secret): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_api_token(&actor, &secret).await?;
    Ok(StatusCode::OK)
}
