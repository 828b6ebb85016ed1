//! How to reach Redis, taken from the settings: the mode, the URL list, TLS files, and how
//! many replicas a commit waits for.

use std::path::PathBuf;
use std::time::Duration;

use redis::{Client, ClientTlsConfig, TlsCertificates};

use crate::config::{RedisMode, StoreSettings};

/// Everything the Redis connection needs from the settings.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Standalone, cluster or sentinel.
    pub mode: RedisMode,
    /// Full URLs: one server, cluster seed nodes, or sentinels.
    pub urls: Vec<String>,
    /// Sentinel mode: the monitored master's name.
    pub sentinel_service: Option<String>,
    /// CA file for `rediss://`.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key files for `rediss://`.
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// Replicas a commit must reach before it is acknowledged (0: no WAIT).
    pub wait_replicas: u32,
    /// How long a commit waits for them.
    pub wait_timeout: Duration,
}

impl RedisOptions {
    /// The options of `settings` for the URL list `urls`.
    pub fn from_settings(settings: &StoreSettings, urls: &str) -> Result<Self, String> {
        Ok(Self {
            mode: settings.redis_mode,
            urls: split_urls(urls)?,
            sentinel_service: settings.redis_sentinel_service.clone(),
            tls_ca: settings.redis_tls_ca.clone(),
            tls_client: settings
                .redis_tls_cert
                .clone()
                .zip(settings.redis_tls_key.clone()),
            wait_replicas: settings.redis_wait_replicas(),
            wait_timeout: Duration::from_millis(settings.redis_wait_timeout_ms),
        })
    }

    /// Options for one standalone server at `url`, without TLS files or WAIT.
    pub fn standalone(url: &str) -> Self {
        Self {
            mode: RedisMode::Standalone,
            urls: vec![url.to_string()],
            sentinel_service: None,
            tls_ca: None,
            tls_client: None,
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
        }
    }

    /// The TLS material named by the settings, read from its files (`None`: the defaults).
    pub(super) fn certificates(&self) -> Result<Option<TlsCertificates>, String> {
        if self.tls_ca.is_none() && self.tls_client.is_none() {
            return Ok(None);
        }
        let read = |path: &PathBuf, what: &str| {
            std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
        };
        let root_cert = self
            .tls_ca
            .as_ref()
            .map(|path| read(path, "the Redis TLS CA file"))
            .transpose()?;
        let client_tls = match &self.tls_client {
            Some((cert, key)) => Some(ClientTlsConfig {
                client_cert: read(cert, "the Redis TLS certificate")?,
                client_key: read(key, "the Redis TLS key")?,
            }),
            None => None,
        };
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// Splits a comma-separated URL list. The first entry is a full URL; a later entry is a full
/// URL too, or `host:port`, which takes the first one's scheme, credentials and database.
pub fn split_urls(list: &str) -> Result<Vec<String>, String> {
    let mut entries = list.split(',').map(str::trim).filter(|e| !e.is_empty());
    let first = entries.next().ok_or("the Redis URL is empty")?;
    let template = url::Url::parse(first).map_err(|e| format!("the Redis URL: {e}"))?;
    let mut urls = vec![first.to_string()];
    for entry in entries {
        if entry.contains("://") {
            urls.push(entry.to_string());
            continue;
        }
        let (host, port) = entry
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| format!("the Redis address {entry:?} is not host:port"))?;
        urls.push(with_address(&template, host, port)?);
    }
    Ok(urls)
}

/// `template` with its host and port replaced.
pub(super) fn with_address(template: &url::Url, host: &str, port: u16) -> Result<String, String> {
    let mut url = template.clone();
    url.set_host(Some(host))
        .map_err(|e| format!("the Redis address {host}: {e}"))?;
    url.set_port(Some(port))
        .map_err(|()| format!("the Redis URL {template} cannot take a port"))?;
    Ok(url.into())
}

/// A client for `url`, with `certificates` when it is a `rediss://` URL.
pub(super) fn client(
    url: &str,
    certificates: &Option<TlsCertificates>,
) -> redis::RedisResult<Client> {
    match certificates {
        Some(certs) if url.starts_with("rediss://") => Client::build_with_tls(url, certs.clone()),
        _ => Client::open(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_entries_take_the_first_ones_scheme_and_credentials() {
        let urls =
            split_urls("rediss://app:pw@10.0.0.1:26379/2, 10.0.0.2:26380,redis://x:1").unwrap();
        assert_eq!(
            urls,
            [
                "rediss://app:pw@10.0.0.1:26379/2",
                "rediss://app:pw@10.0.0.2:26380/2",
                "redis://x:1"
            ]
        );
        assert!(split_urls("redis://a:1,nohost").is_err());
        assert!(split_urls(" , ").is_err());
    }
}
