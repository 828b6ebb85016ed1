//! Write forwarding (Redis store, `--forward-writes`): every replica sends its admin writes to
//! one replica, the holder of the committer lease (`store::committer_lease`), which decides
//! them one after the other and commits them in batches (`service::group_commit`). Spread over
//! replicas that each commit, the same writers make smaller batches that race each other in
//! the store; forwarded, they never race, but their writes/s are the holder's alone. With a
//! CPU budget per replica, three committing replicas out-wrote three forwarding ones by
//! 1.3–1.8 times, so forwarding is off by default (see docs/architecture.md, "Write forwarding").
//!
//! Forwarding is an optimisation, never a condition: a replica that knows no committer, or
//! cannot reach it, commits locally as before, and the store settles the races. A forwarded
//! write carries the committer's secret token (so only replicas, which read it from the
//! lease, can skip the committer's rate limit: the forwarding replica applied it) and is never
//! forwarded again; its answer names the position the committer's snapshot was at, and the
//! forwarding replica brings its own snapshot there before answering (read-your-writes on the
//! replica written to).

pub mod address;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::health::Readiness;
use crate::snapshot::Snapshot;
use crate::store::committer_lease::{CommitterLease, LEASE_TTL};
use crate::store::{Announcement, Position, StoreError};

/// Request header of a forwarded write: the committer's token.
pub const FORWARDED_HEADER: &str = "x-flagpole-forwarded";

/// Response header of a forwarded write: `<version> <head>` of the committer's snapshot once
/// it answered (it holds the write).
pub const POSITION_HEADER: &str = "x-flagpole-position";

/// How often a replica renews or reads the lease (well within `LEASE_TTL`).
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// How long a forwarded write's answer waits for its announcement before the change log is
/// read instead.
const ANNOUNCEMENT_WAIT: Duration = Duration::from_millis(20);

/// How long to wait for a connection to the committer before committing locally.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The replica that commits for the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committer {
    /// Its secret, sent with every write forwarded to it.
    token: String,
    /// Where it listens, e.g. `http://10.0.0.7:4242`.
    url: String,
}

impl Committer {
    /// Reads a lease's claim, `<token> <url>`.
    fn parse(claim: &str) -> Option<Self> {
        let (token, url) = claim.split_once(' ')?;
        Some(Self {
            token: token.to_string(),
            url: url.to_string(),
        })
    }
}

/// Why a write could not be forwarded.
#[derive(Debug)]
pub enum ForwardError {
    /// The committer was not reached: the write was not sent, and may be committed locally.
    NotDelivered(String),
    /// The write was sent but its answer did not come: it may or may not have been committed.
    Unanswered(String),
}

/// A forwarded write's answer, and the position the committer's snapshot was at.
pub struct Forwarded {
    pub response: Response,
    pub position: Option<Position>,
}

/// This replica's side of write forwarding: its own claim to the lease, and the committer it
/// forwards to.
pub struct WriteForwarding {
    /// This replica's secret (random, 128 bits).
    token: String,
    /// This replica's claim to the lease, `<token> <url>`; `None` when it has no address
    /// other replicas can reach (it then never takes the lease).
    claim: Option<String>,
    /// The committer when it is another replica.
    committer: ArcSwapOption<Committer>,
    /// A committer that could not be reached, and until when it is not tried again.
    unreachable: Mutex<Option<(String, Instant)>>,
    client: reqwest::Client,
    /// The version announcements, to catch up on a forwarded write from its announcement.
    announcements: watch::Receiver<Announcement>,
}

impl WriteForwarding {
    /// Forwarding for a replica reachable at `url` (see `address::advertised_url`) that
    /// hears version announcements on `announcements`.
    pub fn new(
        url: Option<String>,
        announcements: watch::Receiver<Announcement>,
        request_timeout: Duration,
    ) -> Result<Self, String> {
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness for its token: {e}"))?;
        let token: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
        let client = reqwest::Client::builder()
            // Replicas talk to each other directly, never through an HTTP_PROXY.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            // Answered (503) before the request's own time limit (504) runs out; a pooled
            // connection to a host that vanished is found dead in seconds.
            .timeout(request_timeout.mul_f64(0.9))
            .tcp_keepalive(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            claim: url.map(|url| format!("{token} {url}")),
            token,
            committer: ArcSwapOption::empty(),
            unreachable: Mutex::new(None),
            client,
            announcements,
        })
    }

    /// Brings `snapshot` and its client documents to the position a forwarded write was
    /// answered from (read-your-writes on this replica), or to the store's when the answer
    /// named none. The commit's announcement usually arrives with the answer or just after
    /// it: it is awaited briefly before the change log is read.
    pub async fn catch_up(
        &self,
        snapshot: &Snapshot,
        position: Option<Position>,
    ) -> Result<(), StoreError> {
        self.snapshot_to(snapshot, position).await?;
        snapshot.client_documents_current().await;
        Ok(())
    }

    async fn snapshot_to(
        &self,
        snapshot: &Snapshot,
        position: Option<Position>,
    ) -> Result<(), StoreError> {
        let Some(target) = position else {
            return snapshot.refresh().await;
        };
        if !snapshot.holds(target) {
            let mut announcements = self.announcements.clone();
            let announced = announcements.wait_for(|announcement| {
                matches!(announcement, Announcement::At(at) if at.version >= target.version)
            });
            // Whatever came of it, `refresh_to` finishes the job.
            let _ = tokio::time::timeout(ANNOUNCEMENT_WAIT, announced).await;
        }
        snapshot.refresh_to(target).await
    }

    /// Whether `headers` are those of a write another replica forwarded to this one (they
    /// carry this replica's token).
    pub fn is_forwarded_here(&self, headers: &HeaderMap) -> bool {
        headers
            .get(FORWARDED_HEADER)
            .is_some_and(|value| same_secret(value.as_bytes(), self.token.as_bytes()))
    }

    /// Whether `headers` are those of a write forwarded to this replica; `Misdirected` when
    /// they carry another replica's token (or a made-up one).
    pub fn check_forwarded(&self, headers: &HeaderMap) -> Result<bool, ApiError> {
        if !headers.contains_key(FORWARDED_HEADER) {
            return Ok(false);
        }
        if self.is_forwarded_here(headers) {
            return Ok(true);
        }
        Err(ApiError::Misdirected(
            "this write was forwarded to a replica that does not commit for others".into(),
        ))
    }

    /// The committer to forward a write with `method` and `headers` to: `None` for reads,
    /// writes forwarded already (by any replica), and when this replica commits itself, knows
    /// no committer, or could not reach it lately.
    pub fn committer_for(&self, method: &Method, headers: &HeaderMap) -> Option<Arc<Committer>> {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
            || headers.contains_key(FORWARDED_HEADER)
        {
            return None;
        }
        let committer = self.committer.load_full()?;
        // Another replica advertising this one's address (a loopback route to the store, a
        // reused address) would have this replica forward to itself.
        if self
            .claim
            .as_deref()
            .and_then(|claim| claim.split_once(' '))
            .is_some_and(|(_, url)| url == committer.url)
        {
            return None;
        }
        if let Ok(mut unreachable) = self.unreachable.lock() {
            match unreachable.as_ref() {
                Some((token, until)) if *token == committer.token && Instant::now() < *until => {
                    return None
                }
                Some(_) => *unreachable = None,
                None => {}
            }
        }
        Some(committer)
    }

    /// Sends a write to `committer`: `method`, `path_and_query`, the request's `headers` and
    /// `body`. A committer that cannot be reached is not tried again for a lease's lifetime.
    pub async fn forward(
        &self,
        committer: &Committer,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Forwarded, ForwardError> {
        let mut request = self
            .client
            .request(method, format!("{}{path_and_query}", committer.url))
            .body(body);
        let hop_only = connection_options(headers);
        for (name, value) in headers {
            // This replica continues the trace, and answers CORS itself.
            if is_end_to_end(name)
                && !hop_only.contains(name)
                && !matches!(name.as_str(), "traceparent" | "origin")
            {
                request = request.header(name, value);
            }
        }
        request = request.header(FORWARDED_HEADER, &committer.token);
        if let Some(traceparent) = crate::telemetry::traces::current_traceparent() {
            request = request.header("traceparent", traceparent);
        }
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(e) => {
                self.avoid(committer);
                // Nothing was sent when no connection was made, or no request could be built.
                return Err(if e.is_connect() || e.is_builder() {
                    ForwardError::NotDelivered(e.to_string())
                } else {
                    ForwardError::Unanswered(e.to_string())
                });
            }
        };
        let status = answer.status();
        // Refused untouched: not the committer after all (`check_forwarded`), or the caller is
        // not known there (a session signed with this replica's own key).
        if status == StatusCode::MISDIRECTED_REQUEST || status == StatusCode::UNAUTHORIZED {
            if status == StatusCode::MISDIRECTED_REQUEST {
                self.avoid(committer);
            }
            return Err(ForwardError::NotDelivered(format!(
                "the committing replica answered {status}"
            )));
        }
        let mut response_headers = answer.headers().clone();
        let body = answer
            .bytes()
            .await
            .map_err(|e| ForwardError::Unanswered(e.to_string()))?;
        let position = response_headers
            .remove(POSITION_HEADER)
            .and_then(|value| parse_position(value.to_str().ok()?));
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = status;
        let hop_only = connection_options(&response_headers);
        for (name, value) in &response_headers {
            // This replica answers CORS itself (its layer adds `Vary` and `access-control-*`).
            let cors = name == header::VARY || name.as_str().starts_with("access-control-");
            if is_end_to_end(name) && !hop_only.contains(name) && !cors {
                response.headers_mut().append(name, value.clone());
            }
        }
        Ok(Forwarded { response, position })
    }

    /// Forwards nothing to `committer` for a lease's lifetime (it may have died, or moved).
    fn avoid(&self, committer: &Committer) {
        if let Ok(mut unreachable) = self.unreachable.lock() {
            *unreachable = Some((committer.token.clone(), Instant::now() + LEASE_TTL));
        }
    }

    /// Takes, renews or reads the lease every `RENEW_EVERY` until `shutdown`: this replica
    /// holds it while it is ready (loaded, reachable) and no other replica does. It gives it up
    /// when it stops being ready, and at once when asked to stop (`draining`): the others stop
    /// forwarding to it within a second, well before the drain ends and it stops listening.
    pub async fn run(
        self: Arc<Self>,
        lease: CommitterLease,
        readiness: Arc<Readiness>,
        draining: CancellationToken,
        shutdown: CancellationToken,
    ) {
        // A replica without an address claims with a token no one holds: it only reads.
        let claim = self.claim.clone().unwrap_or_else(|| self.token.clone());
        let mut ticks = tokio::time::interval(RENEW_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut drained = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = draining.cancelled(), if !drained => drained = true,
                _ = ticks.tick() => {}
            }
            let take = self.claim.is_some() && !drained && readiness.check().is_empty();
            let holder = match lease.hold_or_release(&claim, take).await {
                Ok(holder) => holder,
                Err(e) => {
                    tracing::debug!(error = %e, "committer lease unreadable; committing locally");
                    None
                }
            };
            let committer = holder
                .filter(|holder| *holder != claim)
                .and_then(|holder| Committer::parse(&holder));
            if committer.as_ref() != self.committer.load().as_deref() {
                match &committer {
                    Some(c) => {
                        tracing::info!(committer = %c.url, "admin writes go to another replica")
                    }
                    None => tracing::info!("admin writes are committed here"),
                }
                self.committer.store(committer.map(Arc::new));
            }
        }
        self.committer.store(None);
        if self.claim.is_some() {
            if let Err(e) = lease.hold_or_release(&claim, false).await {
                tracing::debug!(error = %e, "committer lease not given up; it expires");
            }
        }
    }
}

/// Whether a header goes through a forwarding hop: not the hop-by-hop ones (RFC 9110 §7.6.1),
/// not `Host` (the target's), not the framing (set for the body sent), not the forwarding
/// headers themselves.
fn is_end_to_end(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
            | FORWARDED_HEADER
            | POSITION_HEADER
    )
}

/// The headers `headers` names in `Connection`: they are for this hop only, like the
/// hop-by-hop ones (RFC 9110 §7.6.1).
fn connection_options(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|option| HeaderName::from_bytes(option.trim().as_bytes()).ok())
        .collect()
}

/// The position header's value for `position`.
pub fn position_header(position: Position) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("{} {}", position.version, position.head)).ok()
}

fn parse_position(value: &str) -> Option<Position> {
    let (version, head) = value.split_once(' ')?;
    Some(Position {
        version: version.parse().ok()?,
        head: head.parse().ok()?,
    })
}

/// Compares secrets in time independent of where they differ.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// Announcements that never come.
    fn quiet() -> watch::Receiver<Announcement> {
        watch::channel(Announcement::Unknown).1
    }

    #[test]
    fn a_claim_names_the_token_and_the_url() {
        let committer = Committer::parse("abc http://10.0.0.7:4242").unwrap();
        assert_eq!(committer.token, "abc");
        assert_eq!(committer.url, "http://10.0.0.7:4242");
        assert_eq!(Committer::parse("no-url"), None);
    }

    #[test]
    fn only_this_replicas_token_marks_a_write_forwarded_here() {
        let forwarding =
            WriteForwarding::new(Some("http://127.0.0.1:1".into()), quiet(), SECOND).unwrap();
        let mut headers = HeaderMap::new();
        assert!(!forwarding.is_forwarded_here(&headers));
        headers.insert(FORWARDED_HEADER, HeaderValue::from_static("guess"));
        assert!(!forwarding.is_forwarded_here(&headers));
        headers.insert(
            FORWARDED_HEADER,
            HeaderValue::from_str(&forwarding.token).unwrap(),
        );
        assert!(forwarding.is_forwarded_here(&headers));
    }

    #[test]
    fn reads_and_forwarded_writes_are_not_forwarded() {
        let forwarding = WriteForwarding::new(None, quiet(), SECOND).unwrap();
        forwarding.committer.store(Some(Arc::new(Committer {
            token: "t".into(),
            url: "http://127.0.0.1:1".into(),
        })));
        let mut headers = HeaderMap::new();
        assert!(forwarding.committer_for(&Method::GET, &headers).is_none());
        assert!(forwarding.committer_for(&Method::PUT, &headers).is_some());
        headers.insert(FORWARDED_HEADER, HeaderValue::from_static("x"));
        assert!(forwarding.committer_for(&Method::PUT, &headers).is_none());
    }

    #[test]
    fn positions_round_trip_through_the_header() {
        let position = Position {
            version: 42,
            head: 7_000_000_000_000_000_001,
        };
        let value = position_header(position).unwrap();
        assert_eq!(parse_position(value.to_str().unwrap()), Some(position));
        assert_eq!(parse_position("42"), None);
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        assert!(!is_end_to_end(&header::CONNECTION));
        assert!(!is_end_to_end(&header::HOST));
        assert!(!is_end_to_end(&HeaderName::from_static(FORWARDED_HEADER)));
        assert!(is_end_to_end(&header::AUTHORIZATION));
        assert!(is_end_to_end(&header::CONTENT_TYPE));
    }

    #[test]
    fn headers_named_in_connection_stay_behind() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, X-Hop"),
        );
        headers.append(header::CONNECTION, HeaderValue::from_static("close"));
        let options = connection_options(&headers);
        assert!(options.contains(&HeaderName::from_static("x-hop")));
        assert!(options.contains(&HeaderName::from_static("close")));
        assert!(!options.contains(&header::AUTHORIZATION));
    }
}
