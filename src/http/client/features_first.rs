//! `FeaturesFirst`: the application with `GET /api/client/features` answered before routing.
//!
//! What SDKs poll costs a router lookup and four request extensions (`OriginalUri`,
//! `MatchedPath`, URL parameters, a rehash of the map they live in) when it goes through the
//! router, with the nested services' futures: a quarter of a `304`'s instructions in user
//! space (15,669 routed, 11,911 answered first; callgrind, 2026-11-27).
//! Only when no layer applies to the client routes (no CORS, no sampled client traces) is the
//! handler called directly, so the answer is the same either way; every other request, `HEAD`
//! and the path with a trailing slash included, is routed as usual.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use futures_util::future::Either;
use tower::Service;

use super::{features, ClientApi};

/// The path answered before routing.
const FEATURES_PATH: &str = "/api/client/features";

/// The future of a request answered before routing.
type Answered = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// Answers `GET /api/client/features` with the client API's handler and passes every other
/// request to `routed`.
#[derive(Clone)]
pub struct FeaturesFirst<S> {
    /// `None`: every request is routed (a layer applies to the client routes).
    client: Option<Arc<ClientApi>>,
    routed: S,
}

impl<S> FeaturesFirst<S> {
    /// `routed` with the client features answered first when `client` is given.
    pub fn new(client: Option<Arc<ClientApi>>, routed: S) -> Self {
        Self { client, routed }
    }
}

impl<S> Service<Request> for FeaturesFirst<S>
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
        match &self.client {
            Some(client) if req.method() == Method::GET && req.uri().path() == FEATURES_PATH => {
                let client = client.clone();
                Either::Left(Box::pin(async move {
                    Ok(features::list_client_features(State(client), req).await)
                }))
            }
            _ => Either::Right(self.routed.call(req)),
        }
    }
}
