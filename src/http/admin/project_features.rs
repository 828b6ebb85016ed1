//! The Unleash 5–7 per-project toggle routes (`/api/admin/projects/{id}/features…`): toggles
//! with their configuration in every environment, switched and given strategies per
//! environment. Statuses and bodies as Unleash 7's `feature-toggle-controller`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::feature_strategy::StrategySpec;
use crate::domain::feature_view::{FeatureStrategyView, ProjectFeatureView};
use crate::domain::toggle::Toggle;
use crate::domain::variant::{Variant, VariantSpec};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::service::feature_environments::{
    existing_project, toggle_in_project, NewProjectFeature, StrategyOrder, Target,
};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_project_features, create_project_feature))
        .routes(routes!(get_project_feature, archive_project_feature))
        .routes(routes!(feature_environment_on))
        .routes(routes!(feature_environment_off))
        .routes(routes!(list_feature_strategies, add_feature_strategy))
        .routes(routes!(
            get_feature_strategy,
            update_feature_strategy,
            delete_feature_strategy
        ))
        .routes(routes!(set_strategy_order))
        .routes(routes!(set_feature_environment_variants))
}

/// A project's toggles.
#[derive(Serialize, utoipa::ToSchema)]
struct ProjectFeatureList<'a> {
    /// Always 2.
    version: u32,
    features: Vec<ProjectFeatureView<'a>>,
}

/// The project a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ProjectPath {
    /// The project's id
    id: String,
}

/// A toggle of a project.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct FeaturePath {
    /// The project's id
    id: String,
    /// The toggle's name
    feature: String,
}

/// A toggle of a project in an environment.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct EnvironmentPath {
    /// The project's id
    id: String,
    /// The toggle's name
    feature: String,
    /// The environment's name
    environment: String,
}

impl EnvironmentPath {
    fn target(&self) -> Target<'_> {
        Target {
            project: &self.id,
            feature: &self.feature,
            environment: &self.environment,
        }
    }
}

/// A strategy of a toggle in an environment.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct StrategyPath {
    /// The project's id
    id: String,
    /// The toggle's name
    feature: String,
    /// The environment's name
    environment: String,
    /// The strategy's id
    strategy: String,
}

impl StrategyPath {
    fn target(&self) -> Target<'_> {
        Target {
            project: &self.id,
            feature: &self.feature,
            environment: &self.environment,
        }
    }
}

/// Renders `toggle` in the `featureSchema` shape from the current snapshot.
fn feature_json(service: &Service, toggle: &Toggle) -> ApiResult<Response> {
    let state = service.state()?;
    Ok(Json(ProjectFeatureView::new(toggle, &state)).into_response())
}

/// Renders strategy `id` of `toggle` in `environment`.
fn strategy_json(toggle: &Toggle, environment: &str, id: &str) -> ApiResult<Response> {
    let view = FeatureStrategyView::all(toggle, environment)
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| ApiError::Internal(format!("strategy {id} missing after its write")))?;
    Ok(Json(view).into_response())
}

/// Lists a project's active toggles with their environments.
#[utoipa::path(
    get,
    path = "/projects/{id}/features",
    tag = "environments",
    params(ProjectPath),
    responses(
        (status = 200, description = "The project's active toggles, by name", body = ProjectFeatureList),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
async fn list_project_features(
    State(service): State<Service>,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    existing_project(&state, &id)?;
    let features = state
        .features
        .values()
        .filter(|t| t.project == id)
        .map(|t| ProjectFeatureView::new(t, &state))
        .collect();
    Ok(Json(ProjectFeatureList {
        version: 2,
        features,
    })
    .into_response())
}

/// Creates a toggle in a project, off and without strategies in every environment.
#[utoipa::path(
    post,
    path = "/projects/{id}/features",
    tag = "environments",
    params(ProjectPath),
    request_body = NewProjectFeature,
    responses(
        (status = 201, description = "Created", body = ProjectFeatureView),
        (status = 400, description = "The body's problems, each with its path", body = ErrorBody),
        (status = 404, description = "No such project", body = ErrorBody),
        (status = 409, description = "The name is used by an active or archived toggle", body = ErrorBody),
    )
)]
async fn create_project_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
    AppJson(spec): AppJson<NewProjectFeature>,
) -> ApiResult<Response> {
    let toggle = service.create_project_toggle(&actor, &id, spec).await?;
    let mut response = feature_json(&service, &toggle)?;
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

/// Shows a toggle of a project with its configuration in every environment.
#[utoipa::path(
    get,
    path = "/projects/{id}/features/{feature}",
    tag = "environments",
    params(FeaturePath),
    responses(
        (status = 200, description = "The toggle", body = ProjectFeatureView),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn get_project_feature(
    State(service): State<Service>,
    AppPath(FeaturePath { id, feature }): AppPath<FeaturePath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let toggle = toggle_in_project(&state, &id, &feature)?;
    Ok(Json(ProjectFeatureView::new(toggle, &state)).into_response())
}

/// Archives a toggle of a project.
#[utoipa::path(
    delete,
    path = "/projects/{id}/features/{feature}",
    tag = "environments",
    params(FeaturePath),
    responses(
        (status = 202, description = "Archived"),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn archive_project_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(FeaturePath { id, feature }): AppPath<FeaturePath>,
) -> ApiResult<StatusCode> {
    toggle_in_project(&*service.state()?, &id, &feature)?;
    service.archive_toggle(&actor, &feature).await?;
    Ok(StatusCode::ACCEPTED)
}

/// Switches a toggle on in an environment; where no strategy is enabled there, a
/// `flexibleRollout` to 100% (stickiness `default`, group the toggle's name) is added first.
#[utoipa::path(
    post,
    path = "/projects/{id}/features/{feature}/environments/{environment}/on",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 200, description = "On"),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn feature_environment_on(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<EnvironmentPath>,
) -> ApiResult<StatusCode> {
    service
        .set_toggle_environment_enabled(&actor, path.target(), true)
        .await?;
    Ok(StatusCode::OK)
}

/// Switches a toggle off in an environment.
#[utoipa::path(
    post,
    path = "/projects/{id}/features/{feature}/environments/{environment}/off",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 200, description = "Off"),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn feature_environment_off(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<EnvironmentPath>,
) -> ApiResult<StatusCode> {
    service
        .set_toggle_environment_enabled(&actor, path.target(), false)
        .await?;
    Ok(StatusCode::OK)
}

/// A toggle's strategies in an environment, in evaluation order.
#[utoipa::path(
    get,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 200, description = "The strategies", body = Vec<FeatureStrategyView>),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn list_feature_strategies(
    State(service): State<Service>,
    AppPath(path): AppPath<EnvironmentPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let toggle = toggle_in_project(&state, &path.id, &path.feature)?;
    crate::service::environments::existing_environment(&state, &path.environment)?;
    Ok(Json(FeatureStrategyView::all(toggle, &path.environment)).into_response())
}

/// Adds a strategy to a toggle in an environment (at `sortOrder` when sent, else last).
#[utoipa::path(
    post,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies",
    tag = "environments",
    params(EnvironmentPath),
    request_body = StrategySpec,
    responses(
        (status = 200, description = "Added", body = FeatureStrategyView),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn add_feature_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<EnvironmentPath>,
    AppJson(spec): AppJson<StrategySpec>,
) -> ApiResult<Response> {
    let (toggle, id) = service
        .add_toggle_strategy(&actor, path.target(), spec)
        .await?;
    strategy_json(&toggle, &path.environment, &id)
}

/// Shows a strategy of a toggle in an environment.
#[utoipa::path(
    get,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies/{strategy}",
    tag = "environments",
    params(StrategyPath),
    responses(
        (status = 200, description = "The strategy", body = FeatureStrategyView),
        (status = 404, description = "No such project, toggle in it, environment or strategy", body = ErrorBody),
    )
)]
async fn get_feature_strategy(
    State(service): State<Service>,
    AppPath(path): AppPath<StrategyPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let toggle = toggle_in_project(&state, &path.id, &path.feature)?;
    crate::service::environments::existing_environment(&state, &path.environment)?;
    let view = FeatureStrategyView::all(toggle, &path.environment)
        .into_iter()
        .find(|s| s.id == path.strategy)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "Could not find strategy \"{}\" on \"{}\" in \"{}\"",
                path.strategy, path.feature, path.environment
            ))
        })?;
    Ok(Json(view).into_response())
}

/// Replaces a strategy of a toggle in an environment (it keeps its id and position).
#[utoipa::path(
    put,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies/{strategy}",
    tag = "environments",
    params(StrategyPath),
    request_body = StrategySpec,
    responses(
        (status = 200, description = "Replaced", body = FeatureStrategyView),
        (status = 404, description = "No such project, toggle in it, environment or strategy", body = ErrorBody),
    )
)]
async fn update_feature_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<StrategyPath>,
    AppJson(spec): AppJson<StrategySpec>,
) -> ApiResult<Response> {
    let toggle = service
        .update_toggle_strategy(&actor, path.target(), &path.strategy, spec)
        .await?;
    strategy_json(&toggle, &path.environment, &path.strategy)
}

/// Removes a strategy of a toggle in an environment.
#[utoipa::path(
    delete,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies/{strategy}",
    tag = "environments",
    params(StrategyPath),
    responses(
        (status = 200, description = "Removed"),
        (status = 404, description = "No such project, toggle in it, environment or strategy", body = ErrorBody),
    )
)]
async fn delete_feature_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<StrategyPath>,
) -> ApiResult<StatusCode> {
    service
        .delete_toggle_strategy(&actor, path.target(), &path.strategy)
        .await?;
    Ok(StatusCode::OK)
}

/// Reorders a toggle's strategies in an environment: `[{id, sortOrder}]`; strategies not
/// listed keep their place relative to the others.
#[utoipa::path(
    post,
    path = "/projects/{id}/features/{feature}/environments/{environment}/strategies/set-sort-order",
    tag = "environments",
    params(EnvironmentPath),
    request_body = Vec<StrategyOrder>,
    responses(
        (status = 200, description = "Reordered"),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn set_strategy_order(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<EnvironmentPath>,
    AppJson(orders): AppJson<Vec<StrategyOrder>>,
) -> ApiResult<StatusCode> {
    service
        .set_toggle_strategy_order(&actor, path.target(), orders)
        .await?;
    Ok(StatusCode::OK)
}

/// A toggle's variants in one environment, as Unleash 7 answers their replacement
/// (`featureVariantsSchema`).
#[derive(Serialize, utoipa::ToSchema)]
struct FeatureVariants<'a> {
    /// Always 1.
    version: u32,
    variants: &'a [Variant],
}

/// Replaces a toggle's variants in an environment (weights shared out to 1,000 as Unleash 7
/// saves them); the event is `feature-environment-variants-updated`.
#[utoipa::path(
    put,
    path = "/projects/{id}/features/{feature}/environments/{environment}/variants",
    tag = "environments",
    params(EnvironmentPath),
    request_body = Vec<VariantSpec>,
    responses(
        (status = 200, description = "The environment's variants now", body = FeatureVariants),
        (status = 400, description = "A variant is invalid (each problem at `variants[i].…`), or the weights cannot be shared out (at `variants`)", body = ErrorBody),
        (status = 404, description = "No such project, toggle in it, or environment", body = ErrorBody),
    )
)]
async fn set_feature_environment_variants(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<EnvironmentPath>,
    AppJson(specs): AppJson<Vec<VariantSpec>>,
) -> ApiResult<Response> {
    let toggle = service
        .set_toggle_environment_variants(&actor, path.target(), specs)
        .await?;
    Ok(Json(FeatureVariants {
        version: 1,
        variants: &toggle.environment(&path.environment).variants,
    })
    .into_response())
}
