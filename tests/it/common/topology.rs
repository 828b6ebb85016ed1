//! Redis deployments on loopback TCP ports for the Redis-mode tests: single servers (plain or
//! TLS), a Sentinel setup and a Cluster, from Debian's `redis-server`. Every process is killed
//! and every directory removed on drop; every wait has a deadline.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A loopback port that was free a moment ago (bind, read, release: a small race, hence the
/// retry in `RedisNode::start`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts of a server tried on fresh ports: a free port can be taken again before the server
/// binds it (tests running alongside open connections from the same port range).
const START_ATTEMPTS: u32 = 3;

/// One redis-server (or sentinel) process on a TCP port. Killed on drop.
pub struct RedisNode {
    pub port: u16,
    pub dir: TempDir,
    child: Mutex<Option<Child>>,
    /// Extra redis-cli arguments to reach it (TLS).
    cli_args: Vec<String>,
}

impl RedisNode {
    /// Starts `redis-server` with `args` on a free port (`--port`), waiting until it answers.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with(
            |port| {
                let mut all = vec!["--port".to_string(), port.to_string()];
                all.extend(args.iter().map(|a| a.to_string()));
                all
            },
            Vec::new(),
        )
    }

    /// Starts `redis-server` with the arguments `args(port)`; `cli_args` reach it with
    /// redis-cli. Retried on other ports (the free port may have been taken).
    pub fn start_with(args: impl Fn(u16) -> Vec<String>, cli_args: Vec<String>) -> Self {
        for attempt in 1..=START_ATTEMPTS {
            let dir = tempfile::tempdir().expect("temp dir for redis");
            let port = free_port();
            let child = Command::new("redis-server")
                .args(args(port))
                .args(["--bind", "127.0.0.1", "--save", "", "--dir"])
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (apt-get install redis-server)");
            let node = Self {
                port,
                dir,
                child: Mutex::new(Some(child)),
                cli_args: cli_args.clone(),
            };
            if node.wait_answering(Duration::from_secs(10)) {
                return node;
            }
            assert!(
                attempt < START_ATTEMPTS,
                "redis-server did not come up on port {port}"
            );
        }
        unreachable!()
    }

    /// Starts a sentinel with `config` (lines of a sentinel configuration file).
    pub fn sentinel(config: &[String]) -> Self {
        for attempt in 1..=START_ATTEMPTS {
            let dir = tempfile::tempdir().expect("temp dir for the sentinel");
            let port = free_port();
            let file = dir.path().join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n",
                dir.path().display()
            );
            text.push_str(&config.join("\n"));
            text.push('\n');
            std::fs::write(&file, text).expect("write sentinel.conf");
            let child = Command::new("redis-server")
                .arg(&file)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed");
            let node = Self {
                port,
                dir,
                child: Mutex::new(Some(child)),
                cli_args: Vec::new(),
            };
            if node.wait_answering(Duration::from_secs(10)) {
                return node;
            }
            assert!(
                attempt < START_ATTEMPTS,
                "the sentinel did not come up on port {port}"
            );
        }
        unreachable!()
    }

    fn wait_answering(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            // NOAUTH: up, with a password.
            let answer = self.try_cli(&["PING"]);
            if answer.is_some_and(|out| out.trim() == "PONG" || out.contains("NOAUTH")) {
                return true;
            }
            if self.exited() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn exited(&self) -> bool {
        let mut guard = self.child.lock().expect("lock");
        match guard.as_mut() {
            Some(child) => child.try_wait().ok().flatten().is_some(),
            None => true,
        }
    }

    /// Runs redis-cli against this node; `None` when it could not connect or failed.
    pub fn try_cli(&self, args: &[&str]) -> Option<String> {
        let output = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(&self.cli_args)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .expect("redis-cli must be installed with redis-server");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.success() && !text.starts_with("Could not connect")).then_some(text)
    }

    /// Runs redis-cli against this node and returns what it printed.
    pub fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args)
            .unwrap_or_else(|| panic!("redis-cli {args:?} on port {} failed", self.port))
    }

    /// `host:port` of this node.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the process (as a crash would).
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().expect("lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` every 50 ms until it holds, panicking with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A master with one replica, watched by three sentinels under the name `mymaster`, with
/// short timeouts so a failover takes a few seconds.
pub struct TestSentinel {
    pub master: RedisNode,
    pub replica: RedisNode,
    pub sentinels: Vec<RedisNode>,
}

/// The name the sentinels monitor the master under.
pub const SENTINEL_SERVICE: &str = "mymaster";

impl TestSentinel {
    pub fn start() -> Self {
        let master = RedisNode::start(&["--repl-diskless-sync-delay", "0"]);
        let master_port = master.port.to_string();
        let replica = RedisNode::start(&[
            "--replicaof",
            "127.0.0.1",
            &master_port,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        wait_until("the replica is in sync", Duration::from_secs(10), || {
            replica
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up")
        });
        let config = vec![
            format!("sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {master_port} 2"),
            format!("sentinel down-after-milliseconds {SENTINEL_SERVICE} 1000"),
            format!("sentinel failover-timeout {SENTINEL_SERVICE} 4000"),
            format!("sentinel parallel-syncs {SENTINEL_SERVICE} 1"),
        ];
        let sentinels: Vec<RedisNode> = (0..3).map(|_| RedisNode::sentinel(&config)).collect();
        // A failover needs the sentinels to know each other and the replica.
        wait_until(
            "the sentinels know each other and the replica",
            Duration::from_secs(20),
            || {
                sentinels.iter().all(|s| {
                    s.cli(&["SENTINEL", "CKQUORUM", SENTINEL_SERVICE])
                        .contains("3 usable")
                        && s.cli(&["SENTINEL", "REPLICAS", SENTINEL_SERVICE])
                            .contains(&replica.port.to_string())
                })
            },
        );
        Self {
            master,
            replica,
            sentinels,
        }
    }

    /// The `--redis-url` list of the sentinels.
    pub fn url(&self) -> String {
        let addresses: Vec<String> = self.sentinels.iter().map(RedisNode::address).collect();
        format!("redis://{}", addresses.join(","))
    }

    /// The port the sentinels name as master.
    pub fn master_port(&self) -> u16 {
        let out = self.sentinels[0].cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_SERVICE]);
        out.lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no master address in {out:?}"))
    }
}

/// A Redis Cluster of three masters with one replica each.
pub struct TestCluster {
    pub nodes: Vec<RedisNode>,
}

impl TestCluster {
    pub fn start() -> Self {
        Self::start_with(&[], Vec::new())
    }

    /// A cluster whose nodes speak only TLS (between themselves too), with `ca`'s server
    /// certificate.
    pub fn start_tls(ca: &TestCa) -> Self {
        let path = |name: &str| ca.path(name).display().to_string();
        let (cert, key, root) = (path("server.crt"), path("server.key"), path("ca.crt"));
        let args = [
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &root,
            "--tls-auth-clients",
            "no",
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
        ];
        Self::start_with(&args, vec!["--tls".into(), "--cacert".into(), root.clone()])
    }

    /// A cluster whose nodes ask for `password`.
    pub fn start_with_password(password: &str) -> Self {
        let args = ["--requirepass", password, "--masterauth", password];
        let cli = vec!["-a".into(), password.into(), "--no-auth-warning".into()];
        Self::start_with(&args, cli)
    }

    /// Six nodes with `extra` arguments (with TLS arguments, they listen on TLS only);
    /// `cli_args` reach them with redis-cli.
    fn start_with(extra: &[&str], cli_args: Vec<String>) -> Self {
        let tls = cli_args.iter().any(|a| a == "--tls");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        // The bus port is given: the default (port + 10,000) may be taken or out of range.
        let nodes: Vec<RedisNode> = (0..6)
            .map(|_| {
                let extra = extra.clone();
                RedisNode::start_with(
                    move |port| {
                        // Chosen again on each attempt: a taken bus port fails the start too.
                        let bus = free_port().to_string();
                        let mut args: Vec<String> = if tls {
                            vec!["--port".into(), "0".into(), "--tls-port".into()]
                        } else {
                            vec!["--port".into()]
                        };
                        args.push(port.to_string());
                        for a in [
                            "--cluster-enabled",
                            "yes",
                            "--cluster-port",
                            &bus,
                            "--cluster-node-timeout",
                            "1000",
                            "--appendonly",
                            "no",
                            "--repl-diskless-sync-delay",
                            "0",
                        ] {
                            args.push(a.to_string());
                        }
                        args.extend(extra.iter().cloned());
                        args
                    },
                    cli_args.clone(),
                )
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.args(&cli_args).arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(node.address());
        }
        let output = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            output.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Self { nodes };
        wait_until("the cluster is ready", Duration::from_secs(30), || {
            cluster.nodes.iter().all(|n| {
                n.try_cli(&["CLUSTER", "INFO"])
                    .is_some_and(|i| i.contains("cluster_state:ok"))
            }) && cluster.masters_with_replicas() == 3
        });
        cluster
    }

    /// Adds a second replica to the master of `key`'s slot, so that after that master fails
    /// the promoted one still has a replica to confirm writes (`--redis-wait-replicas 1`).
    pub fn add_spare_replica(&mut self, key: &str) {
        let master = self.master_of(key);
        let master_port = master.port;
        let id = master.cli(&["CLUSTER", "MYID"]).trim().to_string();
        let seed = master.address();
        let bus = free_port().to_string();
        let spare = RedisNode::start(&[
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus,
            "--cluster-node-timeout",
            "1000",
            "--appendonly",
            "no",
        ]);
        let output = Command::new("redis-cli")
            .args(["--cluster", "add-node", &spare.address(), &seed])
            .args(["--cluster-slave", "--cluster-master-id", &id])
            .output()
            .expect("redis-cli --cluster add-node");
        assert!(
            output.status.success(),
            "add-node failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        self.nodes.push(spare);
        let master = self
            .nodes
            .iter()
            .find(|n| n.port == master_port)
            .expect("the master");
        wait_until(
            "the spare replica is in sync",
            Duration::from_secs(20),
            || {
                master.try_cli(&["INFO", "replication"]).is_some_and(|i| {
                    i.contains("connected_slaves:2") && i.matches("state=online").count() == 2
                })
            },
        );
    }

    /// Masters whose replica is connected and in sync (only those confirm a WAIT).
    fn masters_with_replicas(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| {
                n.try_cli(&["INFO", "replication"]).is_some_and(|i| {
                    i.contains("role:master")
                        && i.contains("connected_slaves:1")
                        && i.contains("state=online")
                })
            })
            .count()
    }

    /// The `--redis-url` list of the seed nodes.
    pub fn url(&self) -> String {
        let addresses: Vec<String> = self.nodes.iter().map(RedisNode::address).collect();
        format!("redis://{}", addresses.join(","))
    }

    /// The live node that serves `key`'s slot as master.
    pub fn master_of(&self, key: &str) -> &RedisNode {
        let live = self
            .nodes
            .iter()
            .find(|n| n.try_cli(&["PING"]).is_some())
            .expect("a live node");
        let slot: u16 = live
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("slot number");
        let nodes = live.cli(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
            });
            if serves {
                let port: u16 = fields[1]
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .expect("node port");
                return self
                    .nodes
                    .iter()
                    .find(|n| n.port == port)
                    .expect("a node of this cluster");
            }
        }
        panic!("no master serves slot {slot}: {nodes}");
    }
}

/// A certificate authority and a server certificate for 127.0.0.1, made with openssl.
pub struct TestCa {
    pub dir: TempDir,
}

impl TestCa {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir for certificates");
        let run = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl must be installed");
            assert!(status.success(), "openssl {args:?} failed");
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=flagpole test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        std::fs::write(
            dir.path().join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
        )
        .expect("write san.ext");
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ]);
        Self { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A redis-server speaking only TLS with this CA's server certificate; clients need no
    /// certificate. `extra` adds arguments (e.g. an ACL user).
    pub fn tls_server(&self, extra: &[&str]) -> RedisNode {
        let path = |name: &str| self.path(name).display().to_string();
        let (cert, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        RedisNode::start_with(
            move |port| {
                let mut args: Vec<String> = [
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--tls-cert-file",
                    &cert,
                    "--tls-key-file",
                    &key,
                    "--tls-ca-cert-file",
                    &ca,
                    "--tls-auth-clients",
                    "no",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                args.extend(extra.iter().cloned());
                args
            },
            vec!["--tls".into(), "--cacert".into(), path("ca.crt")],
        )
    }
}
