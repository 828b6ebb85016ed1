//! `ClientFeaturesCache`: the `GET /api/client/features` responses of one snapshot version,
//! built once per (version, normalised filter) as plain and gzipped bytes with an ETag, so a
//! request costs a map lookup and a header comparison.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use axum::http::HeaderValue;
use base64::Engine;
use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::domain::filter::FeatureFilter;
use crate::domain::state::ConfigState;
use crate::domain::views::ClientToggle;

/// At most this many filtered responses are kept per version; odd queries beyond it are
/// built per request rather than grow memory without bound.
const MAX_FILTERED_ENTRIES: usize = 256;

/// A built response body in both encodings.
pub struct ClientResponse {
    pub plain: Bytes,
    pub gzip: Bytes,
    /// Weak validator over the plain bytes: identical content gives the identical ETag on
    /// every replica (gzip and plain are one representation, hence weak).
    pub etag: HeaderValue,
}

impl ClientResponse {
    /// Whether an `If-None-Match` header value matches this response (weak comparison,
    /// comma-separated lists and `*` allowed).
    pub fn matches(&self, if_none_match: &[u8]) -> bool {
        let own = strip_weak(self.etag.as_bytes());
        if_none_match.split(|b| *b == b',').any(|candidate| {
            let candidate = candidate.trim_ascii();
            candidate == b"*" || strip_weak(candidate) == own
        })
    }
}

fn strip_weak(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

type Entry = Arc<OnceCell<Arc<ClientResponse>>>;

/// The cached responses of one snapshot version.
pub struct ClientFeaturesCache {
    unfiltered: Entry,
    filtered: Mutex<HashMap<FeatureFilter, Entry>>,
}

impl Default for ClientFeaturesCache {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientFeaturesCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self {
            unfiltered: Arc::new(OnceCell::new()),
            filtered: Mutex::new(HashMap::new()),
        }
    }

    /// The unfiltered response if it is built already (the hot path: no reference counting).
    pub fn built_unfiltered(&self) -> Option<&ClientResponse> {
        self.unfiltered.get().map(|response| &**response)
    }

    /// The response for `filter` over `state`, built on first use (concurrent callers wait
    /// for the one build).
    pub async fn response(
        &self,
        state: &Arc<ConfigState>,
        filter: &FeatureFilter,
    ) -> Arc<ClientResponse> {
        let entry = if filter.is_empty() {
            self.unfiltered.clone()
        } else {
            let cached = self.lock_filtered().get(filter).cloned();
            match cached {
                Some(entry) => entry,
                // A filter that matches nothing gets the shared empty response and takes no
                // cache slot, so made-up filters cannot crowd out the ones SDKs really send.
                None if !state.features.values().any(|t| filter.matches(t)) => return no_match(),
                None => {
                    let mut map = self.lock_filtered();
                    if map.len() < MAX_FILTERED_ENTRIES {
                        map.entry(filter.clone()).or_default().clone()
                    } else {
                        Arc::new(OnceCell::new())
                    }
                }
            }
        };
        entry
            .get_or_init(|| build_off_runtime(state.clone(), filter.clone()))
            .await
            .clone()
    }

    fn lock_filtered(&self) -> std::sync::MutexGuard<'_, HashMap<FeatureFilter, Entry>> {
        match self.filtered.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The response of a filter that matches nothing (an empty toggle list); the same for every
/// version.
pub fn no_match() -> Arc<ClientResponse> {
    static EMPTY: OnceLock<Arc<ClientResponse>> = OnceLock::new();
    EMPTY
        .get_or_init(|| Arc::new(build(&ConfigState::default(), &FeatureFilter::default())))
        .clone()
}

async fn build_off_runtime(state: Arc<ConfigState>, filter: FeatureFilter) -> Arc<ClientResponse> {
    // Serialising and compressing thousands of toggles takes milliseconds: keep it off the
    // threads that answer requests.
    let job = {
        let state = state.clone();
        let filter = filter.clone();
        tokio::task::spawn_blocking(move || build(&state, &filter))
    };
    match job.await {
        Ok(response) => Arc::new(response),
        Err(e) => {
            tracing::error!(error = %e, "client response build task failed; building inline");
            Arc::new(build(&state, &filter))
        }
    }
}

#[derive(Serialize)]
struct ClientFeatures<'a> {
    /// spec §4.1: the client format is version 1.
    version: u8,
    features: Vec<ClientToggle<'a>>,
}

/// Serialises, compresses and tags the response for `filter` over `state`.
pub fn build(state: &ConfigState, filter: &FeatureFilter) -> ClientResponse {
    let document = ClientFeatures {
        version: 1,
        features: state
            .features
            .values()
            .filter(|t| filter.matches(t))
            .map(|t| ClientToggle::new(t))
            .collect(),
    };
    // Serialising borrowed plain data into a Vec cannot fail.
    let plain = serde_json::to_vec(&document).unwrap_or_default();
    let gzip = gzip(&plain);
    let digest = Sha256::digest(&plain);
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..18]);
    let etag = HeaderValue::from_str(&format!("W/\"{:x}-{tag}\"", plain.len()))
        .unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""));
    ClientResponse {
        plain: Bytes::from(plain),
        gzip,
        etag,
    }
}

fn gzip(plain: &[u8]) -> Bytes {
    let mut encoder = GzEncoder::new(Vec::with_capacity(plain.len() / 4), Compression::new(6));
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(plain);
    Bytes::from(encoder.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_comparison_is_weak_and_accepts_lists() {
        let response = build(&ConfigState::default(), &FeatureFilter::default());
        let etag = response.etag.to_str().expect("ascii").to_string();
        let strong = etag.trim_start_matches("W/").to_string();
        assert!(response.matches(etag.as_bytes()));
        assert!(response.matches(strong.as_bytes()));
        assert!(response.matches(format!("\"x\", {strong}").as_bytes()));
        assert!(response.matches(b"*"));
        assert!(!response.matches(b"\"other\""));
    }

    #[test]
    fn identical_content_gives_identical_etags() {
        let a = build(&ConfigState::default(), &FeatureFilter::default());
        let b = build(&ConfigState::default(), &FeatureFilter::default());
        assert_eq!(a.etag, b.etag);
        assert_eq!(&a.plain[..], br#"{"version":1,"features":[]}"#);
    }
}
