//! What the SDKs poll: a server holding every specification file's document at once, each
//! under its own base URL.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Where an SDK finds one file's document.
#[derive(Debug, Clone)]
pub struct Served {
    /// The specification file's id (`SpecFile::id`).
    pub file_id: String,
    /// The Unleash API base URL, without a trailing slash (`http://host:port/.../api`): the
    /// SDKs append `/client/features`, `/client/register` and `/client/metrics` to it.
    pub api_url: String,
    /// The `Authorization` header the SDKs must send, if the server wants one.
    pub authorization: Option<String>,
}

/// A server the SDKs poll for the specification's documents.
///
/// It serves every file at once, each under its own base URL, so that one SDK process can
/// walk through the files without the server switching documents under it. An implementation
/// backed by Flagpole would import each document (e.g. `POST
/// /api/admin/state/import?environment=<one per file>`) and answer with the client API URL
/// and a client token for that environment.
pub trait SpecServer {
    /// Serves `files` (`(file id, client-features document)`), replacing whatever was served
    /// before, and says where each is, in the same order.
    async fn serve_all(&mut self, files: &[(String, Value)]) -> Vec<Served>;
}

/// Serves each document byte for byte as the specification writes it (after the delta replay
/// of `spec::client_document`), at `http://127.0.0.1:PORT/<file id>/api/client/features`:
/// what any SDK answers against it is the SDK's own reading of the file, the baseline for
/// its deviations. Registration and metrics are accepted and dropped.
pub struct VerbatimServer {
    base: String,
    documents: Documents,
    stop: CancellationToken,
}

type Documents = Arc<RwLock<HashMap<String, Bytes>>>;

impl VerbatimServer {
    /// Starts the server on a free loopback port.
    pub async fn start() -> Self {
        let documents = Documents::default();
        let app = Router::new()
            .route("/{file}/api/client/features", get(features))
            .route("/{file}/api/client/register", post(accepted))
            .route("/{file}/api/client/metrics", post(accepted))
            .with_state(documents.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the verbatim server");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await
                .expect("the verbatim server");
        });
        Self {
            base,
            documents,
            stop,
        }
    }
}

impl Drop for VerbatimServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SpecServer for VerbatimServer {
    async fn serve_all(&mut self, files: &[(String, Value)]) -> Vec<Served> {
        let documents = files
            .iter()
            .map(|(id, document)| {
                let bytes = serde_json::to_vec(document).expect("a document as JSON");
                (id.clone(), Bytes::from(bytes))
            })
            .collect();
        *self.documents.write().expect("the documents lock") = documents;
        files
            .iter()
            .map(|(id, _)| Served {
                file_id: id.clone(),
                api_url: format!("{}/{id}/api", self.base),
                authorization: None,
            })
            .collect()
    }
}

/// Flagpole as the SDKs' server: one replica per file (embedded store), each file imported
/// into `default` through the client-shaped import (`POST
/// /api/admin/state/import?environment=default&drop=true`), which stores it as written.
#[derive(Default)]
pub struct FlagpoleServer {
    replicas: Vec<(crate::common::Backend, crate::common::TestApp)>,
}

impl SpecServer for FlagpoleServer {
    async fn serve_all(&mut self, files: &[(String, Value)]) -> Vec<Served> {
        for (_, app) in self.replicas.drain(..) {
            app.stop().await;
        }
        let mut served = Vec::new();
        for (id, document) in files {
            let backend = crate::common::Backend::embedded();
            let app = crate::common::TestApp::spawn(&backend).await;
            app.post(
                "/api/admin/state/import?environment=default&drop=true",
                document.clone(),
            )
            .await
            .expect(202);
            served.push(Served {
                file_id: id.clone(),
                api_url: format!("{}/api", app.base),
                authorization: None,
            });
            self.replicas.push((backend, app));
        }
        served
    }
}

async fn features(State(documents): State<Documents>, Path(file): Path<String>) -> Response {
    let document = documents
        .read()
        .expect("the documents lock")
        .get(&file)
        .cloned();
    match document {
        Some(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn accepted() -> StatusCode {
    StatusCode::ACCEPTED
}
