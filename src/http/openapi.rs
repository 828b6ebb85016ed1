//! The OpenAPI 3.1 document of the whole API, served at `GET /api/openapi.json`.
//!
//! Every route is registered through `utoipa_axum::routes!`, which takes its path and methods
//! from the handler's `#[utoipa::path]` annotation: a route cannot be served without being in
//! the document. This module adds what the operations share: the security schemes, the
//! responses every admin (or client) operation can give, and the document's own route.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, SecurityRequirement};
use utoipa::OpenApi as _;

use crate::error::ErrorBody;

/// Where the document is served.
pub const DOCUMENT_PATH: &str = "/api/openapi.json";

/// The parts written once: title, tags, and the error schema every response refers to.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Flagpole",
        description = "A feature-toggle service speaking the Unleash 3 client and admin API. \
                       Admin operations need an identity: HTTP basic auth or a session in the \
                       `insecure` mode, an admin API token in the `token` mode. Client \
                       operations need a client or admin token in the `token` mode. Request \
                       bodies: a field the schema does not list is refused with a 400 naming \
                       it, except the read-only fields responses carry (a record fetched from \
                       the API can be sent back as it is).",
        license(name = "Apache-2.0")
    ),
    paths(openapi_document),
    components(schemas(ErrorBody)),
    tags(
        (name = "client", description = "What SDKs poll and report"),
        (name = "frontend", description = "The Unleash frontend API: server-side evaluation for browsers and mobile apps, with a frontend token"),
        (name = "ofrep", description = "OpenFeature Remote Evaluation Protocol 0.3.0: flags evaluated for a context; error bodies are OFREP's `{key, errorCode, errorDetails}`"),
        (name = "toggles", description = "Feature toggles, their strategies, variants and tags"),
        (name = "archive", description = "Archived toggles"),
        (name = "strategies", description = "Strategy definitions"),
        (name = "tags", description = "Tags and tag types"),
        (name = "projects", description = "Projects"),
        (name = "environments", description = "Environments, and toggles per environment (Unleash 5–7 routes)"),
        (name = "dependencies", description = "Toggles that depend on a parent toggle"),
        (name = "context", description = "Context fields"),
        (name = "segments", description = "Segments: named sets of constraints strategies share"),
        (name = "events", description = "The audit log"),
        (name = "metrics", description = "Client usage: applications, instances, counts"),
        (name = "state", description = "State export and import"),
        (name = "addons", description = "Addons and their deliveries"),
        (name = "auth", description = "API tokens, sessions and the caller"),
        (name = "service", description = "Index documents, health and Prometheus metrics"),
    )
)]
struct ApiDoc;

/// The document the routers start from.
pub fn base() -> OpenApi {
    ApiDoc::openapi()
}

/// The OpenAPI document of this API (this document).
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "service",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
async fn openapi_document(State(document): State<Bytes>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document)
}

/// The shared parts added to `api`, serialised; `Err` only if serialisation fails.
pub fn finish(mut api: OpenApi) -> Result<Bytes, serde_json::Error> {
    add_shared_components(&mut api);
    for (path, item) in api.paths.paths.iter_mut() {
        let group = Group::of(path);
        for operation in operations(item) {
            group.complete(operation);
        }
    }
    let mut document = serde_json::to_value(&api)?;
    close_request_schemas(&mut document);
    typed_context_properties(&mut document);
    optional_legacy_fields(&mut document);
    Ok(Bytes::from(serde_json::to_vec(&document)?))
}

/// `AdminToggle` flattens an optional `LegacyStrategy` (archive listings only); utoipa renders
/// that as "the legacy pair or null", which no toggle object matches. Say what is served:
/// the pair's fields as optional properties.
fn optional_legacy_fields(document: &mut serde_json::Value) {
    let legacy = document["components"]["schemas"]["LegacyStrategy"]["properties"].clone();
    let part = &mut document["components"]["schemas"]["AdminToggle"]["allOf"][0];
    if legacy.is_object() && part.get("oneOf").is_some() {
        *part = serde_json::json!({
            "type": "object",
            "description": "Legacy fields, only on archive listings (spec §4.2).",
            "properties": legacy,
        });
    }
}

/// Request bodies whose handlers refuse a field they do not know (`domain::fields`), with the
/// creations' and replacements' schemas made from them (`http::request_docs::creation_schema`,
/// `replacement_schema`); the hand-written schemas (`ConstraintSpec`, `AddonSpec`, `NewToken`)
/// say so themselves.
const CLOSED_SCHEMAS: [&str; 18] = [
    "NewToggle",
    "ToggleUpdate",
    "StrategySpec",
    "VariantSpec",
    "PayloadSpec",
    "OverrideSpec",
    "TagSpec",
    "TagTypeSpec",
    "ContextFieldSpec",
    "ContextFieldUpdate",
    "ProjectSpec",
    "ProjectUpdate",
    "TagTypeUpdate",
    "NewStrategy",
    "StrategyUpdate",
    "ParameterSpec",
    "TokenExpiry",
    "Login",
];

/// Marks [`CLOSED_SCHEMAS`] `additionalProperties: false` (utoipa has no container attribute
/// for it but `deny_unknown_fields`, which these types cannot use: they collect the unknown
/// fields to name them, and take the read-only ones responses carry).
fn close_request_schemas(document: &mut serde_json::Value) {
    let schemas = &mut document["components"]["schemas"];
    for name in CLOSED_SCHEMAS {
        if let Some(schema) = schemas.get_mut(name).and_then(|s| s.as_object_mut()) {
            schema
                .entry("additionalProperties")
                .or_insert(serde_json::Value::Bool(false));
        }
    }
}

/// A context's other fields are properties, strings, numbers or booleans (utoipa has no
/// attribute for a typed `additionalProperties` on a struct).
fn typed_context_properties(document: &mut serde_json::Value) {
    if let Some(schema) = document["components"]["schemas"]
        .get_mut("ContextFields")
        .and_then(|s| s.as_object_mut())
    {
        schema.insert(
            "additionalProperties".into(),
            serde_json::json!({"$ref": "#/components/schemas/ContextValue"}),
        );
    }
}

/// The route serving `document` (the one route not registered by `routes!`: it serves the
/// document, so it cannot be part of building it; [`ApiDoc`] lists its path).
pub fn router<S: Clone + Send + Sync + 'static>(document: Bytes) -> Router<S> {
    Router::new()
        .route(DOCUMENT_PATH, get(openapi_document))
        .with_state(document)
}

/// Which credentials and shared failures an operation has, by its path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Identified admin operations.
    Admin,
    /// `/api/client/*`: open, or a client or admin token; the frontend API (`/api/frontend`,
    /// `/api/proxy`): open, or a frontend token.
    Client,
    /// `/ofrep/*`: open, or a frontend, client or backend token (three ways to send it); its
    /// operations document their own errors (OFREP's bodies).
    Ofrep,
    /// Index documents, health, metrics, login and logout: no credentials.
    Open,
}

/// Admin operations outside `/api/admin` (the spec's paths).
const ADMIN_SPEC_PREFIXES: [&str; 3] = ["/api/projects/", "/api/context/", "/api/addons"];

/// Admin paths that need no identity.
const OPEN_ADMIN_PATHS: [&str; 2] = ["/api/admin", "/api/admin/login"];

impl Group {
    fn of(path: &str) -> Self {
        if path.starts_with("/api/client/")
            || path.starts_with("/api/frontend")
            || path.starts_with("/api/proxy")
        {
            Group::Client
        } else if path.starts_with("/ofrep/") {
            Group::Ofrep
        } else if OPEN_ADMIN_PATHS.contains(&path) {
            Group::Open
        } else if path.starts_with("/api/admin/")
            || ADMIN_SPEC_PREFIXES.iter().any(|p| path.starts_with(p))
        {
            Group::Admin
        } else {
            Group::Open
        }
    }

    /// Adds the group's security requirements and the responses it shares.
    fn complete(self, operation: &mut Operation) {
        let mut shared: Vec<&str> = Vec::new();
        match self {
            Group::Admin => {
                operation.security = Some(vec![
                    SecurityRequirement::new("basicAuth", Vec::<String>::new()),
                    SecurityRequirement::new("apiToken", Vec::<String>::new()),
                    SecurityRequirement::new("session", Vec::<String>::new()),
                ]);
                shared.extend(["401", "403", "429", "503", "504"]);
            }
            Group::Client => {
                operation.security = Some(vec![
                    SecurityRequirement::new("apiToken", Vec::<String>::new()),
                    // `--client-auth open` (and every mode but `token`): no credentials.
                    SecurityRequirement::default(),
                ]);
                // 403: a frontend token (it is for the frontend API).
                shared.extend(["401", "403", "429", "503"]);
                if operation.request_body.is_some() {
                    shared.push("408");
                }
            }
            Group::Ofrep => {
                operation.security = Some(vec![
                    SecurityRequirement::new("apiToken", Vec::<String>::new()),
                    SecurityRequirement::new("bearerToken", Vec::<String>::new()),
                    SecurityRequirement::new("apiKeyHeader", Vec::<String>::new()),
                    SecurityRequirement::default(),
                ]);
                return;
            }
            Group::Open => {}
        }
        if let Some(RefOr::T(body)) = &operation.request_body {
            shared.extend(["400", "413"]);
            // Bodies read as JSON only refuse other media types (the import takes several).
            if body.content.keys().all(|media| media == "application/json") {
                shared.push("415");
            }
        }
        for status in shared {
            operation
                .responses
                .responses
                .entry(status.to_string())
                .or_insert_with(|| RefOr::Ref(Ref::from_response_name(status)));
        }
    }
}

/// Every operation of a path item.
fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.patch.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// The statuses operations share, each with the error body.
const SHARED_RESPONSES: [(&str, &str); 9] = [
    (
        "400",
        "The input is malformed or breaks a rule; `details` lists every problem",
    ),
    (
        "401",
        "No credentials, unknown or expired ones (`WWW-Authenticate` says which kind)",
    ),
    (
        "403",
        "Not allowed: a client or frontend token on an admin operation, a frontend token on \
         the client API, or what the operation's rules refuse (see its description)",
    ),
    ("413", "The body is larger than allowed"),
    ("415", "The body is not JSON"),
    (
        "429",
        "The caller's rate limit is used up; `Retry-After` says when to retry",
    ),
    (
        "503",
        "The store is unreachable, or the configuration is not loaded yet; nothing was \
         changed unless the message says the write is uncertain",
    ),
    (
        "504",
        "The request took longer than allowed; a write may still complete as a whole",
    ),
    ("408", "The body did not arrive in time"),
];

fn add_shared_components(api: &mut OpenApi) {
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "basicAuth",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)),
    );
    components.add_security_scheme(
        "apiToken",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "Authorization",
            "An API token, raw or as `Bearer <token>`",
        ))),
    );
    components.add_security_scheme(
        "bearerToken",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    components.add_security_scheme(
        "apiKeyHeader",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-API-Key",
            "An API token (OFREP)",
        ))),
    );
    components.add_security_scheme(
        "session",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            crate::auth::session::COOKIE,
            "The session cookie of `POST /api/admin/login` (insecure mode)",
        ))),
    );
    for (status, description) in SHARED_RESPONSES {
        let response = ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                Content::new(Some(Ref::from_schema_name("Error"))),
            )
            .build();
        components
            .responses
            .insert(status.to_string(), response.into());
    }
}
