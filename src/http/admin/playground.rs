//! `POST /api/admin/playground` (Unleash 7): every toggle of some projects evaluated for a
//! context in one environment, each with its explanation (`evaluation::playground`).

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult};
use crate::evaluation::frontend::Scope;
use crate::evaluation::playground::{self, PlaygroundFeature};
use crate::evaluation::EvaluationContext;
use crate::http::extract::AppJson;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(evaluate_playground))
}

/// What to evaluate.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaygroundRequest {
    /// `"*"` (the default) or a list of project ids.
    #[schema(value_type = Option<Object>, example = json!("*"))]
    projects: Option<Value>,
    /// An existing environment.
    #[schema(example = "default")]
    environment: String,
    /// The Unleash context (`appName`, `userId`, …, `properties`); its `environment` is the
    /// one evaluated when absent.
    #[schema(value_type = Option<crate::http::evaluation::ContextFields>, example = json!({"appName": "web", "userId": "u1"}))]
    context: Option<Value>,
}

/// The answer: the input as understood, and each toggle's verdict.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlaygroundResponse {
    #[schema(value_type = Object)]
    input: Value,
    features: Vec<PlaygroundFeature>,
}

/// The projects a request names: `None` for all.
fn projects_of(projects: Option<Value>) -> ApiResult<Option<Vec<String>>> {
    match projects {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "*" => Ok(None),
        Some(Value::Array(list)) => list
            .into_iter()
            .map(|p| match p {
                Value::String(s) => Ok(s),
                _ => Err(ApiError::bad_request(
                    "projects",
                    "\"projects\" must be \"*\" or a list of project ids",
                )),
            })
            .collect::<ApiResult<Vec<String>>>()
            .map(|list| (!list.iter().any(|p| p == "*")).then_some(list)),
        Some(_) => Err(ApiError::bad_request(
            "projects",
            "\"projects\" must be \"*\" or a list of project ids",
        )),
    }
}

/// Evaluates every toggle of `projects` in `environment` for `context`, with each strategy's,
/// constraint's and segment's result.
#[utoipa::path(
    post,
    path = "/playground",
    tag = "toggles",
    request_body = PlaygroundRequest,
    responses(
        (status = 200, description = "Each toggle's answer and explanation", body = PlaygroundResponse),
        (status = 404, description = "No such environment", body = crate::error::ErrorBody),
    )
)]
async fn evaluate_playground(
    State(state): State<AppState>,
    AppJson(request): AppJson<PlaygroundRequest>,
) -> ApiResult<Json<PlaygroundResponse>> {
    let projects = projects_of(request.projects)?;
    let config = state.snapshot.state();
    if !config.environments.contains_key(&request.environment) {
        return Err(ApiError::NotFound(format!(
            "No environment named {:?}",
            request.environment
        )));
    }
    let mut context = match request.context {
        None | Some(Value::Null) => EvaluationContext::default(),
        Some(Value::Object(object)) => EvaluationContext::from_object(object)
            .map_err(|e| ApiError::bad_request("context", e.to_string()))?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "context",
                "\"context\" must be an object",
            ))
        }
    };
    if context.field("environment").is_none() {
        let mut object = match context.to_json() {
            Value::Object(object) => object,
            _ => serde_json::Map::new(),
        };
        object.insert(
            "environment".into(),
            Value::String(request.environment.clone()),
        );
        context = EvaluationContext::from_object(object)
            .map_err(|e| ApiError::bad_request("context", e.to_string()))?;
    }
    let engine = state
        .evaluator
        .engine(&request.environment)
        .await
        .ok_or_else(|| ApiError::Unavailable("The evaluation engine is not built yet".into()))?;
    let scope = Scope {
        environment: &request.environment,
        projects: projects.as_deref(),
    };
    let features = playground::explain(&config, &engine, &scope, &context.to_engine());
    Ok(Json(PlaygroundResponse {
        input: serde_json::json!({
            "environment": request.environment,
            "projects": projects.map_or(Value::String("*".into()), Value::from),
            "context": context.to_json(),
        }),
        features,
    }))
}
