//! Index documents: `/api`, `/api/admin` and `/api/client`, links to what each API offers.

use axum::Json;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(api_index))
        .routes(routes!(admin_index))
        .routes(routes!(client_index))
}

/// Named links, served in this order as `{"<name>": {"uri": "<uri>"}, …}`.
#[derive(Clone, Copy)]
struct Links(&'static [(&'static str, &'static str)]);

/// A link.
#[derive(Serialize)]
struct Link {
    uri: &'static str,
}

impl Serialize for Links {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, uri) in self.0 {
            map.serialize_entry(name, &Link { uri })?;
        }
        map.end()
    }
}

/// The admin resources.
const ADMIN_LINKS: Links = Links(&[
    ("feature-toggles", "/api/admin/features"),
    ("feature-archive", "/api/admin/archive/features"),
    ("strategies", "/api/admin/strategies"),
    ("events", "/api/admin/events"),
    ("feature-types", "/api/admin/feature-types"),
    ("tags", "/api/admin/tags"),
    ("tag-types", "/api/admin/tag-types"),
    ("metrics", "/api/admin/metrics"),
    ("projects", "/api/admin/projects"),
    ("context", "/api/admin/context"),
    ("addons", "/api/admin/addons"),
]);

/// The client resources.
const CLIENT_LINKS: Links = Links(&[
    ("feature-toggles", "/api/client/features"),
    ("register", "/api/client/register"),
    ("metrics", "/api/client/metrics"),
]);

/// `GET /api`: the service and its two APIs.
#[derive(Serialize)]
struct ServiceIndex {
    name: &'static str,
    version: &'static str,
    uri: &'static str,
    links: ApiLinks,
}

/// The two APIs of [`ServiceIndex`].
#[derive(Serialize)]
struct ApiLinks {
    admin: ApiLink,
    client: ApiLink,
}

/// One API: where it is, and its resources.
#[derive(Serialize)]
struct ApiLink {
    uri: &'static str,
    links: Links,
}

/// `GET /api/admin` and `GET /api/client`: an API's resources.
#[derive(Serialize)]
struct ApiIndex {
    /// Always 3 (the Unleash API version spoken).
    version: u32,
    links: Links,
}

/// Links to the admin and client APIs.
#[utoipa::path(
    get,
    path = "/api",
    tag = "service",
    responses((status = 200, description = "Links to the admin and client APIs", body = Object))
)]
async fn api_index() -> Json<ServiceIndex> {
    Json(ServiceIndex {
        name: "flagpole",
        version: env!("CARGO_PKG_VERSION"),
        uri: "/api",
        links: ApiLinks {
            admin: ApiLink {
                uri: "/api/admin",
                links: ADMIN_LINKS,
            },
            client: ApiLink {
                uri: "/api/client",
                links: CLIENT_LINKS,
            },
        },
    })
}

/// Links to the admin resources.
#[utoipa::path(
    get,
    path = "/api/admin",
    tag = "service",
    responses((status = 200, description = "Links to the admin resources", body = Object))
)]
async fn admin_index() -> Json<ApiIndex> {
    Json(ApiIndex {
        version: 3,
        links: ADMIN_LINKS,
    })
}

/// Links to the client resources.
#[utoipa::path(
    get,
    path = "/api/client",
    tag = "service",
    responses((status = 200, description = "Links to the client resources", body = Object))
)]
async fn client_index() -> Json<ApiIndex> {
    Json(ApiIndex {
        version: 3,
        links: CLIENT_LINKS,
    })
}
