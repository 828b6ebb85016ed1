//! `/api/admin/feature-types`: the read-only list of toggle types (API-FACTS §4.1).

use axum::Json;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::feature_type::{FeatureType, FEATURE_TYPES};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(list_feature_types))
}

/// The toggle types.
#[derive(Serialize, utoipa::ToSchema)]
struct FeatureTypeList {
    /// Always 1.
    version: u32,
    types: &'static [FeatureType],
}

/// Lists the toggle types.
#[utoipa::path(
    get,
    path = "/feature-types",
    tag = "toggles",
    responses((status = 200, description = "The toggle types", body = FeatureTypeList))
)]
async fn list_feature_types() -> Json<FeatureTypeList> {
    Json(FeatureTypeList {
        version: 1,
        types: &FEATURE_TYPES,
    })
}
