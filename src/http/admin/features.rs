//! `/api/admin/features`: toggles and the tags on them (spec §4.2).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::tag::{Tag, TagRef, TagSpec};
use crate::domain::toggle::{Toggle, ToggleSpec};
use crate::domain::views::AdminToggle;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{validate_route_name, AppJson, AppPath, ToggleFilter, ToggleNamePath};
use crate::http::request_docs::{documented_body, NameToValidate, ValidateNameSegment};
use crate::http::response::Created;
use crate::service::{Actor, Service, ServiceError};
use crate::state::AppState;
use crate::store::StoreError;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_features, create_feature))
        .routes(routes!(
            get_feature,
            update_feature,
            archive_feature,
            validate_feature_name
        ))
        .routes(routes!(enable_feature))
        .routes(routes!(disable_feature))
        .routes(routes!(mark_stale))
        .routes(routes!(unmark_stale))
        .routes(routes!(list_feature_tags, add_feature_tag))
        .routes(routes!(remove_feature_tag))
}

/// `GET /api/admin/features` (and the archive listing).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct FeatureList<'a> {
    /// 2 for active toggles, 1 for the archive.
    pub version: u32,
    pub features: Vec<AdminToggle<'a>>,
}

/// A toggle's tags.
#[derive(Serialize, utoipa::ToSchema)]
struct FeatureTags<'a> {
    /// Always 1.
    version: u32,
    tags: Vec<&'a Tag>,
}

/// A tag on a toggle, as its path names it.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ToggleTagPath {
    /// The toggle's name
    name: String,
    /// The tag's type
    #[serde(rename = "type")]
    kind: String,
    /// The tag's value
    value: String,
}

/// Renders a toggle as the admin API shows it, tag ids from the current snapshot.
fn admin_json(service: &Service, toggle: &Toggle) -> ApiResult<Response> {
    let state = service.state()?;
    Ok(Json(AdminToggle::new(toggle, &state)).into_response())
}

/// A tag to filter by: `type:value`, neither side empty.
// Documentation only: the handler reads the query through `ToggleFilter`.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, pattern = "^[^:]+:[\\s\\S]+$", example = "simple:team-red")]
#[allow(dead_code)]
struct TagFilter(String);

/// A project to filter by: an id by the URL-friendly rule, 1 to 100 characters.
// Documentation only: the handler reads the query through `ToggleFilter`.
#[derive(utoipa::ToSchema)]
#[schema(
    value_type = String,
    min_length = 1,
    max_length = 100,
    pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
    example = "default"
)]
#[allow(dead_code)]
struct ProjectFilter(String);

/// Lists the active toggles, optionally filtered.
#[utoipa::path(
    get,
    path = "/features",
    tag = "toggles",
    params(
        ("tag[]" = inline(Option<Vec<TagFilter>>), Query, max_items = 100, description = "Only toggles with one of these tags (`type:value`)"),
        ("project" = inline(Option<Vec<ProjectFilter>>), Query, max_items = 100, description = "Only toggles of these projects"),
        ("namePrefix" = Option<String>, Query, description = "Only toggles whose name starts with this"),
    ),
    responses(
        (status = 200, description = "The active toggles", body = FeatureList),
        (status = 400, description = "A malformed filter", body = ErrorBody),
    )
)]
async fn list_features(
    State(service): State<Service>,
    ToggleFilter(filter): ToggleFilter,
) -> ApiResult<Response> {
    let state = service.state()?;
    let features: Vec<AdminToggle> = state
        .features
        .values()
        .filter(|t| filter.matches(t))
        .map(|t| AdminToggle::new(t, &state))
        .collect();
    // spec §4.2: the admin list is version 2.
    Ok(Json(FeatureList {
        version: 2,
        features,
    })
    .into_response())
}

/// Shows an active toggle.
#[utoipa::path(
    get,
    path = "/features/{name}",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "The toggle", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn get_feature(
    State(service): State<Service>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let toggle = state
        .features
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find feature \"{name}\"")))?;
    Ok(Json(AdminToggle::new(toggle, &state)).into_response())
}

documented_body! {
    /// The body of `POST /api/admin/features` as documented: a [`ToggleSpec`] that names the
    /// toggle.
    NewToggle = creation_schema::<ToggleSpec>("name", "A toggle as sent to create it.")
}

documented_body! {
    /// The body of `PUT` as documented: a [`ToggleSpec`] without the `name`, which the path
    /// gives.
    ToggleUpdate = replacement_schema::<ToggleSpec>(
        "name",
        "A toggle as sent to replace the one the path names. The name is the path's: a \
         body that repeats it must send that one.",
    )
}

/// Creates a toggle.
#[utoipa::path(
    post,
    path = "/features",
    tag = "toggles",
    request_body = NewToggle,
    responses(
        (status = 200, description = "Created", body = AdminToggle),
        (status = 403, description = "The name is used by an active or archived toggle", body = ErrorBody),
    )
)]
async fn create_feature(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ToggleSpec>,
) -> ApiResult<Response> {
    let toggle = service.create_toggle(&actor, spec).await?;
    // spec §4.2: 200 on success.
    admin_json(&service, &toggle)
}

/// `POST /api/admin/features/validate` with `{"name": …}`.
#[utoipa::path(
    post,
    path = "/features/{name}",
    tag = "toggles",
    operation_id = "validate_feature_name",
    summary = "`POST /api/admin/features/validate`: whether a name is free",
    params(ValidateNameSegment),
    request_body(content = NameToValidate, description = "`{\"name\": …}`"),
    responses(
        (status = 200, description = "The name is valid and free"),
        (status = 403, description = "The name is used by an active or archived toggle", body = ErrorBody),
        (status = 405, description = "Any segment but `validate`", body = ErrorBody),
    )
)]
async fn validate_feature_name(
    State(service): State<Service>,
    AppPath(ValidateNameSegment { name: segment }): AppPath<ValidateNameSegment>,
    AppJson(body): AppJson<serde_json::Map<String, Value>>,
) -> ApiResult<StatusCode> {
    let name = validate_route_name(&segment, &body, "name")?;
    service.validate_toggle_name(&name)?;
    Ok(StatusCode::OK)
}

/// Replaces a toggle.
#[utoipa::path(
    put,
    path = "/features/{name}",
    tag = "toggles",
    params((
        "name" = String,
        Path,
        description = "The toggle's name",
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$"
    )),
    request_body = ToggleUpdate,
    responses(
        (status = 200, description = "Replaced", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn update_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
    AppJson(spec): AppJson<ToggleSpec>,
) -> ApiResult<Response> {
    let toggle = service.update_toggle(&actor, &name, spec).await?;
    admin_json(&service, &toggle)
}

/// Archives a toggle.
#[utoipa::path(
    delete,
    path = "/features/{name}",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "Archived", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn archive_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let toggle = service.archive_toggle(&actor, &name).await?;
    admin_json(&service, &toggle)
}

/// Switches a toggle on.
#[utoipa::path(
    post,
    path = "/features/{name}/toggle/on",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "Switched on", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn enable_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let toggle = service.set_enabled(&actor, &name, true).await?;
    admin_json(&service, &toggle)
}

/// Switches a toggle off.
#[utoipa::path(
    post,
    path = "/features/{name}/toggle/off",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "Switched off", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn disable_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let toggle = service.set_enabled(&actor, &name, false).await?;
    admin_json(&service, &toggle)
}

/// Marks a toggle stale.
#[utoipa::path(
    post,
    path = "/features/{name}/stale/on",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "Marked stale", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn mark_stale(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let toggle = service.set_stale(&actor, &name, true).await?;
    admin_json(&service, &toggle)
}

/// Marks a toggle no longer stale.
#[utoipa::path(
    post,
    path = "/features/{name}/stale/off",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "No longer stale", body = AdminToggle),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn unmark_stale(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let toggle = service.set_stale(&actor, &name, false).await?;
    admin_json(&service, &toggle)
}

/// Lists a toggle's tags.
#[utoipa::path(
    get,
    path = "/features/{name}/tags",
    tag = "toggles",
    params(ToggleNamePath),
    responses(
        (status = 200, description = "The toggle's tags", body = FeatureTags),
        (status = 404, description = "No such active toggle", body = ErrorBody),
    )
)]
async fn list_feature_tags(
    State(service): State<Service>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let toggle = state
        .features
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find feature \"{name}\"")))?;
    let tags = toggle
        .tags
        .iter()
        .filter_map(|t| state.tag(t).map(|tag| &**tag))
        .collect();
    Ok(Json(FeatureTags { version: 1, tags }).into_response())
}

/// Tags a toggle (creating the tag when new).
#[utoipa::path(
    post,
    path = "/features/{name}/tags",
    tag = "toggles",
    params(ToggleNamePath),
    request_body = TagSpec,
    responses(
        (status = 201, description = "Tagged (the tag is created when new)", body = Tag),
        (status = 404, description = "No such active toggle or tag type", body = ErrorBody),
        (status = 409, description = "The toggle already has the tag", body = ErrorBody),
    )
)]
async fn add_feature_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
    AppJson(spec): AppJson<TagSpec>,
) -> ApiResult<Created<Tag>> {
    let tag = service.add_toggle_tag(&actor, &name, spec).await?;
    // spec §4.2: 201 when tagged.
    Ok(Created(tag))
}

/// Removes a tag from a toggle.
#[utoipa::path(
    delete,
    path = "/features/{name}/tags/{type}/{value}",
    tag = "toggles",
    params(ToggleTagPath),
    responses(
        (status = 200, description = "Removed (also when the toggle did not have it)"),
        (status = 404, description = "No such active toggle", body = ErrorBody),
        (status = 500, description = "The store is unreachable (spec §7); nothing was removed", body = ErrorBody),
    )
)]
async fn remove_feature_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ToggleTagPath { name, kind, value }): AppPath<ToggleTagPath>,
) -> ApiResult<StatusCode> {
    let tag = TagRef {
        kind: kind.into(),
        value: value.into(),
    };
    match service.remove_toggle_tag(&actor, &name, tag).await {
        Ok(()) => Ok(StatusCode::OK),
        // spec §7: removing a tag while the database cannot be reached is a 500.
        Err(ServiceError::Store(e @ (StoreError::Unavailable(_) | StoreError::Uncertain(_)))) => {
            tracing::warn!(error = %e, "tag removal failed");
            Err(ApiError::StoreUnreachable(
                "The store is unreachable; the tag was not removed. Try again shortly.".into(),
            ))
        }
        Err(e) => Err(e.into()),
    }
}
