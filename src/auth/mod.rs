//! Who is calling. Admin callers: HTTP basic auth or a session (`--auth insecure`), anyone
//! (`none`), or an admin API token (`token`; admin tokens are accepted in `insecure` too).
//! Client callers (`/api/client/*`): a client, backend or admin token in `token` mode unless
//! `--client-auth open`, else nobody is asked; a client or backend token also picks the
//! environment served. Frontend tokens are for the frontend API: refused on both. Tokens are checked against the configuration
//! snapshot in memory — a map keyed by the SHA-256 of the secret — so no request, and no flood
//! of bad tokens, ever reaches the store.

mod address;
pub mod rate_limit;
pub mod session;
mod verified;

use std::sync::Arc;

use axum::http::{header, HeaderMap};
use axum_extra::headers::authorization::Basic;
use axum_extra::headers::{Authorization, HeaderMapExt};
use chrono::Utc;

use crate::config::{AuthMode, AuthSettings, ClientAuth};
use crate::domain::api_token::{hash_secret, TokenType};
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::error::{ApiError, Challenge};
use crate::service::Actor;
use crate::snapshot::Snapshot;
use session::SessionKey;
use verified::{Checked, StoredTokens, VerifiedTokens};

pub use address::{client_addr, client_ip};

/// What a valid token lets its holder do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Credential {
    Admin(String),
    /// A client or backend token: its projects (`None`: every one) and its environment.
    Client {
        scope: Option<Vec<String>>,
        environment: String,
    },
    /// A frontend token: for the frontend API and OFREP: its projects and its environment.
    Frontend {
        scope: Option<Vec<String>>,
        environment: String,
    },
}

/// Unleash 7's answer to a token of the wrong type for an endpoint.
const WRONG_TOKEN_TYPE: &str = "invalid token: expected a different token type for this endpoint";

/// The projects a client caller sees: `None` for all.
pub type ClientScope = Option<Vec<String>>;

/// A client caller: what it sees, the environment its token is bound to (`None`: the caller
/// may choose, with `?environment=`; `default` otherwise), and the SHA-256 of its token when
/// it had to send one (its rate-limit key).
#[derive(Debug, Clone, Default)]
pub struct ClientCaller {
    pub scope: ClientScope,
    pub environment: Option<String>,
    pub token_hash: Option<String>,
    /// Whether that token is one of the store's, which can be deleted or expire (rather than
    /// one from the settings).
    pub stored_token: bool,
}

/// A client caller as `ClientCaller`, borrowed from what its token was found to be (the
/// client path's 304 allocates nothing for it).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCallerRef<'a> {
    pub scope: Option<&'a [String]>,
    pub environment: Option<&'a str>,
    pub token_hash: Option<&'a str>,
    pub stored_token: bool,
}

impl ClientCallerRef<'_> {
    /// The owned caller.
    pub fn owned(self) -> ClientCaller {
        ClientCaller {
            scope: self.scope.map(<[String]>::to_vec),
            environment: self.environment.map(str::to_string),
            token_hash: self.token_hash.map(str::to_string),
            stored_token: self.stored_token,
        }
    }
}

/// Identifies callers per the settings.
pub struct Authenticator {
    mode: AuthMode,
    client_auth: ClientAuth,
    /// Tokens from the settings (`--admin-token`, `--client-token`): SHA-256 and credential.
    configured: Vec<(String, Credential)>,
    snapshot: Arc<Snapshot>,
    /// Secrets already checked (a repeat caller is not hashed again).
    verified: VerifiedTokens,
    /// Signs the sessions of the insecure mode.
    pub sessions: SessionKey,
    /// Whether session cookies are marked `Secure` (the public URL is https).
    pub secure_cookies: bool,
}

/// The token of a request as sent: the raw `Authorization` value, or what follows `Bearer`;
/// none for basic auth. Read as bytes, without splitting or checking the whole value: on the
/// client path's 304 this runs on every poll, and a secret checked before is found by its
/// bytes (only ASCII secrets are ever checked, see `ascii_token`).
fn sent_token(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes().trim_ascii();
    let scheme_is = |name: &str| {
        value.len() >= name.len()
            && value[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            && value.get(name.len()).is_none_or(|b| *b == b' ')
    };
    let token = if scheme_is("basic") {
        return None;
    } else if scheme_is("bearer") {
        value["bearer".len()..].trim_ascii()
    } else {
        value
    };
    Some(token).filter(|t| !t.is_empty())
}

/// The token of a request (see `sent_token`), when it is ASCII.
fn token_of(headers: &HeaderMap) -> Option<&str> {
    sent_token(headers).and_then(ascii_token)
}

/// `bytes` as a token: header values are visible ASCII, spaces and tabs (hyper refuses
/// control characters), and anything beyond ASCII is no token.
fn ascii_token(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok().filter(|s| s.is_ascii())
}

/// The value of cookie `name`, if sent.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Equality whose time does not depend on where two strings differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

impl Authenticator {
    /// The authenticator the settings describe, checking stored tokens in `snapshot`; session
    /// cookies are `Secure` when the service's `public_url` is https.
    pub fn new(
        settings: &AuthSettings,
        public_url: Option<&url::Url>,
        snapshot: Arc<Snapshot>,
    ) -> Result<Self, String> {
        let mut configured = Vec::new();
        if let Some(token) = &settings.admin_token {
            configured.push((
                hash_secret(&token.0),
                Credential::Admin("admin-token".into()),
            ));
        }
        if let Some(token) = &settings.client_token {
            configured.push((
                hash_secret(&token.0),
                Credential::Client {
                    scope: None,
                    environment: DEFAULT_ENVIRONMENT.into(),
                },
            ));
        }
        Ok(Self {
            mode: settings.mode,
            client_auth: settings.client_auth,
            configured,
            snapshot,
            verified: VerifiedTokens::default(),
            sessions: SessionKey::new(settings.session_secret.as_ref().map(|s| s.0.as_str()))?,
            secure_cookies: public_url.is_some_and(|u| u.scheme() == "https"),
        })
    }

    /// The mode admin callers identify in.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// What the secret whose SHA-256 is `hash` lets its holder do; else 401 with `challenge`
    /// (or the expiry), or 503 while the stored tokens are not loaded yet.
    fn credential(&self, hash: &str, challenge: Challenge) -> Result<Credential, ApiError> {
        self.check_hash(hash, challenge, None)
            .map(|checked| checked.credential)
    }

    /// What the secret whose SHA-256 is `hash` is, checked against the settings' tokens and
    /// then the stored ones (`tokens`, else the snapshot's).
    fn check_hash(
        &self,
        hash: &str,
        challenge: Challenge,
        tokens: Option<&StoredTokens>,
    ) -> Result<Checked, ApiError> {
        if let Some((_, credential)) = self.configured.iter().find(|(h, _)| same(h, hash)) {
            return Ok(Checked {
                hash: hash.to_string(),
                credential: credential.clone(),
                stored: false,
                expires_at_ms: None,
            });
        }
        if !self.snapshot.is_ready() {
            // An SDK may take a 401 as final; the token may well be valid.
            return Err(ApiError::Unavailable(
                "The configuration (and its API tokens) has not been loaded yet".into(),
            ));
        }
        let find = |tokens: &StoredTokens| {
            let token = tokens.get(hash).ok_or(ApiError::Unauthorized(challenge))?;
            if token.expired(Utc::now()) {
                return Err(ApiError::Unauthorized(Challenge::Expired));
            }
            let credential = match token.kind {
                TokenType::Admin => Credential::Admin(token.username.clone()),
                TokenType::Client | TokenType::Backend => Credential::Client {
                    scope: token.scope().map(<[String]>::to_vec),
                    environment: token.environment().to_string(),
                },
                TokenType::Frontend => Credential::Frontend {
                    scope: token.scope().map(<[String]>::to_vec),
                    environment: token.environment().to_string(),
                },
            };
            Ok(Checked {
                hash: hash.to_string(),
                credential,
                stored: true,
                expires_at_ms: token.expires_at.map(|at| at.timestamp_millis()),
            })
        };
        match tokens {
            Some(tokens) => find(tokens),
            None => self.snapshot.peek(|state| find(&state.api_tokens)),
        }
    }

    /// Runs `use_checked` on what `secret` lets its holder do; else 401 with `challenge` (or
    /// the expiry), or 503 while the stored tokens are not loaded yet. A secret checked
    /// before against the current stored tokens is found by a map lookup of its bytes (expiry
    /// still checked, to the coarse clock's 100 ms); any other must be ASCII, and is hashed
    /// and remembered when valid.
    fn with_secret<R>(
        &self,
        secret: &[u8],
        challenge: Challenge,
        use_checked: impl FnOnce(&Checked) -> R,
    ) -> Result<R, ApiError> {
        let ready = self.snapshot.is_ready();
        // Read before the tokens the secret is checked against (see `VerifiedTokens`).
        let generation = self.snapshot.tokens_generation();
        if ready {
            let verified = self.verified.current(generation);
            if let Some(checked) = verified.as_ref().and_then(|v| v.get(secret)) {
                if checked
                    .expires_at_ms
                    .is_some_and(|at| at <= crate::usage::coarse_now_ms())
                {
                    return Err(ApiError::Unauthorized(Challenge::Expired));
                }
                return Ok(use_checked(checked));
            }
        }
        let secret = ascii_token(secret).ok_or(ApiError::Unauthorized(challenge))?;
        let hash = hash_secret(secret);
        if !ready {
            return self
                .check_hash(&hash, challenge, None)
                .map(|checked| use_checked(&checked));
        }
        self.snapshot.peek(|state| {
            let checked = self.check_hash(&hash, challenge, Some(&state.api_tokens))?;
            let answer = use_checked(&checked);
            self.verified.remember(secret, generation, checked);
            Ok(answer)
        })
    }

    /// The user of the admin token whose secret has SHA-256 `hash`, while it is one (the
    /// admin UI's sessions in token mode end when their token is deleted or expires).
    pub fn admin_token_user(&self, hash: &str) -> Option<String> {
        match self.credential(hash, Challenge::Token) {
            Ok(Credential::Admin(user)) => Some(user),
            _ => None,
        }
    }

    /// The admin caller of a request, with the SHA-256 of the token it was identified by (its
    /// rate-limit key), or 401 (not identified) / 403 (a client token).
    pub fn admin(&self, headers: &HeaderMap) -> Result<(Actor, Option<String>), ApiError> {
        let challenge = match self.mode {
            AuthMode::None => return Ok((Actor("unknown".into()), None)),
            AuthMode::Insecure => Challenge::Basic,
            AuthMode::Token => Challenge::Token,
        };
        if let Some(secret) = token_of(headers) {
            return self.with_secret(secret.as_bytes(), challenge, |checked| {
                match &checked.credential {
                    Credential::Admin(username) => {
                        Ok((Actor(username.clone()), Some(checked.hash.clone())))
                    }
                    Credential::Client { .. } => Err(ApiError::Forbidden(
                        "A client token cannot use the admin API; use an admin token".into(),
                    )),
                    Credential::Frontend { .. } => {
                        Err(ApiError::Forbidden(WRONG_TOKEN_TYPE.into()))
                    }
                }
            })?;
        }
        if self.mode == AuthMode::Insecure {
            // The insecure method: the basic-auth username is the identity, the password is
            // not checked; or the user of a session.
            if let Some(auth) = headers.typed_get::<Authorization<Basic>>() {
                let username = auth.username().trim();
                if !username.is_empty() {
                    return Ok((Actor(username.to_string()), None));
                }
            }
            if let Some(user) = cookie(headers, session::COOKIE)
                .and_then(|value| self.sessions.verify(value, Utc::now()))
            {
                return Ok((Actor(user), None));
            }
        }
        Err(ApiError::Unauthorized(challenge))
    }

    /// The client caller of a request, or 401 when a token is required and missing, unknown
    /// or expired, or 403 for a frontend token.
    pub fn client(&self, headers: &HeaderMap) -> Result<ClientCaller, ApiError> {
        self.client_with(headers, |caller| caller.owned())
    }

    /// Runs `use_caller` on the client caller of a request, borrowed (see `client`).
    pub fn client_with<R>(
        &self,
        headers: &HeaderMap,
        use_caller: impl FnOnce(ClientCallerRef<'_>) -> R,
    ) -> Result<R, ApiError> {
        if self.mode != AuthMode::Token || self.client_auth == ClientAuth::Open {
            return Ok(use_caller(ClientCallerRef::default()));
        }
        let Some(secret) = sent_token(headers) else {
            return Err(ApiError::Unauthorized(Challenge::Token));
        };
        self.with_secret(secret, Challenge::Token, |checked| {
            let (scope, environment) = match &checked.credential {
                Credential::Admin(_) => (None, None),
                Credential::Client { scope, environment } => {
                    (scope.as_deref(), Some(environment.as_str()))
                }
                Credential::Frontend { .. } => {
                    return Err(ApiError::Forbidden(WRONG_TOKEN_TYPE.into()))
                }
            };
            Ok(use_caller(ClientCallerRef {
                scope,
                environment,
                token_hash: Some(&checked.hash),
                stored_token: checked.stored,
            }))
        })?
    }

    /// The caller of the frontend API (`accept_backend` false) or OFREP (true) with `secret`:
    /// a frontend token (or, for OFREP, a client or backend token) gives its environment and
    /// projects, an admin token `default` and every project; 401 when a token is required and missing, unknown or expired; 403 for a
    /// token of another type. Where no token is required (`--auth` other than `token`, or
    /// `--client-auth open`), a caller without one is served `default` and every project, and
    /// a token that is not one of these is ignored.
    pub fn evaluation(
        &self,
        secret: Option<&str>,
        accept_backend: bool,
    ) -> Result<EvaluationCaller, ApiError> {
        let required = self.mode == AuthMode::Token && self.client_auth != ClientAuth::Open;
        let open = || EvaluationCaller {
            scope: None,
            environment: DEFAULT_ENVIRONMENT.to_string(),
            token_hash: None,
        };
        let Some(secret) = secret else {
            return match required {
                true => Err(ApiError::Unauthorized(Challenge::Token)),
                false => Ok(open()),
            };
        };
        let checked = self.with_secret(secret.as_bytes(), Challenge::Token, |checked| {
            let (scope, environment) = match &checked.credential {
                Credential::Frontend { scope, environment } => (scope.clone(), environment.clone()),
                Credential::Client { scope, environment } if accept_backend => {
                    (scope.clone(), environment.clone())
                }
                // As on the client API: `default`, every project.
                Credential::Admin(_) => (None, DEFAULT_ENVIRONMENT.to_string()),
                _ if !required => return Ok(open()),
                _ => return Err(ApiError::Forbidden(WRONG_TOKEN_TYPE.into())),
            };
            Ok(EvaluationCaller {
                scope,
                environment,
                token_hash: Some(checked.hash.clone()),
            })
        });
        match checked {
            Ok(caller) => caller,
            Err(ApiError::Unauthorized(_)) if !required => Ok(open()),
            Err(e) => Err(e),
        }
    }
}

/// A caller of the frontend API or OFREP: the environment it is served, the projects it sees
/// (`None`: all) and the SHA-256 of its token when it sent one (its rate-limit key).
#[derive(Debug, Clone)]
pub struct EvaluationCaller {
    pub environment: String,
    pub scope: ClientScope,
    pub token_hash: Option<String>,
}

/// The token of a request: the `Authorization` header's (raw or `Bearer`), else OFREP's
/// `X-API-Key`.
pub fn request_token(headers: &HeaderMap) -> Option<&str> {
    token_of(headers).or_else(|| {
        headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|t| !t.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        map
    }

    #[test]
    fn tokens_come_raw_or_as_bearer_never_from_basic_auth() {
        assert_eq!(token_of(&headers(&[("authorization", "abc")])), Some("abc"));
        assert_eq!(
            token_of(&headers(&[("authorization", "Bearer  abc ")])),
            Some("abc")
        );
        assert_eq!(
            token_of(&headers(&[("authorization", "Basic YWRtaW46")])),
            None
        );
        assert_eq!(token_of(&headers(&[("authorization", "Bearer")])), None);
        assert_eq!(token_of(&headers(&[])), None);
        // A scheme is a whole word, in any case; a value beyond ASCII is no token.
        for (sent, token) in [
            ("bearer abc", Some("abc")),
            ("BEARER\tabc", Some("BEARER\tabc")),
            ("Bearerabc", Some("Bearerabc")),
            ("Basicabc", Some("Basicabc")),
            ("basic", None),
            ("  *:production.4f2a  ", Some("*:production.4f2a")),
            ("   ", None),
        ] {
            assert_eq!(
                token_of(&headers(&[("authorization", sent)])),
                token,
                "{sent:?}"
            );
        }
        let mut map = HeaderMap::new();
        map.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(b"tok\xe9n").expect("obs-text is a header value"),
        );
        assert_eq!(token_of(&map), None);
        // As sent, for the lookup of secrets checked before (only ASCII ones ever are).
        assert_eq!(sent_token(&map), Some(&b"tok\xe9n"[..]));
        assert_eq!(ascii_token(b"tok\xe9n"), None);
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = headers(&[("cookie", "a=1; flagpole-session=xyz"), ("cookie", "b=2")]);
        assert_eq!(cookie(&h, "flagpole-session"), Some("xyz"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "c"), None);
    }

    #[test]
    fn equality_is_exact() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
    }
}
