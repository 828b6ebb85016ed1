//! Talking to a running Unleash: its admin API with an admin token, and the client document
//! it serves, each failure named with the route it happened on.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Why the migration stopped; nothing was committed in any case.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("cannot reach Unleash at {url}: {cause}")]
    Unreachable { url: String, cause: String },
    #[error(
        "Unleash refused the token on {route} ({status}): an admin token is needed \
         (an `*:*.…` admin API token or a personal access token of an admin)"
    )]
    NotAdmin { route: String, status: u16 },
    #[error("reading {route} from Unleash failed: {cause}")]
    Route {
        route: String,
        cause: String,
        /// Unleash's answer, when it answered with an error status.
        status: Option<u16>,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error(
        "Unleash changed while it was read (from {before} to {after}): what was read may \
         mix states; run the command again once it holds still"
    )]
    ChangedDuringRead { before: String, after: String },
    #[error("the store: {0}")]
    Store(String),
    #[error("the bundle was refused: {0}")]
    Refused(String),
    #[error("{0}")]
    Output(String),
    /// After the commit: the verification could not finish.
    #[error("the verification could not finish: {0}")]
    Verification(String),
}

/// An Unleash instance's API, as one admin.
#[derive(Clone)]
pub struct UnleashApi {
    base: String,
    http: reqwest::Client,
}

/// How long one request to Unleash may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

impl UnleashApi {
    /// The API of the Unleash at `base` (its base URL, e.g. `https://unleash.example/`),
    /// called with `token`.
    pub fn new(base: &str, token: &str) -> Result<Self, MigrationError> {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(token).map_err(|_| {
            MigrationError::Unsupported("the token holds characters a header cannot".into())
        })?;
        headers.insert(AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| MigrationError::Unsupported(format!("HTTP client: {e}")))?;
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            http,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET route` as JSON.
    pub async fn get(&self, route: &str) -> Result<Value, MigrationError> {
        self.call(Method::GET, route, None, &[])
            .await
            .map(|(v, _)| v)
    }

    /// `POST route` with a JSON body, answered with JSON.
    pub async fn post(&self, route: &str, body: &Value) -> Result<Value, MigrationError> {
        self.call(Method::POST, route, Some(body), &[])
            .await
            .map(|(v, _)| v)
    }

    /// `GET route` (`POST` with `body`) of a route this version may lack: none when Unleash
    /// answers 404.
    pub async fn find(
        &self,
        route: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, MigrationError> {
        let method = if body.is_some() {
            Method::POST
        } else {
            Method::GET
        };
        match self.call(method, route, body, &[]).await {
            Ok((value, _)) => Ok(Some(value)),
            Err(MigrationError::Route {
                status: Some(404), ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET route` with extra headers: the JSON and the `ETag`.
    pub async fn get_with(
        &self,
        route: &str,
        headers: &[(&'static str, &str)],
    ) -> Result<(Value, Option<String>), MigrationError> {
        self.call(Method::GET, route, None, headers).await
    }

    async fn call(
        &self,
        method: Method,
        route: &str,
        body: Option<&Value>,
        headers: &[(&'static str, &str)],
    ) -> Result<(Value, Option<String>), MigrationError> {
        let url = format!("{}{route}", self.base);
        let mut request = self.http.request(method, &url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_connect() || e.is_timeout() || e.is_builder() {
                MigrationError::Unreachable {
                    url: self.base.clone(),
                    cause: full_cause(&e),
                }
            } else {
                MigrationError::Route {
                    route: route.to_string(),
                    cause: full_cause(&e),
                    status: None,
                }
            }
        })?;
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(MigrationError::NotAdmin {
                route: route.to_string(),
                status: status.as_u16(),
            });
        }
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = response.bytes().await.map_err(|e| MigrationError::Route {
            route: route.to_string(),
            cause: full_cause(&e),
            status: None,
        })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(MigrationError::Route {
                route: route.to_string(),
                cause: format!("{status}: {}", text.chars().take(300).collect::<String>()),
                status: Some(status.as_u16()),
            });
        }
        let value = serde_json::from_slice(&bytes).map_err(|e| MigrationError::Route {
            route: route.to_string(),
            cause: format!("the answer is not JSON: {e}"),
            status: None,
        })?;
        Ok((value, etag))
    }
}

/// An error with its sources (reqwest's own message rarely says why).
fn full_cause(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
