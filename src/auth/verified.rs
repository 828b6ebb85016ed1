//! `VerifiedTokens`: the secrets this replica has already checked, so that a caller polling
//! again costs one map lookup rather than a SHA-256 of its secret and a search of the token
//! map (on the client path's 304, the largest part of a token's cost).
//!
//! Secrets are kept in memory only (the store holds their hashes alone), and only secrets
//! that checked out: a flood of bad tokens is hashed every time, as before, and cannot grow
//! the map. The whole map is forgotten when the stored tokens change (a token deleted is
//! refused at once), and each entry keeps its token's expiry, checked on every use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};
use imbl::OrdMap;

use super::Credential;
use crate::domain::api_token::ApiToken;

/// At most this many secrets are remembered; beyond, a secret is checked in full each time.
/// (Each new one copies the map's entries, a reference count each.)
const MAX_VERIFIED: usize = 1_000;

/// The stored tokens of a configuration.
pub(super) type StoredTokens = OrdMap<String, Arc<ApiToken>>;

/// A secret that checked out: what it lets its holder do.
#[derive(Debug, Clone)]
pub(super) struct Checked {
    /// The SHA-256 of the secret (hex): how the token is stored, and its rate-limit key.
    pub hash: String,
    pub credential: Credential,
    /// Whether it is one of the store's tokens (rather than one from the settings).
    pub stored: bool,
    /// When it expires, in Unix milliseconds.
    pub expires_at_ms: Option<i64>,
}

/// Remembered secrets, valid for one map of stored tokens.
#[derive(Default)]
pub(super) struct Verified {
    /// The stored tokens every entry was checked against.
    tokens: Option<StoredTokens>,
    by_secret: HashMap<Box<str>, Arc<Checked>, foldhash::fast::RandomState>,
}

/// The secrets this replica has checked, for the stored tokens they were checked against.
#[derive(Default)]
pub(super) struct VerifiedTokens {
    current: ArcSwap<Verified>,
    /// Serialises inserts, which copy the map (reads take no lock; a request that finds
    /// another inserting leaves its secret to be remembered next time rather than wait).
    inserting: Mutex<()>,
}

impl Verified {
    /// What `secret` was found to be.
    pub fn get(&self, secret: &str) -> Option<&Checked> {
        self.by_secret.get(secret).map(Arc::as_ref)
    }
}

impl VerifiedTokens {
    /// The secrets checked against `tokens` (the current stored tokens); `None` when those
    /// remembered were checked against others.
    pub fn current(&self, tokens: &StoredTokens) -> Option<Guard<Arc<Verified>>> {
        let verified = self.current.load();
        verified
            .tokens
            .as_ref()
            .is_some_and(|t| t.ptr_eq(tokens))
            .then_some(verified)
    }

    /// Remembers that `secret` is `checked`, as found against `tokens`.
    pub fn remember(&self, secret: &str, tokens: &StoredTokens, checked: Checked) {
        let Ok(_inserting) = self.inserting.try_lock() else {
            return;
        };
        let current = self.current.load();
        let mut by_secret = match &current.tokens {
            Some(t) if t.ptr_eq(tokens) => {
                if current.by_secret.len() >= MAX_VERIFIED {
                    return;
                }
                current.by_secret.clone()
            }
            _ => HashMap::default(),
        };
        by_secret.insert(secret.into(), Arc::new(checked));
        self.current.store(Arc::new(Verified {
            tokens: Some(tokens.clone()),
            by_secret,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(hash: &str) -> Checked {
        Checked {
            hash: hash.into(),
            credential: Credential::Admin("a".into()),
            stored: true,
            expires_at_ms: None,
        }
    }

    #[test]
    fn a_secret_is_known_only_for_the_tokens_it_was_checked_against() {
        let verified = VerifiedTokens::default();
        let tokens = StoredTokens::new();
        let hash_of = |secret: &str, tokens: &StoredTokens| {
            verified
                .current(tokens)
                .and_then(|v| v.get(secret).map(|c| c.hash.clone()))
        };
        assert_eq!(hash_of("s", &tokens), None);
        verified.remember("s", &tokens, checked("h"));
        assert_eq!(hash_of("s", &tokens).as_deref(), Some("h"));
        assert_eq!(hash_of("t", &tokens), None);
        // Another map of tokens (one was made or deleted): nothing is known any more.
        let mut changed = tokens.clone();
        changed.insert(
            "x".into(),
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "hash": "x", "prefix": "x", "username": "u", "type": "admin",
                    "projects": ["*"], "createdAt": "2026-01-01T00:00:00Z"
                }))
                .expect("a token"),
            ),
        );
        assert_eq!(hash_of("s", &changed), None);
        // A secret remembered for the new map forgets those of the old one.
        verified.remember("t", &changed, checked("h2"));
        assert_eq!(hash_of("s", &changed), None);
        assert_eq!(hash_of("t", &changed).as_deref(), Some("h2"));
        assert_eq!(hash_of("t", &tokens), None);
    }
}
