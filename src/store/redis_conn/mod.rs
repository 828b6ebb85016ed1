//! The one place that knows how Redis is deployed. Every Redis component (store, usage,
//! deliveries, rate limits, pub/sub) talks through a `RedisConn`, which is a reconnecting
//! connection to one server (standalone), a cluster connection that follows the slot map
//! (cluster), or the connection to the master the sentinels name, replaced as soon as they
//! switch (sentinel). `Connector` opens them and checks at start-up what can never work
//! (credentials, TLS).

pub mod options;
mod sentinel;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, ErrorKind, RedisError, RedisFuture, Value};
use tokio::sync::watch;

use crate::config::RedisMode;
use crate::store::StoreError;
pub use options::RedisOptions;
use sentinel::SentinelMaster;

/// A connection to the configured Redis; cheap to clone (clones share it).
#[derive(Clone)]
pub enum RedisConn {
    /// One server; reconnects by itself.
    Standalone(ConnectionManager),
    /// A connection of its own, for blocking reads.
    Dedicated(MultiplexedConnection),
    /// A Redis Cluster: commands go where the slot map says, redirections are followed.
    Cluster(ClusterConnection),
    /// The master the sentinels currently name.
    Sentinel(Arc<SentinelMaster>),
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Standalone(c) => c.req_packed_command(cmd),
            RedisConn::Dedicated(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => c.req_packed_command(cmd),
            RedisConn::Sentinel(master) => Box::pin(async move {
                let mut conn = master.current().conn.clone();
                let result = conn.req_packed_command(cmd).await;
                if let Err(e) = &result {
                    master.on_error(e);
                }
                result
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Dedicated(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            // One node for the whole pipeline: a commit and its WAIT must meet the same master.
            RedisConn::Sentinel(master) => Box::pin(async move {
                let mut conn = master.current().conn.clone();
                let result = conn.req_packed_commands(pipeline, offset, count).await;
                if let Err(e) = &result {
                    master.on_error(e);
                }
                result
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Standalone(c) => c.get_db(),
            RedisConn::Dedicated(c) => c.get_db(),
            RedisConn::Cluster(c) => c.get_db(),
            RedisConn::Sentinel(master) => master.current().conn.get_db(),
        }
    }
}

/// Where connections come from, per mode.
enum Target {
    Standalone(Client),
    Cluster {
        client: Box<ClusterClient>,
        /// One client per seed node, for pub/sub (classic pub/sub reaches every node).
        seeds: Vec<Client>,
        next_seed: AtomicUsize,
    },
    Sentinel(Arc<SentinelMaster>),
}

/// Opens the connections of the configured mode: the shared one, dedicated ones for blocking
/// reads, and pub/sub sessions. Cheap to clone.
#[derive(Clone)]
pub struct Connector {
    target: Arc<Target>,
    conn: RedisConn,
    wait: Option<(u32, Duration)>,
}

/// How long a replica keeps trying to reach a cluster or the sentinels at start-up.
const START_DEADLINE: Duration = Duration::from_secs(5);

/// The response timeout of the shared connection: an outage turns into a prompt 503, not a
/// hung request (a commit that waits for replicas gets its wait on top).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

impl Connector {
    /// Connects as `options` say. A standalone server that does not answer is retried in the
    /// background (the replica starts and serves its last snapshot); wrong credentials, a
    /// refused TLS handshake, or a cluster or sentinels that stay unreachable are errors.
    pub async fn connect(options: &RedisOptions) -> Result<Self, StoreError> {
        let certificates = options.certificates().map_err(StoreError::Unavailable)?;
        let wait =
            (options.wait_replicas > 0).then_some((options.wait_replicas, options.wait_timeout));
        let response_timeout = RESPONSE_TIMEOUT + wait.map_or(Duration::ZERO, |(_, t)| t);
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(response_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let first = options
            .urls
            .first()
            .ok_or_else(|| StoreError::Unavailable("no Redis URL given".into()))?;
        let (target, conn) = match options.mode {
            RedisMode::Standalone => {
                let client =
                    options::client(first, &certificates).map_err(|e| start_error(first, &e))?;
                match ping(&client).await {
                    Err(e) if is_fatal(&e) => return Err(start_error(first, &e)),
                    Err(e) => {
                        tracing::warn!(error = %e, "Redis does not answer yet; retrying in the background")
                    }
                    Ok(()) => {}
                }
                let conn = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
                    .map_err(|e| start_error(first, &e))?;
                (Target::Standalone(client), RedisConn::Standalone(conn))
            }
            RedisMode::Cluster => {
                let mut builder = ClusterClientBuilder::new(options.urls.clone())
                    .connection_timeout(Duration::from_secs(1))
                    .response_timeout(response_timeout);
                if let Some(certs) = &certificates {
                    builder = builder.certs(certs.clone());
                }
                let client = builder.build().map_err(|e| start_error(first, &e))?;
                let seeds = options
                    .urls
                    .iter()
                    .map(|url| options::client(url, &certificates))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| start_error(first, &e))?;
                let conn = until_deadline(first, || client.get_async_connection()).await?;
                let target = Target::Cluster {
                    client: Box::new(client),
                    seeds,
                    next_seed: AtomicUsize::new(0),
                };
                (target, RedisConn::Cluster(conn))
            }
            RedisMode::Sentinel => {
                let service = options.sentinel_service.clone().ok_or_else(|| {
                    StoreError::Unavailable("sentinel mode needs the master's name".into())
                })?;
                let master =
                    SentinelMaster::connect(&options.urls, service, certificates, manager_config)
                        .await
                        .map_err(StoreError::Unavailable)?;
                (
                    Target::Sentinel(master.clone()),
                    RedisConn::Sentinel(master),
                )
            }
        };
        Ok(Self {
            target: Arc::new(target),
            conn,
            wait,
        })
    }

    /// The shared connection (multiplexed: no pool is needed).
    pub fn conn(&self) -> RedisConn {
        self.conn.clone()
    }

    /// Replicas a commit waits for, and how long (`None`: no WAIT).
    pub fn wait(&self) -> Option<(u32, Duration)> {
        self.wait
    }

    /// A connection of its own for blocking commands, with `response_timeout`. In sentinel
    /// mode it stays on the master of the moment: it fails once that one is demoted (the
    /// sentinels close its clients), and the caller opens another.
    pub async fn dedicated(&self, response_timeout: Duration) -> Result<RedisConn, RedisError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(response_timeout));
        match &*self.target {
            Target::Standalone(client) => Ok(RedisConn::Dedicated(
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?,
            )),
            Target::Sentinel(master) => Ok(RedisConn::Dedicated(
                master
                    .current()
                    .client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?,
            )),
            Target::Cluster { client, .. } => {
                let config = ClusterConfig::new()
                    .set_connection_timeout(Duration::from_secs(1))
                    .set_response_timeout(response_timeout);
                Ok(RedisConn::Cluster(
                    client.get_async_connection_with_config(config).await?,
                ))
            }
        }
    }

    /// A pub/sub session. In cluster mode on one of the seed nodes, in turn (classic pub/sub
    /// messages reach every node of a cluster); in sentinel mode on the current master.
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, RedisError> {
        match &*self.target {
            Target::Standalone(client) => client.get_async_pubsub().await,
            Target::Sentinel(master) => master.current().client.get_async_pubsub().await,
            Target::Cluster {
                seeds, next_seed, ..
            } => {
                let mut last = None;
                for _ in 0..seeds.len() {
                    let i = next_seed.fetch_add(1, Ordering::Relaxed) % seeds.len();
                    match seeds[i].get_async_pubsub().await {
                        Ok(pubsub) => return Ok(pubsub),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    RedisError::from((ErrorKind::InvalidClientConfig, "no cluster seed node"))
                }))
            }
        }
    }

    /// How many times the master was replaced (sentinel mode; always 0 otherwise): a
    /// dedicated connection opened before the last switch is on a demoted master.
    pub fn master_generation(&self) -> u64 {
        match &*self.target {
            Target::Sentinel(master) => master.generation(),
            _ => 0,
        }
    }

    /// Sentinel mode: changes each time the master is replaced (pub/sub sessions move).
    pub fn master_switches(&self) -> Option<watch::Receiver<u64>> {
        match &*self.target {
            Target::Sentinel(master) => Some(master.switches()),
            _ => None,
        }
    }
}

/// One PING on a connection of its own, within a few seconds.
async fn ping(client: &Client) -> Result<(), RedisError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    redis::cmd("PING").query_async::<()>(&mut conn).await
}

/// Retries `connect` until it works, fails for good (`is_fatal`) or `START_DEADLINE` passes.
async fn until_deadline<T, F, Fut>(url: &str, mut connect: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RedisError>>,
{
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        match connect().await {
            Ok(conn) => return Ok(conn),
            Err(e) if is_fatal(&e) || Instant::now() >= deadline => {
                return Err(start_error(url, &e))
            }
            Err(e) => tracing::warn!(error = %e, "Redis does not answer yet; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Errors that waiting cannot cure: refused credentials or permissions, a bad client
/// configuration, a TLS handshake that failed.
pub(crate) fn is_fatal(e: &RedisError) -> bool {
    // A cluster connection wraps the node's error in an I/O error: its text tells.
    let text = e.to_string().to_lowercase();
    let code = e.code().unwrap_or("");
    matches!(
        e.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::InvalidClientConfig
    ) || matches!(code, "WRONGPASS" | "NOAUTH" | "NOPERM")
        || [
            "wrongpass",
            "noauth",
            "noperm",
            "authentication failed",
            "certificate",
            "tls",
        ]
        .iter()
        .any(|needle| text.contains(needle))
}

/// A start-up failure naming the server (without its password).
fn start_error(url: &str, e: &RedisError) -> StoreError {
    StoreError::Unavailable(format!("Redis at {}: {e}", redacted(url)))
}

/// `url` without its password.
pub(crate) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("*****"));
            parsed.into()
        }
        Ok(parsed) => parsed.into(),
        Err(_) => "(unparsable URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redacted("redis://app:secret@h:1/0"),
            "redis://app:*****@h:1/0"
        );
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn refused_credentials_are_fatal_and_a_refused_connection_is_not() {
        let wrongpass = RedisError::from((
            ErrorKind::AuthenticationFailed,
            "WRONGPASS invalid username-password pair",
        ));
        assert!(is_fatal(&wrongpass));
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_fatal(&refused));
    }
}
