//! `VerifiedTokens`: the secrets this replica has already checked, so that a caller polling
//! again costs one map lookup rather than a SHA-256 of its secret and a search of the token
//! map (on the client path's 304, the largest part of a token's cost).
//!
//! Secrets are kept in memory only (the store holds their hashes alone), and only secrets
//! that checked out: a flood of bad tokens is hashed every time, as before, and cannot grow
//! the map. The whole map is forgotten when the stored tokens change (a token deleted is
//! refused at once), and each entry keeps its token's expiry, checked on every use.
//!
//! Which stored tokens an entry was checked against is told by the snapshot's tokens
//! generation (`Snapshot::tokens_generation`), one atomic read rather than a load of the
//! configuration. The snapshot installs new tokens before it moves the generation on, and a
//! caller reads the generation before the tokens it checks against: the tokens an entry was
//! checked against are at least as new as its tag, so an entry tagged with the current
//! generation was checked against the current tokens (a deleted token is never found).

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

/// Remembered secrets, valid for one generation of stored tokens.
#[derive(Default)]
pub(super) struct Verified {
    /// The generation of the stored tokens every entry was checked against.
    generation: Option<u64>,
    /// By the secret's bytes (the hot path compares them as sent, without a UTF-8 check).
    by_secret: HashMap<Box<[u8]>, Arc<Checked>, foldhash::fast::RandomState>,
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
    pub fn get(&self, secret: &[u8]) -> Option<&Checked> {
        self.by_secret.get(secret).map(Arc::as_ref)
    }
}

impl VerifiedTokens {
    /// The secrets checked against the stored tokens of `generation` (the current one);
    /// `None` when those remembered were checked against others.
    pub fn current(&self, generation: u64) -> Option<Guard<Arc<Verified>>> {
        let verified = self.current.load();
        (verified.generation == Some(generation)).then_some(verified)
    }

    /// Remembers that `secret` is `checked`, as found against the stored tokens of
    /// `generation` (read before those tokens were).
    pub fn remember(&self, secret: &str, generation: u64, checked: Checked) {
        let Ok(_inserting) = self.inserting.try_lock() else {
            return;
        };
        let current = self.current.load();
        let mut by_secret = match current.generation {
            // Checked against tokens older than those remembered: not worth remembering.
            Some(g) if g > generation => return,
            Some(g) if g == generation => {
                if current.by_secret.len() >= MAX_VERIFIED {
                    return;
                }
                current.by_secret.clone()
            }
            _ => HashMap::default(),
        };
        by_secret.insert(secret.as_bytes().into(), Arc::new(checked));
        self.current.store(Arc::new(Verified {
            generation: Some(generation),
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
        let hash_of = |secret: &str, generation: u64| {
            verified
                .current(generation)
                .and_then(|v| v.get(secret.as_bytes()).map(|c| c.hash.clone()))
        };
        assert_eq!(hash_of("s", 1), None);
        verified.remember("s", 1, checked("h"));
        assert_eq!(hash_of("s", 1).as_deref(), Some("h"));
        assert_eq!(hash_of("t", 1), None);
        // The stored tokens changed (one was made or deleted): nothing is known any more.
        assert_eq!(hash_of("s", 2), None);
        // A secret remembered for the new tokens forgets those of the old ones.
        verified.remember("t", 2, checked("h2"));
        assert_eq!(hash_of("s", 2), None);
        assert_eq!(hash_of("t", 2).as_deref(), Some("h2"));
        assert_eq!(hash_of("t", 1), None);
        // A caller that checked against the old tokens does not bring them back.
        verified.remember("s", 1, checked("h"));
        assert_eq!(hash_of("t", 2).as_deref(), Some("h2"));
        assert_eq!(hash_of("s", 1), None);
    }
}
