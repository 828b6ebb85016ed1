//! Settings, from flags or environment variables (`flagpole --help` lists them).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, ValueEnum};

mod import_unleash;
mod streaming;
pub use import_unleash::{Command, ImportUnleashArgs};
pub use streaming::StreamingSettings;

/// The memory, in MiB, redb may hold of the file's pages (`--embedded-cache-mib`). redb's own
/// default is 1 GiB, which a replica under writes fills with pages of the ever-growing event
/// log (86–90 MiB peak after two 8 s write rounds at 100 toggles, against 40–44 with 16 MiB).
/// 4 MiB keeps three environments of 10,000 toggles under 110 MiB (99–103 MiB peak, against
/// 116 with 16), with no more CPU per write: the pages a write touches beyond it come from the
/// kernel's page cache.
pub const DEFAULT_EMBEDDED_CACHE_MIB: u32 = 4;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// How Redis is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisMode {
    /// One Redis server (possibly with replicas nobody fails over to automatically).
    Standalone,
    /// A Redis Cluster: commands follow the slot map and its redirections.
    Cluster,
    /// A master watched by Redis Sentinel: the replica follows the master it names.
    Sentinel,
}

/// How admin callers identify themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// HTTP basic auth; the username is the caller's identity, the password is not checked
    /// (the spec's "insecure" method). Requests without it get 401.
    Insecure,
    /// No identification: every admin call acts as `unknown`. Local development only.
    None,
    /// API tokens: admin calls need an admin token; client calls need a client or admin token
    /// (unless `--client-auth open`).
    Token,
}

/// Whether the client API asks for a token in `--auth token` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClientAuth {
    /// A client or admin token.
    Token,
    /// No token: the client API is open (as in the other modes).
    Open,
}

/// A secret given in the settings; never shown by `Debug` (settings may be logged).
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(pub String);

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"*****\"")
    }
}

/// Takes any value: clap's refusal would print it (it is a secret). `Settings::check` says
/// what is wrong without it.
fn parse_token(value: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString(value.trim().to_string()))
}

impl SecretString {
    /// Whether it is usable as a token: at least 16 characters, no spaces or controls.
    fn is_acceptable(&self) -> bool {
        self.0.len() >= 16 && !self.0.chars().any(|c| c.is_whitespace() || c.is_control())
    }
}

/// Flagpole's settings, one section per subsystem; `--help` shows each under its heading.
#[derive(Debug, Clone, Parser)]
#[command(name = "flagpole", version, about = "Flagpole feature-toggle service")]
pub struct Settings {
    /// The HTTP server, probes and shutdown.
    #[command(flatten)]
    pub server: ServerSettings,

    /// Redis or the embedded store.
    #[command(flatten)]
    pub store: StoreSettings,

    /// The snapshot's refresh and write forwarding.
    #[command(flatten)]
    pub replication: ReplicationSettings,

    /// The start-up import.
    #[command(flatten)]
    pub import: ImportSettings,

    /// Authentication and rate limits.
    #[command(flatten)]
    pub auth: AuthSettings,

    /// The client usage flush.
    #[command(flatten)]
    pub usage: UsageSettings,

    /// The addon delivery worker.
    #[command(flatten)]
    pub delivery: DeliverySettings,

    /// The limits on segments.
    #[command(flatten)]
    pub segments: SegmentSettings,

    /// SSE streaming and its stream log.
    #[command(flatten)]
    pub streaming: StreamingSettings,

    /// Logs, traces and metrics.
    #[command(flatten)]
    pub telemetry: TelemetrySettings,

    /// A one-off command instead of serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The HTTP server: address, public URL, proxy, CORS, limits, probes and the shutdown drain.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerSettings {
    /// Address to listen on.
    #[arg(long, env = "FLAGPOLE_LISTEN", default_value = "0.0.0.0:4242")]
    pub listen: SocketAddr,

    /// This service's public base URL (e.g. `https://flags.example.com`): chat messages link
    /// to the toggles under it.
    #[arg(long, env = "FLAGPOLE_PUBLIC_URL")]
    pub public_url: Option<url::Url>,

    /// Take the client IP from the last `X-Forwarded-For` entry, the one the proxy or load
    /// balancer in front added (only behind one that sets it; earlier entries are the
    /// client's word); otherwise the connection's address is used.
    #[arg(long, env = "FLAGPOLE_TRUST_PROXY", default_value_t = false)]
    pub trust_proxy: bool,

    /// Origins browsers may call the API from (CORS), comma-separated; unset: none (no CORS
    /// headers are sent).
    #[arg(long, env = "FLAGPOLE_CORS_ORIGIN", value_delimiter = ',', value_parser = parse_origin)]
    pub cors_origin: Vec<axum::http::HeaderValue>,

    /// Origins browsers may call the frontend API and OFREP from (Unleash's "frontend API
    /// origins"), comma-separated; `*` (the default): any origin. Preflight requests are
    /// answered and the ETag is readable by scripts.
    #[arg(long, env = "FLAGPOLE_FRONTEND_ORIGIN", value_delimiter = ',', default_value = "*", value_parser = parse_frontend_origin)]
    pub frontend_origin: Vec<axum::http::HeaderValue>,

    /// Largest body of an admin request, in KiB (the state import has its own limit); larger
    /// ones get 413.
    #[arg(long, env = "FLAGPOLE_ADMIN_BODY_LIMIT_KIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub admin_body_limit_kib: u64,

    /// Largest body `POST /api/admin/state/import` takes, in MiB (an export of 10,000 toggles
    /// is about 6–8 MiB); larger ones get 413. Kept well below what one store commit can
    /// carry within the store's response timeout.
    #[arg(long, env = "FLAGPOLE_IMPORT_BODY_LIMIT_MIB", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub import_body_limit_mib: u64,

    /// Longest an admin request may take, in milliseconds (then 504), and a client report's
    /// body may take to arrive (then 408).
    #[arg(long, env = "FLAGPOLE_REQUEST_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub request_timeout_ms: u64,

    /// Longest a response may wait for the client to take more bytes, in milliseconds; then
    /// the connection is closed. A client that stops reading (a stalled stream, a stuck
    /// download) would otherwise hold its connection for ever.
    #[arg(long, env = "FLAGPOLE_WRITE_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub write_timeout_ms: u64,

    /// How long the store may fail to answer before `/health/ready` fails, in milliseconds:
    /// a brief Redis blip must not take every replica out of the load balancer at once
    /// (client reads are served from the snapshot meanwhile).
    #[arg(long, env = "FLAGPOLE_READINESS_GRACE_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub readiness_grace_ms: u64,

    /// On SIGTERM or Ctrl-C: how long the replica keeps serving with `/health/ready` failing,
    /// in milliseconds, so load balancers stop sending it requests before it stops; then
    /// the graceful shutdown runs (in-flight requests and deliveries finish, usage is flushed).
    #[arg(long, env = "FLAGPOLE_SHUTDOWN_DRAIN_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub shutdown_drain_ms: u64,
}

/// The store: Redis (standalone, cluster or sentinel; TLS; WAIT) or the embedded redb file.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Store (Redis or embedded)")]
pub struct StoreSettings {
    /// Redis URL (redis://[user:password@]host:port/db, rediss://… for TLS, or
    /// redis+unix:///path). In cluster and sentinel modes a comma-separated list: cluster seed
    /// nodes or sentinel addresses (after the first, `host:port` entries inherit its scheme,
    /// credentials and database). Unset: the embedded single-node store in --data-dir.
    #[arg(long, env = "FLAGPOLE_REDIS_URL")]
    pub redis_url: Option<String>,

    /// How Redis is deployed: one server (`standalone`), a Redis Cluster (`cluster`: the URLs
    /// are seed nodes) or a master watched by Redis Sentinel (`sentinel`: the URLs are the
    /// sentinels).
    #[arg(
        long,
        env = "FLAGPOLE_REDIS_MODE",
        value_enum,
        default_value = "standalone"
    )]
    pub redis_mode: RedisMode,

    /// Sentinel mode: the name the sentinels monitor the master under.
    #[arg(long, env = "FLAGPOLE_REDIS_SENTINEL_SERVICE")]
    pub redis_sentinel_service: Option<String>,

    /// PEM file of the certificate authority a `rediss://` server's certificate must chain to
    /// (unset: the system's roots).
    #[arg(long, env = "FLAGPOLE_REDIS_TLS_CA")]
    pub redis_tls_ca: Option<PathBuf>,

    /// PEM file of a client certificate presented to a `rediss://` server (with
    /// --redis-tls-key).
    #[arg(long, env = "FLAGPOLE_REDIS_TLS_CERT")]
    pub redis_tls_cert: Option<PathBuf>,

    /// PEM file of the private key of --redis-tls-cert.
    #[arg(long, env = "FLAGPOLE_REDIS_TLS_KEY")]
    pub redis_tls_key: Option<PathBuf>,

    /// Replicas that must hold a commit (Redis `WAIT`) before it is acknowledged; fewer
    /// within --redis-wait-timeout-ms answer 503 (the write may still have been applied).
    /// Default: 1 in cluster and sentinel modes, 0 (no wait) in standalone mode.
    #[arg(long, env = "FLAGPOLE_REDIS_WAIT_REPLICAS", value_parser = clap::value_parser!(u32).range(0..=16))]
    pub redis_wait_replicas: Option<u32>,

    /// How long a commit waits for --redis-wait-replicas, in milliseconds.
    #[arg(long, env = "FLAGPOLE_REDIS_WAIT_TIMEOUT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub redis_wait_timeout_ms: u64,

    /// Prefix of every Redis key, so several installations can share one Redis.
    #[arg(long, env = "FLAGPOLE_KEY_PREFIX", default_value = "flagpole", value_parser = parse_key_prefix)]
    pub key_prefix: String,

    /// Directory of the embedded store's files (used when no Redis URL is set).
    #[arg(long, env = "FLAGPOLE_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Memory the embedded store may hold of its file's pages, in MiB (the rest is read from
    /// the file when needed).
    #[arg(long, env = "FLAGPOLE_EMBEDDED_CACHE_MIB", default_value_t = DEFAULT_EMBEDDED_CACHE_MIB, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub embedded_cache_mib: u32,
}

/// How a replica keeps its snapshot in step with the store, and where its writes are committed.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Replication")]
pub struct ReplicationSettings {
    /// Fallback interval of the snapshot's version check, in milliseconds (pub/sub normally
    /// announces new versions at once).
    #[arg(long, env = "FLAGPOLE_REFRESH_INTERVAL_MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub refresh_interval_ms: u64,

    /// Redis store: send admin writes on to the one replica holding the committer lease,
    /// which commits every replica's writes (see `forwarding`), instead of committing them
    /// where they arrive. No races between replicas and a lower p99 under write storms, but
    /// writes/s are then one replica's, however many there are; replicas must reach each
    /// other on the listening port.
    #[arg(long, env = "FLAGPOLE_FORWARD_WRITES", default_value_t = false)]
    pub forward_writes: bool,
}

/// The state document a replica applies when it starts.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Start-up import")]
pub struct ImportSettings {
    /// A state document (JSON or YAML) to apply when the replica starts, once per store and
    /// document: with many replicas starting at once, one applies it and the others see it
    /// applied.
    #[arg(long, env = "FLAGPOLE_IMPORT_FILE")]
    pub import_file: Option<PathBuf>,

    /// How the start-up document meets what the store holds: `keep` creates what is missing
    /// and never overrides; `overwrite` also replaces what differs; `drop` also removes (or,
    /// for toggles, archives) what the document does not list.
    #[arg(long, env = "FLAGPOLE_IMPORT_MODE", value_enum, default_value = "keep")]
    pub import_mode: ImportMode,
}

/// Who may call: the auth mode, configured tokens, the session key and per-caller rate limits.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Authentication and rate limits")]
pub struct AuthSettings {
    /// How admin callers identify themselves.
    #[arg(
        id = "auth",
        long = "auth",
        value_name = "AUTH",
        env = "FLAGPOLE_AUTH",
        value_enum,
        default_value = "insecure"
    )]
    pub mode: AuthMode,

    /// With `--auth token`: whether the client API (`/api/client/*`) needs a client or admin
    /// token (`token`) or is open (`open`).
    #[arg(
        long,
        env = "FLAGPOLE_CLIENT_AUTH",
        value_enum,
        default_value = "token"
    )]
    pub client_auth: ClientAuth,

    /// An admin token this replica accepts besides the stored ones (what a Kubernetes Secret
    /// provides to bootstrap an installation); acts as `admin-token`.
    #[arg(long, env = "FLAGPOLE_ADMIN_TOKEN", hide_env_values = true, value_parser = parse_token)]
    pub admin_token: Option<SecretString>,

    /// A client token this replica accepts besides the stored ones (for simple setups); sees
    /// every project.
    #[arg(long, env = "FLAGPOLE_CLIENT_TOKEN", hide_env_values = true, value_parser = parse_token)]
    pub client_token: Option<SecretString>,

    /// The key sessions (`POST /api/admin/login`, insecure mode) are signed with; set the same
    /// on every replica. Unset: a random key per process (a session then works on the replica
    /// that issued it, until it restarts).
    #[arg(long, env = "FLAGPOLE_SESSION_SECRET", hide_env_values = true, value_parser = parse_token)]
    pub session_secret: Option<SecretString>,

    /// Requests per second one caller (a token, or a client IP without one) may make to the
    /// client features path, with bursts of twice that; 0: no limit. Shared by the replicas
    /// through Redis.
    #[arg(long, env = "FLAGPOLE_RATE_LIMIT_CLIENT", default_value_t = 0.0, value_parser = parse_rate)]
    pub rate_limit_client: f64,

    /// The same for client registrations and metrics.
    #[arg(long, env = "FLAGPOLE_RATE_LIMIT_USAGE", default_value_t = 0.0, value_parser = parse_rate)]
    pub rate_limit_usage: f64,

    /// The same for the admin API.
    #[arg(long, env = "FLAGPOLE_RATE_LIMIT_ADMIN", default_value_t = 0.0, value_parser = parse_rate)]
    pub rate_limit_admin: f64,
}

/// How client usage (registrations, metrics) aggregated in memory reaches the store.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Client usage")]
pub struct UsageSettings {
    /// How often each replica writes the client usage it aggregated (registrations, metrics,
    /// which configuration each instance holds) to the store, in milliseconds; also written on
    /// graceful shutdown. A crash loses at most this much of one replica's counts.
    #[arg(long, env = "FLAGPOLE_METRICS_FLUSH_INTERVAL_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub metrics_flush_interval_ms: u64,
}

/// The addon delivery worker: whether it runs, its retries, timeouts and concurrency.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Addon delivery")]
pub struct DeliverySettings {
    /// Run the addon delivery worker on this replica (any number of replicas may: they share
    /// the queue, each job goes to one of them).
    #[arg(id = "delivery", long = "delivery", value_name = "DELIVERY", env = "FLAGPOLE_DELIVERY", default_value_t = true, action = clap::ArgAction::Set)]
    pub enabled: bool,

    /// Attempts per delivery before it becomes a dead letter.
    #[arg(long, env = "FLAGPOLE_DELIVERY_MAX_ATTEMPTS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub delivery_max_attempts: u32,

    /// Timeout of one delivery request, in milliseconds (connecting, sending and the answer).
    #[arg(long, env = "FLAGPOLE_DELIVERY_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub delivery_timeout_ms: u64,

    /// Delay before the first retry, in milliseconds; it doubles with every attempt (with
    /// jitter), up to `--delivery-backoff-max-ms`.
    #[arg(long, env = "FLAGPOLE_DELIVERY_BACKOFF_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub delivery_backoff_ms: u64,

    /// Longest delay between two attempts, in milliseconds (a receiver's `Retry-After` may ask
    /// for up to an hour).
    #[arg(long, env = "FLAGPOLE_DELIVERY_BACKOFF_MAX_MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub delivery_backoff_max_ms: u64,

    /// A job taken by a replica and not settled within this many milliseconds (the replica
    /// died) is claimed by another (Redis store). A job waits for room at most a quarter of
    /// it and its attempt ends by three quarters of it: keep it well above the request timeout.
    #[arg(long, env = "FLAGPOLE_DELIVERY_VISIBILITY_TIMEOUT_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(200..=3_600_000))]
    pub delivery_visibility_timeout_ms: u64,

    /// Deliveries one replica makes at once, over all addons.
    #[arg(long, env = "FLAGPOLE_DELIVERY_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub delivery_concurrency: u32,

    /// Deliveries one replica makes at once to one addon (a receiver that hangs holds at most
    /// this many).
    #[arg(long, env = "FLAGPOLE_DELIVERY_CONCURRENCY_PER_ADDON", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub delivery_concurrency_per_addon: u32,
}

/// The limits on segments (Unleash's `UNLEASH_SEGMENTS_LIMIT`,
/// `UNLEASH_STRATEGY_SEGMENTS_LIMIT` and `UNLEASH_SEGMENT_VALUES_LIMIT`, with their defaults).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Segments")]
pub struct SegmentSettings {
    /// Segments the configuration may hold; creating one more answers 400.
    #[arg(long, env = "FLAGPOLE_SEGMENTS_LIMIT", default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub segments_limit: u32,

    /// Segments one strategy may use (admin writes; an import keeps what it brings).
    #[arg(long, env = "FLAGPOLE_STRATEGY_SEGMENTS_LIMIT", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub strategy_segments_limit: u32,

    /// Values one segment may hold, summed over its constraints.
    #[arg(long, env = "FLAGPOLE_SEGMENT_VALUES_LIMIT", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub segment_values_limit: u32,
}

impl SegmentSettings {
    /// The limits the service enforces.
    pub fn limits(&self) -> crate::domain::segment::SegmentLimits {
        crate::domain::segment::SegmentLimits {
            segments: self.segments_limit as usize,
            per_strategy: self.strategy_segments_limit as usize,
            values: self.segment_values_limit as usize,
        }
    }
}

/// Logs, traces and Prometheus metrics.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Telemetry")]
pub struct TelemetrySettings {
    /// Log line format.
    #[arg(long, env = "FLAGPOLE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Trace one client API request (`/api/client/*`) in this many, when OpenTelemetry export
    /// is on (`OTEL_EXPORTER_OTLP_ENDPOINT`); 0 (the default) traces none and adds nothing to
    /// the hot path.
    #[arg(long, env = "FLAGPOLE_TRACE_CLIENT_ONE_IN", default_value_t = 0)]
    pub trace_client_one_in: u64,

    /// Whether spans are exported (set by the binary from the `OTEL_*` variables, not a flag).
    #[arg(skip)]
    pub traces_exported: bool,

    /// Per-toggle usage counters in Prometheus (`flagpole_feature_toggle_usage_total` by
    /// toggle, application and yes/no), at most this many series; 0 turns them off.
    #[arg(
        long,
        env = "FLAGPOLE_PROMETHEUS_TOGGLE_USAGE_SERIES",
        default_value_t = 0
    )]
    pub prometheus_toggle_usage_series: usize,
}

/// How the start-up import meets existing records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportMode {
    /// Create what is missing; never override.
    Keep,
    /// Create what is missing and replace what differs.
    Overwrite,
    /// Like `overwrite`, and remove what the document does not list.
    Drop,
}

fn parse_rate(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && (0.0..=1e7).contains(&rate) => Ok(rate),
        _ => Err("a rate is a number of requests per second from 0 to 10,000,000".into()),
    }
}

fn parse_origin(value: &str) -> Result<axum::http::HeaderValue, String> {
    let value = value.trim();
    let url = url::Url::parse(value).map_err(|e| format!("{value}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.path() != "/" || url.query().is_some() {
        return Err(format!("{value}: an origin is scheme://host[:port]"));
    }
    axum::http::HeaderValue::from_str(value.trim_end_matches('/')).map_err(|e| e.to_string())
}

/// An origin, or `*` for any.
fn parse_frontend_origin(value: &str) -> Result<axum::http::HeaderValue, String> {
    match value.trim() {
        "*" => Ok(axum::http::HeaderValue::from_static("*")),
        other => parse_origin(other),
    }
}

fn parse_key_prefix(value: &str) -> Result<String, String> {
    if value.is_empty() || value.contains(['{', '}', ' ']) {
        return Err("the key prefix must be non-empty without braces or spaces".into());
    }
    Ok(value.to_string())
}

impl Settings {
    /// Refuses settings clap cannot judge: secrets it would show, and flags that cannot work
    /// together.
    pub fn check(&self) -> Result<(), String> {
        self.auth.check()?;
        self.store.check()?;
        self.streaming.check()
    }

    /// Settings for tests and embedding: the defaults, as if no flag or variable were given.
    pub fn defaults() -> Self {
        Self::parse_from(["flagpole"])
    }
}

impl AuthSettings {
    /// Refuses tokens and secrets clap cannot judge without showing them.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("--admin-token", &self.admin_token),
            ("--client-token", &self.client_token),
            ("--session-secret", &self.session_secret),
        ] {
            if value.as_ref().is_some_and(|v| !v.is_acceptable()) {
                return Err(format!(
                    "{name} must have at least 16 characters and no spaces (its value is not shown)"
                ));
            }
        }
        Ok(())
    }
}

impl StoreSettings {
    /// Refuses Redis settings that cannot work together.
    pub fn check(&self) -> Result<(), String> {
        let Some(url) = self.redis_url.as_deref().filter(|u| !u.trim().is_empty()) else {
            return Ok(());
        };
        let several = url.contains(',');
        match self.redis_mode {
            RedisMode::Standalone if several => {
                return Err("several Redis URLs need --redis-mode cluster or sentinel".into())
            }
            RedisMode::Sentinel if self.redis_sentinel_service.is_none() => {
                return Err("--redis-mode sentinel needs --redis-sentinel-service".into())
            }
            _ => {}
        }
        if self.redis_tls_cert.is_some() != self.redis_tls_key.is_some() {
            return Err("--redis-tls-cert and --redis-tls-key go together".into());
        }
        let tls_files = self.redis_tls_ca.is_some() || self.redis_tls_cert.is_some();
        if tls_files && !url.trim_start().starts_with("rediss://") {
            return Err(
                "--redis-tls-ca, --redis-tls-cert and --redis-tls-key need a rediss:// URL".into(),
            );
        }
        Ok(())
    }

    /// Replicas a commit waits for: the setting, or the mode's default.
    pub fn redis_wait_replicas(&self) -> u32 {
        self.redis_wait_replicas.unwrap_or(match self.redis_mode {
            RedisMode::Standalone => 0,
            RedisMode::Cluster | RedisMode::Sentinel => 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--auth` and `--delivery` are kept as flags while their fields are named for what they
    /// hold in their section (`auth.mode`, `delivery.enabled`).
    #[test]
    fn renamed_fields_keep_their_flags() {
        let settings = Settings::parse_from(["flagpole", "--auth", "token", "--delivery", "false"]);
        assert_eq!(settings.auth.mode, AuthMode::Token);
        assert!(!settings.delivery.enabled);
        let defaults = Settings::defaults();
        assert_eq!(defaults.auth.mode, AuthMode::Insecure);
        assert!(defaults.delivery.enabled);
    }

    #[test]
    fn each_section_checks_its_own_flags() {
        let mut settings = Settings::defaults();
        settings.auth.admin_token = Some(SecretString("short".into()));
        assert!(settings
            .check()
            .is_err_and(|e| e.starts_with("--admin-token must have")));
        let mut settings = Settings::defaults();
        settings.store.redis_url = Some("redis://a:6379,redis://b:6379".into());
        assert_eq!(
            settings.check(),
            Err("several Redis URLs need --redis-mode cluster or sentinel".into())
        );
    }
}
