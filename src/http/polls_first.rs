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
//!
//! It is also what gives requests their peer address (`ConnectInfo`): made per connection
//! (`PollsFirst::connected`), it puts the address in every request's extensions except a
//! client features poll's, which reads it only to rate-limit by address (a map allocated per
//! request: about 580 instructions, 4 % of a 304's).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::response::Response;
use futures_util::future::Either;
use tower::{Layer, Service};
use tower_http::cors::{Cors, CorsLayer};

use super::client::{list_client_features, ClientApi};
use super::evaluation::EvaluationApi;
use super::frontend;
use crate::auth::rate_limit::LimitGroup;

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
    /// The connection's peer (`None` until made per connection).
    peer: Option<SocketAddr>,
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
            peer: None,
        }
    }

    /// The service of one connection: each connection's gets its peer address.
    pub fn connected(self) -> ConnectedPolls<S> {
        ConnectedPolls(self)
    }

    /// Puts the peer address in `req`'s extensions, as axum's `ConnectInfo`.
    fn tell_peer(&self, req: &mut Request) {
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(ConnectInfo(peer));
        }
    }
}

impl<S: Clone> PollsFirst<S> {
    fn with_peer(&self, peer: SocketAddr) -> Self {
        Self {
            peer: Some(peer),
            ..self.clone()
        }
    }
}

/// Makes a `PollsFirst` per connection, with the connection's peer address (what
/// `into_make_service_with_connect_info` does for a router, without a per-request layer).
#[derive(Clone)]
pub struct ConnectedPolls<S>(PollsFirst<S>);

impl<S: Clone, T> Service<T> for ConnectedPolls<S>
where
    SocketAddr: Connected<T>,
{
    type Response = PollsFirst<S>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<PollsFirst<S>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, connection: T) -> Self::Future {
        std::future::ready(Ok(self.0.with_peer(SocketAddr::connect_info(connection))))
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

    fn call(&mut self, mut req: Request) -> Self::Future {
        if req.method() == Method::GET {
            let path = req.uri().path();
            if let (Some(client), FEATURES_PATH) = (&self.client, path) {
                // The one reader of the address there: a limit by address.
                if client.limiter.limits(LimitGroup::ClientFeatures) {
                    self.tell_peer(&mut req);
                }
                let client = client.clone();
                return Either::Left(Box::pin(async move {
                    Ok(list_client_features(State(client), req).await)
                }));
            }
            if FRONTEND_PATHS.contains(&path) {
                self.tell_peer(&mut req);
                // `FrontendPoll` is always ready: no `poll_ready` to wait for.
                let mut frontend = Cors::clone(&self.frontend);
                return Either::Left(Box::pin(frontend.call(req)));
            }
        }
        self.tell_peer(&mut req);
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
