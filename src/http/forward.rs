//! Middleware on the identified admin routes: sends writes on to the replica that commits them
//! (see `forwarding`), and names the position in the answers to writes forwarded here.

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::forwarding::{position_header, ForwardError, Forwarded, POSITION_HEADER};
use crate::snapshot::position_of;
use crate::state::AppState;

/// Forwards a write to the committing replica when there is one, and answers with its answer
/// once this replica's snapshot holds what it answered from; commits it here when the
/// committer cannot be reached or the body is large (a state import). Runs after
/// `authenticate_admin`: callers are identified and rate-limited where they arrive.
pub async fn forward_writes(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(forwarding) = state.forwarding.as_deref() else {
        return next.run(req).await;
    };
    if forwarding.is_forwarded_here(req.headers()) {
        let mut response = next.run(req).await;
        if let Some(value) = position_header(position_of(&state.snapshot.state())) {
            response.headers_mut().insert(POSITION_HEADER, value);
        }
        return response;
    }
    let Some(committer) = forwarding.committer_for(req.method(), req.headers()) else {
        return next.run(req).await;
    };
    let limit = state.edge.admin_body_limit;
    let small = match req.headers().get(CONTENT_LENGTH) {
        Some(length) => length
            .to_str()
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n <= limit),
        // No length and no chunks: no body.
        None => !req.headers().contains_key(TRANSFER_ENCODING),
    };
    if !small {
        state.metrics.writes.forward("local");
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, limit).await {
        Ok(body) => body,
        Err(e) => {
            return ApiError::BadRequest {
                message: format!("the request body could not be read: {e}"),
                details: Vec::new(),
            }
            .into_response()
        }
    };
    let path = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(&parts.uri, |original| &original.0)
        .path_and_query()
        .map_or("/", |p| p.as_str());
    let forwarded = forwarding
        .forward(
            &committer,
            parts.method.clone(),
            path,
            &parts.headers,
            body.clone(),
        )
        .await;
    match forwarded {
        Ok(Forwarded { response, position }) => {
            state.metrics.writes.forward("forwarded");
            if let Err(e) = forwarding.catch_up(&state.snapshot, position).await {
                tracing::warn!(error = %e, "forwarded write answered before this replica holds it");
            }
            response
        }
        Err(ForwardError::NotDelivered(cause)) => {
            tracing::warn!(%cause, "write not forwarded; committing it here");
            state.metrics.writes.forward("local");
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
        Err(ForwardError::Unanswered(cause)) => {
            tracing::warn!(%cause, "the committing replica did not answer a forwarded write");
            state.metrics.writes.forward("unanswered");
            ApiError::Unavailable(
                "the replica committing admin writes did not answer; the write may or may not \
                 have been made: check before retrying"
                    .into(),
            )
            .into_response()
        }
    }
}
