//! Sentinel mode: the connection goes to the master the sentinels name. A background task
//! listens to the sentinels' `+switch-master` and moves to the new master at once; it also
//! asks them every second, and right away after a READONLY or connection error, so a missed
//! announcement cannot leave a replica writing to a demoted master.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, ErrorKind, RedisError, ServerErrorKind, TlsCertificates,
};
use tokio::sync::{watch, Mutex, Notify};

use super::options::{self, with_address};
use super::{is_fatal, redacted, START_DEADLINE};

/// How often the sentinels are asked when nothing happens.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A master: its address, a client for new connections, and the shared connection.
pub struct Node {
    /// Host and port, as the sentinels name it.
    pub address: (String, u16),
    /// Opens connections of its own (pub/sub, blocking reads).
    pub client: Client,
    /// The shared connection.
    pub conn: ConnectionManager,
}

/// The current master of one monitored service, and how to find the next one.
pub struct SentinelMaster {
    service: String,
    sentinels: Vec<Client>,
    /// Open connections to the sentinels, by index (`None`: to be opened).
    sentinel_conns: Mutex<Vec<Option<MultiplexedConnection>>>,
    /// The first URL: scheme, credentials and database of the master's URL.
    template: url::Url,
    certificates: Option<TlsCertificates>,
    config: ConnectionManagerConfig,
    current: ArcSwap<Node>,
    switches: watch::Sender<u64>,
    recheck: Arc<Notify>,
}

impl SentinelMaster {
    /// Asks the sentinels at `urls` for the master of `service` and connects to it; fails
    /// when no sentinel answers or the master refuses the credentials or the TLS handshake.
    pub(super) async fn connect(
        urls: &[String],
        service: String,
        certificates: Option<TlsCertificates>,
        config: ConnectionManagerConfig,
    ) -> Result<Arc<Self>, String> {
        let first = urls.first().ok_or("no sentinel address given")?;
        let template = url::Url::parse(first).map_err(|e| format!("the Redis URL: {e}"))?;
        let sentinels = urls
            .iter()
            .map(|url| sentinel_client(url, &certificates))
            .collect::<Result<Vec<_>, _>>()?;
        let probe = Probe {
            service: &service,
            sentinels: &sentinels,
            conns: &Mutex::new(vec![None; urls.len()]),
            template: &template,
            certificates: &certificates,
        };
        let deadline = Instant::now() + START_DEADLINE;
        let node = loop {
            match probe.find_master(&config).await {
                Ok(node) => break node,
                Err((message, fatal)) if fatal || Instant::now() >= deadline => {
                    return Err(message)
                }
                Err((message, _)) => {
                    tracing::warn!(error = %message, "no Redis master yet; retrying")
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        tracing::info!(service, master = ?node.address, "following the master named by the sentinels");
        let conns = Mutex::new(vec![None; sentinels.len()]);
        let master = Arc::new(Self {
            service,
            sentinels,
            sentinel_conns: conns,
            template,
            certificates,
            config,
            current: ArcSwap::from_pointee(node),
            switches: watch::channel(0).0,
            recheck: Arc::new(Notify::new()),
        });
        tokio::spawn(follow(Arc::downgrade(&master), master.recheck.clone()));
        Ok(master)
    }

    /// The master of the moment.
    pub fn current(&self) -> Arc<Node> {
        self.current.load_full()
    }

    /// How many times the master was replaced.
    pub(super) fn generation(&self) -> u64 {
        *self.switches.borrow()
    }

    /// Counts the switches to another master.
    pub(super) fn switches(&self) -> watch::Receiver<u64> {
        self.switches.subscribe()
    }

    /// After a failed command: a demoted master (READONLY) or a lost one makes the
    /// follower ask the sentinels now.
    pub(super) fn on_error(&self, e: &RedisError) {
        let demoted = e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if demoted || e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
            self.recheck.notify_one();
        }
    }

    fn probe(&self) -> Probe<'_> {
        Probe {
            service: &self.service,
            sentinels: &self.sentinels,
            conns: &self.sentinel_conns,
            template: &self.template,
            certificates: &self.certificates,
        }
    }

    /// Asks the sentinels and moves to the master they name, if it is another one.
    async fn check(&self) {
        let probe = self.probe();
        let address = match probe.master_address().await {
            Ok(address) => address,
            Err(e) => {
                tracing::debug!(error = %e, "no sentinel answered");
                return;
            }
        };
        if address != self.current().address {
            self.switch_to(address).await;
        }
    }

    /// Moves to the master at `address`, once it says it is one (otherwise the next check
    /// tries again).
    async fn switch_to(&self, address: (String, u16)) {
        if address == self.current().address {
            return;
        }
        match self.probe().open(&address, &self.config).await {
            Ok(node) => {
                tracing::warn!(service = self.service, from = ?self.current().address, to = ?address, "the Redis master switched; following it");
                self.current.store(Arc::new(node));
                self.switches.send_modify(|n| *n += 1);
            }
            // The next check (within a second) tries again.
            Err((e, _)) => tracing::warn!(error = %e, "the new Redis master is not ready yet"),
        }
    }
}

/// Listens to `+switch-master` on one sentinel after the other, and checks every second and
/// on request, until the master is dropped.
async fn follow(master: Weak<SentinelMaster>, recheck: Arc<Notify>) {
    let mut next = 0usize;
    loop {
        let Some(sentinel) = master.upgrade().map(|m| {
            next += 1;
            m.sentinels[next % m.sentinels.len()].clone()
        }) else {
            return;
        };
        let subscribed = async {
            let mut pubsub = sentinel.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, RedisError>(pubsub)
        };
        let mut messages = match tokio::time::timeout(Duration::from_secs(2), subscribed).await {
            Ok(Ok(pubsub)) => Some(pubsub.into_on_message()),
            _ => None,
        };
        loop {
            let announced = async {
                match messages.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                message = announced => match message {
                    Some(message) => message.get_payload::<String>().ok(),
                    // The sentinel went away: listen to another.
                    None => break,
                },
                _ = recheck.notified() => None,
                _ = tokio::time::sleep(CHECK_INTERVAL) => None,
            };
            let Some(master) = master.upgrade() else {
                return;
            };
            // "<name> <old ip> <old port> <new ip> <new port>"
            let parts: Vec<&str> = event.as_deref().unwrap_or("").split(' ').collect();
            match parts.as_slice() {
                [name, _, _, host, port] if *name == master.service => match port.parse::<u16>() {
                    Ok(port) => master.switch_to((host.to_string(), port)).await,
                    Err(_) => master.check().await,
                },
                _ => master.check().await,
            }
            if messages.is_none() {
                // No subscription yet: try another sentinel.
                break;
            }
        }
    }
}

/// The sentinel side of finding a master.
struct Probe<'a> {
    service: &'a str,
    sentinels: &'a [Client],
    conns: &'a Mutex<Vec<Option<MultiplexedConnection>>>,
    template: &'a url::Url,
    certificates: &'a Option<TlsCertificates>,
}

/// A failure to find the master, and whether waiting cannot cure it.
type ProbeError = (String, bool);

impl Probe<'_> {
    /// The master the first answering sentinel names.
    async fn master_address(&self) -> Result<(String, u16), String> {
        let mut errors = Vec::new();
        let mut conns = self.conns.lock().await;
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let conn = match conns[i].take() {
                Some(conn) => conn,
                None => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(Duration::from_millis(500)))
                        .set_response_timeout(Some(Duration::from_secs(1)));
                    match sentinel
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                    {
                        Ok(conn) => conn,
                        Err(e) => {
                            errors.push(format!("{}: {e}", describe(sentinel)));
                            continue;
                        }
                    }
                }
            };
            let mut query = conn.clone();
            let reply: Result<Option<(String, u16)>, _> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(self.service)
                .query_async(&mut query)
                .await;
            match reply {
                Ok(Some(address)) => {
                    conns[i] = Some(conn);
                    return Ok(address);
                }
                Ok(None) => {
                    conns[i] = Some(conn);
                    errors.push(format!(
                        "{}: monitors no master named {:?}",
                        describe(sentinel),
                        self.service
                    ));
                }
                Err(e) => errors.push(format!("{}: {e}", describe(sentinel))),
            }
        }
        Err(format!("no sentinel names a master: {}", errors.join("; ")))
    }

    /// Finds the master and connects to it.
    async fn find_master(&self, config: &ConnectionManagerConfig) -> Result<Node, ProbeError> {
        let address = self.master_address().await.map_err(|e| (e, false))?;
        self.open(&address, config).await
    }

    /// Connects to `address` and makes sure it is a master (sentinels may name a replica
    /// that is still being promoted).
    async fn open(
        &self,
        address: &(String, u16),
        config: &ConnectionManagerConfig,
    ) -> Result<Node, ProbeError> {
        let url = with_address(self.template, &address.0, address.1).map_err(|e| (e, true))?;
        let failed = |e: RedisError| {
            let fatal = is_fatal(&e);
            (format!("Redis master at {}: {e}", redacted(&url)), fatal)
        };
        let client = options::client(&url, self.certificates).map_err(failed)?;
        let check = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&check)
            .await
            .map_err(failed)?;
        let role: Vec<redis::Value> = redis::cmd("ROLE")
            .query_async(&mut conn)
            .await
            .map_err(failed)?;
        let role: Option<String> = role
            .into_iter()
            .next()
            .and_then(|v| redis::from_redis_value(v).ok());
        if role.as_deref() != Some("master") {
            return Err((format!("{} is not a master (yet)", redacted(&url)), false));
        }
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
            .map_err(failed)?;
        Ok(Node {
            address: address.clone(),
            client,
            conn,
        })
    }
}

/// A sentinel's client: the scheme and TLS material of its URL, without the credentials and
/// database (those are the master's).
fn sentinel_client(url: &str, certificates: &Option<TlsCertificates>) -> Result<Client, String> {
    let mut parsed = url::Url::parse(url).map_err(|e| format!("the sentinel URL: {e}"))?;
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_path("");
    options::client(parsed.as_str(), certificates)
        .map_err(|e| format!("the sentinel {}: {e}", redacted(url)))
}

/// A sentinel's address for messages.
fn describe(client: &Client) -> String {
    format!("sentinel {}", client.get_connection_info().addr())
}
