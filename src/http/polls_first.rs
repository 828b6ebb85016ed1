//! `PollsFirst`: the application with what SDKs poll answered before routing — a backend
//! SDK's `GET /api/client/features` and a frontend SDK's `GET /api/frontend` (and its
//! `/api/proxy` alias).
//!
//! Through the router a poll costs a router lookup and four request extensions
//! (`OriginalUri`, `MatchedPath`, URL parameters, a rehash of the map they live in) with the
//! nested services' futures: a quarter of a client `304`'s instructions in user space (15,669
//! routed, 11,911 answered first; callgrind, 2026-11-27). The answer is the same either way:
//! the client features only while no layer applies to the client routes (no CORS, no sampled
//! client traces); the frontend API with the one layer its routes have, its own CORS. Every
//! other request, `HEAD` and a path with a trailing slash included, is routed as usual.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use futures_util::future::Either;
use tower::{Layer, Service};
use tower_http::cors::{Cors, CorsLayer};

use super::client::{list_client_features, ClientApi};
use super::evaluation::EvaluationApi;
use super::frontend;

/// The client features' path.
const FEATURES_PATH: &str = "/api/client/features";
/// The frontend API's path and the old Unleash proxy's.
const FRONTEND_PATHS: [&str; 2] = ["/api/frontend", "/api/proxy"];

/// The future of a request answered before routing.
type Answered = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// Answers `GET /api/client/features` with the client API's handler (when `client` is given)
/// and `GET /api/frontend` with the frontend API's behind its CORS; passes every other
/// request to `routed`.
#[derive(Clone)]
pub struct PollsFirst<S> {
    /// `None`: the client features are routed (a layer applies to the client routes).
    client: Option<Arc<ClientApi>>,
    /// Shared: hyper clones this service for every request, and a CORS layer's clone
    /// allocates; only the frontend API's polls clone it (to call it).
    frontend: Arc<Cors<FrontendPoll>>,
    routed: S,
}

impl<S> PollsFirst<S> {
    /// `routed` with the polls answered first: the client features when `client` is given,
    /// the frontend API always, with the CORS its routes have.
    pub fn new(
        client: Option<Arc<ClientApi>>,
        evaluation: Arc<EvaluationApi>,
        frontend_cors: CorsLayer,
        routed: S,
    ) -> Self {
        Self {
            client,
            frontend: Arc::new(frontend_cors.layer(FrontendPoll(evaluation))),
            routed,
        }
    }
}

impl<S> Service<Request> for PollsFirst<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Answered, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.routed.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if req.method() == Method::GET {
            let path = req.uri().path();
            if let (Some(client), FEATURES_PATH) = (&self.client, path) {
                let client = client.clone();
                return Either::Left(Box::pin(async move {
                    Ok(list_client_features(State(client), req).await)
                }));
            }
            if FRONTEND_PATHS.contains(&path) {
                // `FrontendPoll` is always ready: no `poll_ready` to wait for.
                let mut frontend = Cors::clone(&self.frontend);
                return Either::Left(Box::pin(frontend.call(req)));
            }
        }
        Either::Right(self.routed.call(req))
    }
}

/// The frontend API's `GET`, as a service for its CORS layer to wrap.
#[derive(Clone)]
pub struct FrontendPoll(Arc<EvaluationApi>);

impl Service<Request> for FrontendPoll {
    type Response = Response;
    type Error = Infallible;
    type Future = Answered;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let api = self.0.clone();
        Box::pin(async move { Ok(frontend::get_frontend(State(api), req).await) })
    }
}
