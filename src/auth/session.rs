//! Sessions of the insecure mode (`POST /api/admin/login`): a cookie holding the user and an
//! expiry, signed with HMAC-SHA256, so any replica with the same key can check it without
//! the store.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The session cookie's name.
pub const COOKIE: &str = "flagpole-session";
/// How long a session lasts (the reference's two days).
pub const LIFETIME_SECS: i64 = 2 * 24 * 60 * 60;

/// The key sessions are signed with.
#[derive(Clone)]
pub struct SessionKey(Vec<u8>);

impl SessionKey {
    /// A key from a configured secret (shared by replicas), or a random one of this process;
    /// fails when the operating system has no randomness to give (a guessable key would let
    /// anyone forge sessions).
    pub fn new(secret: Option<&str>) -> Result<Self, String> {
        match secret {
            Some(secret) => Ok(Self(secret.as_bytes().to_vec())),
            None => {
                let mut key = vec![0u8; 32];
                getrandom::fill(&mut key)
                    .map_err(|e| format!("no randomness for the session key: {e}"))?;
                Ok(Self(key))
            }
        }
    }

    fn signature(&self, payload: &str) -> Vec<u8> {
        // HMAC takes keys of any length.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return Vec::new();
        };
        mac.update(payload.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// An unforgeable tag of `message` under this key (the admin UI's CSRF tokens).
    pub fn tag(&self, message: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.signature(message))
    }

    /// The cookie value of a session for `user` ending at `expires`.
    pub fn issue(&self, user: &str, expires: DateTime<Utc>) -> String {
        let payload = URL_SAFE_NO_PAD
            .encode(serde_json::json!({"u": user, "e": expires.timestamp()}).to_string());
        let signature = URL_SAFE_NO_PAD.encode(self.signature(&payload));
        format!("{payload}.{signature}")
    }

    /// The user of a cookie value, if it is signed with this key and has not expired.
    pub fn verify(&self, value: &str, now: DateTime<Utc>) -> Option<String> {
        let (payload, signature) = value.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return None;
        };
        mac.update(payload.as_bytes());
        // Constant time.
        mac.verify_slice(&signature).ok()?;
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let expires = claims["e"].as_i64()?;
        (now.timestamp() < expires).then(|| claims["u"].as_str().map(str::to_string))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_verify_only_with_their_key_until_they_expire() {
        let key = SessionKey::new(Some("k1")).expect("key");
        let now = Utc::now();
        let cookie = key.issue("ann@example.com", now + chrono::Duration::hours(1));
        assert_eq!(key.verify(&cookie, now).as_deref(), Some("ann@example.com"));
        let other = SessionKey::new(Some("k2")).expect("key");
        assert_eq!(other.verify(&cookie, now), None);
        assert_eq!(key.verify(&cookie, now + chrono::Duration::hours(2)), None);
        let (payload, signature) = cookie.split_once('.').expect("two parts");
        let forged = URL_SAFE_NO_PAD.encode(r#"{"u":"root","e":99999999999}"#);
        assert_eq!(key.verify(&format!("{forged}.{signature}"), now), None);
        assert_eq!(key.verify(payload, now), None);
    }
}
