//! OFREP 0.3.0, OpenFeature's remote evaluation protocol: `POST /ofrep/v1/evaluate/flags/{key}`
//! and the bulk `POST /ofrep/v1/evaluate/flags` (with ETag and 304). The token comes as
//! `Authorization: Bearer <token>`, a bare `Authorization: <token>`, or `X-API-Key`: a
//! frontend, client or backend token, whose environment and projects apply (an admin token:
//! `default`, every project). The body is
//! `{"context": {…}}` (`targetingKey` is the Unleash `userId`), `{}` or nothing; JSON with or
//! without `; charset=utf-8`. Every error body is `{key, errorCode, errorDetails}`. How
//! Unleash answers map to OFREP's is in `evaluation::ofrep`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::evaluation::{if_none_match, json_with_etag, not_modified, read_body, EvaluationApi};
use crate::auth::rate_limit::LimitGroup;
use crate::auth::EvaluationCaller;
use crate::error::ApiError;
use crate::evaluation::frontend::{self, AnswerKind, Scope};
use crate::evaluation::ofrep::{self, ErrorCode, OfrepBulk, OfrepEvaluation, OfrepFailure};
use crate::evaluation::{ContextError, EnvironmentEngine, EvaluationContext};

/// A failed OFREP request: its status and headers come from the API's error, its body is
/// OFREP's.
struct OfrepError {
    key: String,
    code: ErrorCode,
    error: ApiError,
}

impl OfrepError {
    fn of(key: &str, error: ApiError) -> Self {
        let code = match error.status() {
            StatusCode::NOT_FOUND => ErrorCode::FlagNotFound,
            StatusCode::BAD_REQUEST => ErrorCode::InvalidContext,
            _ => ErrorCode::General,
        };
        Self {
            key: key.to_string(),
            code,
            error,
        }
    }

    fn context(key: &str, error: ContextError) -> Self {
        let code = match error {
            ContextError::Parse(_) => ErrorCode::ParseError,
            ContextError::Invalid(_) => ErrorCode::InvalidContext,
        };
        Self {
            key: key.to_string(),
            code,
            error: ApiError::bad_request("context", error.to_string()),
        }
    }
}

impl IntoResponse for OfrepError {
    fn into_response(self) -> Response<Body> {
        let body = OfrepFailure {
            key: self.key,
            error_code: self.code,
            error_details: self.error.to_string(),
        };
        let mut response = self.error.into_response();
        *response.body_mut() = Body::from(serde_json::to_vec(&body).unwrap_or_default());
        response.headers_mut().remove(header::CONTENT_LENGTH);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// The caller, its context and its environment's engine.
async fn prepare(
    api: &EvaluationApi,
    req: Request,
    key: &str,
) -> Result<
    (
        EvaluationCaller,
        EvaluationContext<'static>,
        Arc<EnvironmentEngine>,
    ),
    OfrepError,
> {
    let caller = api
        .admit(&req, true, LimitGroup::ClientFeatures)
        .map_err(|e| OfrepError::of(key, e))?;
    api.ready().map_err(|e| OfrepError::of(key, e))?;
    let address = crate::http::extract::client_addr(&req, api.trust_proxy);
    let bytes = read_body(req.into_body(), api.body_timeout)
        .await
        .map_err(|e| OfrepError::of(key, e))?;
    let mut context =
        EvaluationContext::from_json_body(&bytes).map_err(|e| OfrepError::context(key, e))?;
    if let Some(targeting_key) = context.take_property("targetingKey") {
        context.default_user_id(&targeting_key);
    }
    let engine = api
        .evaluator
        .engine(&caller.environment)
        .await
        .ok_or_else(|| {
            OfrepError::of(
                key,
                ApiError::Unavailable("The evaluation engine is not built yet".into()),
            )
        })?;
    // The caller's address as text only where an answer can depend on it.
    if engine.reads_remote_address && !context.has_remote_address() {
        context.default_remote_address(address.map(|ip| ip.to_string()).as_deref());
    }
    Ok((caller, context, engine))
}

/// One flag for the context: its value, variant, reason and metadata (see the mapping in
/// docs/api.md: `value` is whether the toggle is on, or the variant's payload for a toggle
/// whose variants carry payloads).
#[utoipa::path(
    post,
    path = "/ofrep/v1/evaluate/flags/{key}",
    tag = "ofrep",
    params(("key" = String, Path, description = "The toggle's name")),
    request_body(content = OfrepRequest, description = "The context (may be absent or `{}`)"),
    responses(
        (status = 200, description = "The evaluation", body = OfrepEvaluation),
        (status = 400, description = "`PARSE_ERROR` (not JSON) or `INVALID_CONTEXT`", body = OfrepFailure),
        (status = 401, description = "No token, or an unknown or expired one", body = OfrepFailure),
        (status = 404, description = "`FLAG_NOT_FOUND`: no such toggle in the token's projects", body = OfrepFailure),
        (status = 408, description = "The body did not arrive in time", body = OfrepFailure),
        (status = 413, description = "The body is larger than allowed", body = OfrepFailure),
        (status = 429, description = "The rate limit is used up; `Retry-After` says when to retry", body = OfrepFailure),
        (status = 503, description = "The configuration is not loaded yet", body = OfrepFailure),
    )
)]
pub async fn evaluate_flag(
    State(api): State<Arc<EvaluationApi>>,
    Path(key): Path<String>,
    req: Request,
) -> Response<Body> {
    let (caller, context, engine) = match prepare(&api, req, &key).await {
        Ok(prepared) => prepared,
        Err(e) => return e.into_response(),
    };
    let scope = Scope {
        environment: &caller.environment,
        projects: caller.scope.as_deref(),
    };
    let Some(facts) = engine.toggle(&key).filter(|f| scope.sees(&f.project)) else {
        return OfrepError::of(
            &key,
            ApiError::NotFound(format!("No flag named {key:?} in this environment")),
        )
        .into_response();
    };
    api.metrics.evaluation.ofrep_flag.evaluated.inc();
    let body = ofrep::flag_json(&engine, facts, &context.to_engine());
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Every flag the token sees, for the context. With `If-None-Match` naming the current ETag:
/// 304, before anything is evaluated.
#[utoipa::path(
    post,
    path = "/ofrep/v1/evaluate/flags",
    tag = "ofrep",
    request_body(content = OfrepRequest, description = "The context (may be absent or `{}`)"),
    params(("If-None-Match" = Option<String>, Header, description = "The ETag of the answer the caller holds")),
    responses(
        (status = 200, description = "Every flag's evaluation", body = OfrepBulk,
            headers(("ETag" = String, description = "Names the configuration, the token's scope and the context"))),
        (status = 304, description = "The answer the caller holds is current (nothing was evaluated)"),
        (status = 400, description = "`PARSE_ERROR` (not JSON) or `INVALID_CONTEXT`", body = OfrepFailure),
        (status = 401, description = "No token, or an unknown or expired one", body = OfrepFailure),
        (status = 408, description = "The body did not arrive in time", body = OfrepFailure),
        (status = 413, description = "The body is larger than allowed", body = OfrepFailure),
        (status = 429, description = "The rate limit is used up; `Retry-After` says when to retry", body = OfrepFailure),
        (status = 503, description = "The configuration is not loaded yet", body = OfrepFailure),
    )
)]
pub async fn evaluate_flags(State(api): State<Arc<EvaluationApi>>, req: Request) -> Response<Body> {
    let inm = if_none_match(req.headers());
    let (caller, context, engine) = match prepare(&api, req, "").await {
        Ok(prepared) => prepared,
        Err(e) => return e.into_response(),
    };
    let scope = Scope {
        environment: &caller.environment,
        projects: caller.scope.as_deref(),
    };
    // Before evaluating unless the clock or chance may change the answer for this context.
    let before = (!engine.volatility.varies_for(&context))
        .then(|| frontend::etag(AnswerKind::OfrepBulk, &engine, &scope, &context));
    let counts = &api.metrics.evaluation.ofrep_bulk;
    if let Some(response) = before.and_then(|etag| not_modified(inm.as_ref(), &etag)) {
        counts.not_modified.inc();
        return response;
    }
    counts.evaluated.inc();
    let body = ofrep::bulk_json(&engine, &scope, &context.to_engine());
    let etag = before.unwrap_or_else(|| frontend::body_etag(AnswerKind::OfrepBulk, &body));
    not_modified(inm.as_ref(), &etag).unwrap_or_else(|| json_with_etag(body, &etag))
}

/// An OFREP request's body (documentation only: `evaluation::context` reads it).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct OfrepRequest {
    /// `targetingKey` (the Unleash `userId`), the Unleash context fields, `properties`; any
    /// other field is a property. Values are strings, numbers or booleans.
    context: Option<super::evaluation::ContextFields>,
}

/// The OFREP routes.
pub fn router() -> OpenApiRouter<Arc<EvaluationApi>> {
    OpenApiRouter::default()
        .routes(routes!(evaluate_flag))
        .routes(routes!(evaluate_flags))
}
