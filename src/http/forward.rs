//! Middleware on the identified admin routes: sends writes on to the replica that commits them
//! (see `forwarding`), and names the position in the answers to writes forwarded here.

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::error::ApiError;
use crate::forwarding::{position_header, ForwardError, Forwarded, POSITION_HEADER};
use crate::snapshot::position_of;
use crate::state::AppState;

/// Forwards a write to the committing replica when there is one, and answers with its answer
/// once this replica's snapshot holds what it answered from; commits it here when the
/// committer cannot be reached or the body is large (a state import, whether its length is
/// declared or it comes in chunks). Runs after `authenticate_admin`: callers are identified
/// and rate-limited where they arrive.
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
    let declared_small = req.headers().get(CONTENT_LENGTH).is_none_or(|length| {
        length
            .to_str()
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n <= limit)
    });
    if !declared_small {
        state.metrics.writes.forward("local");
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let body = match body_within(body, limit).await {
        Ok(Ok(body)) => body,
        // Sent in chunks, and larger than forwarded writes may be.
        Ok(Err(body)) => {
            state.metrics.writes.forward("local");
            return next.run(Request::from_parts(parts, body)).await;
        }
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

/// The whole of `body` when it is at most `limit` bytes; otherwise the same body again, what
/// was read put back in front of the rest.
async fn body_within(body: Body, limit: usize) -> Result<Result<Bytes, Body>, axum::Error> {
    let mut stream = body.into_data_stream();
    let mut chunks = Vec::new();
    let mut length = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        length += chunk.len();
        chunks.push(chunk);
        if length > limit {
            let replay = futures_util::stream::iter(chunks.into_iter().map(Ok)).chain(stream);
            return Ok(Err(Body::from_stream(replay)));
        }
    }
    Ok(Ok(match chunks.len() {
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    }))
}
