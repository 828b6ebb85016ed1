//! The OpenAPI document (`GET /api/openapi.json`): it documents every route the service serves,
//! and every route it documents is served.

use std::path::{Path, PathBuf};

use reqwest::Method;
use serde_json::Value;

use crate::common::{send, Backend, TestApp};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Routes registered around `utoipa_axum::routes!` would be served without being documented:
/// only the document's own route (in `http/openapi.rs`) may be registered directly.
#[test]
fn routes_are_only_registered_through_the_documented_macro() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut offenders = Vec::new();
    for file in files {
        // The admin UI's pages are HTML for people, not part of the API it documents.
        let in_ui = file.strip_prefix(&root).is_ok_and(|p| p.starts_with("ui"));
        if file.ends_with("http/openapi.rs") || in_ui {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if [
                ".route(",
                ".route_service(",
                ".nest_service(",
                "Router::new()",
            ]
            .iter()
            .any(|call| code.contains(call))
            {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "routes registered outside utoipa_axum::routes! (undocumented):\n{}",
        offenders.join("\n")
    );
}

/// A concrete path for a documented one: each `{param}` replaced by its example, or `x`.
fn concrete_path(path: &str, operation: &Value) -> String {
    let mut out = path.to_string();
    for param in operation["parameters"].as_array().into_iter().flatten() {
        if param["in"] != "path" {
            continue;
        }
        let name = param["name"].as_str().expect("parameter name");
        let value = param["example"]
            .as_str()
            .or_else(|| param["schema"]["example"].as_str())
            .unwrap_or("x");
        out = out.replace(&format!("{{{name}}}"), value);
    }
    assert!(
        !out.contains('{'),
        "a path parameter is not declared: {path}"
    );
    out
}

async fn document_lists_every_served_route(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = send(app.anonymous(Method::GET, "/api/openapi.json"))
        .await
        .expect(200);
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/json")
    );
    let document = reply.json;
    assert_eq!(document["openapi"], "3.1.0");
    let schemes = &document["components"]["securitySchemes"];
    for scheme in ["basicAuth", "apiToken", "session"] {
        assert!(schemes[scheme].is_object(), "security scheme {scheme}");
    }
    assert!(document["components"]["schemas"]["Error"].is_object());

    let paths = document["paths"].as_object().expect("paths");
    // The spec's endpoints, one per resource, so a resource router left unmerged shows up.
    for (method, path) in [
        ("get", "/api/client/features"),
        ("post", "/api/client/register"),
        ("post", "/api/client/metrics"),
        ("get", "/api/admin/features"),
        ("post", "/api/admin/archive/revive/{name}"),
        ("get", "/api/admin/strategies"),
        ("get", "/api/admin/events"),
        ("get", "/api/admin/tags"),
        ("get", "/api/admin/tag-types"),
        ("get", "/api/admin/metrics/feature-toggles"),
        ("get", "/api/admin/projects"),
        ("put", "/api/projects/{id}"),
        ("get", "/api/admin/context"),
        ("put", "/api/context/{name}"),
        ("post", "/api/admin/state/import"),
        ("get", "/api/admin/addons"),
        ("post", "/api/addons"),
        ("get", "/api/admin/api-tokens"),
        ("post", "/api/admin/login"),
        ("get", "/health"),
        ("get", "/internal-backstage/prometheus"),
        ("get", "/api/openapi.json"),
    ] {
        assert!(
            paths.get(path).is_some_and(|item| item[method].is_object()),
            "{method} {path} is not documented"
        );
    }

    // `GET /logout` redirects; its own answer is what counts.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client");
    let mut operations = 0;
    let mut ids = std::collections::HashSet::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("path item") {
            if !["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            operations += 1;
            let id = operation["operationId"].as_str().expect("operationId");
            assert!(ids.insert(id.to_string()), "operationId {id} is not unique");
            assert!(
                operation["responses"]
                    .as_object()
                    .is_some_and(|r| r.keys().any(|s| s.starts_with('2') || s.starts_with('3'))),
                "{method} {path} documents no success"
            );
            // What the document says about credentials is what the service does: an
            // operation that names basic auth answers an anonymous caller 401, the others do
            // not (the client API is open in the insecure mode).
            let identified = operation["security"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|scheme| scheme.get("basicAuth").is_some());
            if identified {
                assert!(
                    operation["responses"]["401"].is_object(),
                    "{method} {path} documents no 401"
                );
            }
            let url = concrete_path(path, operation);
            let anonymous = no_redirects
                .request(method.clone(), format!("{}{url}", app.base))
                .body("{}");
            let status = answer(anonymous).await.0;
            assert_eq!(
                status == 401,
                identified,
                "{method} {path}: anonymous caller got {status}"
            );
            // Served: the router's fallbacks answer 404 "No route for …" and 405 "method not
            // allowed on this path"; a handler never gives those messages.
            let request = no_redirects
                .request(method.clone(), format!("{}{url}", app.base))
                .basic_auth("admin", Some(""))
                .body("{}");
            let (status, message) = answer(request).await;
            assert!(
                !message.starts_with("No route for")
                    && message != "method not allowed on this path",
                "{method} {path} is documented but not served ({status}: {message})"
            );
        }
    }
    assert!(operations >= 95, "only {operations} operations documented");
}

/// The status of a request and the `message` of its JSON body, if any; an event stream
/// (which never ends) is not read.
async fn answer(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let streamed = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streamed {
        return (status, String::new());
    }
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    (status, body["message"].as_str().unwrap_or("").to_string())
}

crate::conformance!(
    document_lists_every_served_route,
    example_bodies_are_accepted,
    replacements_leave_the_identity_to_the_path
);

/// `/api/docs` renders the document with files compiled into the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_is_served_from_the_binary() {
    let app = TestApp::spawn(&Backend::embedded()).await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client");
    let page = send(no_redirects.get(format!("{}/api/docs", app.base)))
        .await
        .expect(303);
    assert_eq!(
        page.header("location").as_deref(),
        Some("/api/docs/index.html")
    );
    let index = send(app.anonymous(Method::GET, "/api/docs/index.html"))
        .await
        .expect(200);
    assert_eq!(index.header("content-type").as_deref(), Some("text/html"));
    let html = String::from_utf8_lossy(&index.bytes);
    assert!(html.contains("swagger-initializer.js"), "{html}");
    let policy = index.header("content-security-policy").expect("policy");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    let init = send(app.anonymous(Method::GET, "/api/docs/swagger-initializer.js"))
        .await
        .expect(200);
    assert!(String::from_utf8_lossy(&init.bytes).contains("\"url\": \"/api/openapi.json\""));
    let missing = send(app.anonymous(Method::GET, "/api/docs/nothing.js"))
        .await
        .expect(404);
    assert!(missing.error_message().contains("nothing.js"));
    app.stop().await;
}

/// A body for `schema` made of what the document itself says: each required property (and
/// each one with an example) from its example, the first branch of a `oneOf`, one item of an
/// array. What the schemas promise is that such a body passes validation.
fn example_body(schema: &Value, document: &Value) -> Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or("");
        return example_body(&document["components"]["schemas"][name], document);
    }
    if let Some(example) = schema.get("example") {
        return example.clone();
    }
    if let Some(first) = schema["oneOf"].as_array().and_then(|b| b.first()) {
        return example_body(first, document);
    }
    if let Some(choices) = schema["enum"].as_array() {
        return choices[0].clone();
    }
    let kinds: Vec<&str> = match &schema["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => vec!["object"],
    };
    if kinds.contains(&"object") {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut body = serde_json::Map::new();
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            if required.contains(&name.as_str()) || property.get("example").is_some() {
                body.insert(name.clone(), example_body(property, document));
            }
        }
        Value::Object(body)
    } else if kinds.contains(&"array") {
        Value::Array(vec![example_body(&schema["items"], document)])
    } else if schema["format"] == "date-time" {
        Value::String("2026-01-31T12:00:00Z".into())
    } else if kinds.contains(&"string") {
        Value::String("example".into())
    } else if kinds.contains(&"boolean") {
        Value::Bool(true)
    } else {
        Value::from(1)
    }
}

/// For every creating operation, the body built from the document's schema and examples is
/// accepted on a fresh install (so generated valid bodies get past validation).
async fn example_bodies_are_accepted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let document = send(app.anonymous(Method::GET, "/api/openapi.json"))
        .await
        .expect(200)
        .json;
    // Names checked before the creations that take them.
    for (method, path, concrete) in [
        (
            "post",
            "/api/admin/features/{name}",
            "/api/admin/features/validate",
        ),
        (
            "post",
            "/api/admin/context/{name}",
            "/api/admin/context/validate",
        ),
        (
            "post",
            "/api/admin/projects/{id}",
            "/api/admin/projects/validate",
        ),
        (
            "post",
            "/api/admin/tag-types/{name}",
            "/api/admin/tag-types/validate",
        ),
        ("post", "/api/admin/features", "/api/admin/features"),
        ("post", "/api/admin/projects", "/api/admin/projects"),
        ("post", "/api/admin/context", "/api/admin/context"),
        ("post", "/api/admin/strategies", "/api/admin/strategies"),
        ("post", "/api/admin/tag-types", "/api/admin/tag-types"),
        ("post", "/api/admin/tags", "/api/admin/tags"),
        (
            "post",
            "/api/admin/features/{name}/tags",
            "/api/admin/features/my-feature/tags",
        ),
        ("post", "/api/admin/api-tokens", "/api/admin/api-tokens"),
        ("post", "/api/admin/addons", "/api/admin/addons"),
        ("post", "/api/addons", "/api/addons"),
        ("post", "/api/client/register", "/api/client/register"),
        ("post", "/api/client/metrics", "/api/client/metrics"),
        // Replacements, of records created above or that every installation has.
        (
            "put",
            "/api/admin/features/{name}",
            "/api/admin/features/my-feature",
        ),
        (
            "put",
            "/api/admin/projects/{id}",
            "/api/admin/projects/default",
        ),
        (
            "put",
            "/api/admin/strategies/{name}",
            "/api/admin/strategies/byRegion",
        ),
        ("put", "/api/projects/{id}", "/api/projects/default"),
        (
            "put",
            "/api/admin/context/{name}",
            "/api/admin/context/environment",
        ),
        ("put", "/api/context/{name}", "/api/context/environment"),
        (
            "put",
            "/api/admin/tag-types/{name}",
            "/api/admin/tag-types/simple",
        ),
    ] {
        let operation = &document["paths"][path][method];
        let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{method} {path} has no JSON body");
        // The body as a whole, then (a body of several shapes) each shape's.
        let mut bodies = vec![example_body(schema, &document)];
        let branches = resolve(schema, &document)["oneOf"].as_array().cloned();
        for branch in branches.into_iter().flatten().skip(1) {
            bodies.push(example_body(&branch, &document));
        }
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        for body in bodies {
            let reply = send(app.admin(method.clone(), concrete).json(&body)).await;
            assert!(
                (200..300).contains(&reply.status.as_u16()),
                "{method} {path} refused its example body {body}: {} {}",
                reply.status,
                reply.json
            );
        }
    }
    app.stop().await;
}

/// `schema`, or the component it refers to.
fn resolve<'a>(schema: &'a Value, document: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap_or("");
            &document["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// A body that creates a record must name it; one that replaces the record its path names is
/// documented without the name (so that no generated body names another record), yet one that
/// repeats the path's name, as the reference server's UI does, is accepted, and one that names
/// another record is refused.
async fn replacements_leave_the_identity_to_the_path(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let document = send(app.anonymous(Method::GET, "/api/openapi.json"))
        .await
        .expect(200)
        .json;
    let body_schema = |method: &str, path: &str| {
        let operation = &document["paths"][path][method];
        resolve(
            &operation["requestBody"]["content"]["application/json"]["schema"],
            &document,
        )
        .clone()
    };
    for (path, identity) in [
        ("/api/admin/features", "name"),
        ("/api/admin/strategies", "name"),
        ("/api/admin/projects", "id"),
        ("/api/admin/context", "name"),
        ("/api/admin/tag-types", "name"),
    ] {
        let schema = body_schema("post", path);
        assert!(
            schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&Value::from(identity))),
            "POST {path} does not require {identity}: {schema}"
        );
        assert_eq!(
            schema["properties"][identity]["type"], "string",
            "POST {path}: {identity} may be null"
        );
    }
    let strategies = serde_json::json!([{"name": "default"}]);
    send(
        app.admin(Method::POST, "/api/admin/features")
            .json(&serde_json::json!({"name": "my-feature", "strategies": strategies})),
    )
    .await
    .expect(200);
    send(
        app.admin(Method::POST, "/api/admin/strategies")
            .json(&serde_json::json!({"name": "my-strategy", "parameters": []})),
    )
    .await
    .expect(201);
    for (path, identity, concrete, body) in [
        (
            "/api/admin/features/{name}",
            "name",
            "/api/admin/features/my-feature",
            serde_json::json!({"strategies": strategies}),
        ),
        (
            "/api/admin/strategies/{name}",
            "name",
            "/api/admin/strategies/my-strategy",
            serde_json::json!({"parameters": []}),
        ),
        (
            "/api/admin/projects/{id}",
            "id",
            "/api/admin/projects/default",
            serde_json::json!({"name": "Default"}),
        ),
        (
            "/api/projects/{id}",
            "id",
            "/api/projects/default",
            serde_json::json!({"name": "Default"}),
        ),
        (
            "/api/admin/context/{name}",
            "name",
            "/api/admin/context/environment",
            serde_json::json!({}),
        ),
        (
            "/api/context/{name}",
            "name",
            "/api/context/environment",
            serde_json::json!({}),
        ),
        (
            "/api/admin/tag-types/{name}",
            "name",
            "/api/admin/tag-types/simple",
            serde_json::json!({}),
        ),
    ] {
        let schema = body_schema("put", path);
        assert!(
            schema["properties"].is_object() && schema["properties"].get(identity).is_none(),
            "PUT {path} documents {identity}: {schema}"
        );
        assert_eq!(schema["additionalProperties"], false, "PUT {path}");
        let own = concrete.rsplit('/').next().expect("segment");
        let mut repeated = body.clone();
        repeated[identity] = Value::from(own);
        send(app.admin(Method::PUT, concrete).json(&repeated))
            .await
            .expect(200);
        let mut other = body;
        other[identity] = Value::from("another-one");
        let refused = send(app.admin(Method::PUT, concrete).json(&other))
            .await
            .expect(400);
        assert!(
            refused.error_message().contains("must match"),
            "PUT {path}: {}",
            refused.json
        );
    }
    app.stop().await;
}
