//! `flagpole import-unleash` (issue 33) against real unleash-servers, each case on a private
//! PostgreSQL 15 cluster of its own under target/ (both started here on free ports, stopped at
//! the end; one case at a time stays within the test time limit). 7.5.1: refusals that commit
//! nothing, then into both stores a dry run, the migration with its verification, a rerun
//! that changes nothing, and the real Node SDK evaluating a few hundred contexts the same
//! against Unleash and Flagpole with each migrated token; the bundle of `--out` imported
//! through the API; the progress line on a terminal. Another 7.5.1: partial reads, an Unleash
//! changing during the read, Flagpole's own records under Unleash's ids and re-entered addon
//! secrets (`faults`). A third 7.5.1 with 122 environments, and a change hidden behind more
//! than 100 of a read's exports (`many_environments`). An Unleash 6.10.1
//! (`FLAGPOLE_UNLEASH6_DIR`, the route set), an Unleash 5.12.8 (`FLAGPOLE_UNLEASH5_DIR`, the
//! state export of 4.x–5.x) and an Unleash 4.19.5 (`FLAGPOLE_UNLEASH4_DIR`, into both stores)
//! moved and checked the same way. Without unleash-server (`FLAGPOLE_UNLEASH_DIR`, installed by scripts/test.sh), the
//! Node SDK or PostgreSQL, they say "skipping".

mod faults;
mod many_environments;
mod proxy;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Backend, TestApp};

/// Contexts each token's toggles are evaluated for.
const CONTEXTS: &str = "300";

/// Unleash's admin token (made at its first start).
const ADMIN_TOKEN: &str = "*:*.migration-test-admin-token-0123456789";

/// A process of this test, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A PostgreSQL 15 program (Debian installs them off the PATH).
fn postgres_program(name: &str) -> Option<PathBuf> {
    ["/usr/local/bin", "/usr/lib/postgresql/15/bin", "/usr/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
}

/// `program` as the `postgres` user when this runs as root (PostgreSQL refuses root).
fn as_postgres(program: &Path) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// A PostgreSQL cluster of this test: stopped when dropped (the postmaster named in its
/// `postmaster.pid`, which `runuser` does not pass a kill on to).
struct Postgres {
    _runner: Process,
    dir: PathBuf,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.dir.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().map(str::to_string));
        if let Some(pid) = pid {
            // SIGQUIT: PostgreSQL's immediate shutdown.
            let _ = Command::new("kill").args(["-QUIT", &pid]).status();
        }
    }
}

/// Starts a cluster in `dir` on a free port, with a database `unleash`.
fn start_postgres(dir: &Path) -> (Postgres, u16) {
    let initdb = postgres_program("initdb").expect("initdb");
    let postgres = postgres_program("postgres").expect("postgres");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("cluster directory");
    let _ = Command::new("chown").arg("postgres").arg(dir).status();
    let init = as_postgres(&initdb)
        .args(["-A", "trust", "-U", "postgres", "-D"])
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .expect("initdb runs");
    assert!(init.success(), "initdb failed");
    let port = free_port();
    let child = as_postgres(&postgres)
        .arg("-D")
        .arg(dir)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-k")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("postgres starts");
    let process = Postgres {
        _runner: Process(child),
        dir: dir.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !create_database(port, "unleash") {
        assert!(Instant::now() < deadline, "PostgreSQL did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
    (process, port)
}

/// `statements` on the database `database` of the cluster on `port` (asserts they ran).
fn sql(port: u16, database: &str, statements: &str) {
    let psql = postgres_program("psql").expect("psql");
    let status = Command::new(&psql)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(["-d", database, "-v", "ON_ERROR_STOP=1", "-qc", statements])
        .stdout(Stdio::null())
        .status()
        .expect("psql runs");
    assert!(status.success(), "psql: {statements}");
}

/// Creates the database `name`; whether it worked.
fn create_database(port: u16, name: &str) -> bool {
    let psql = postgres_program("psql").expect("psql");
    Command::new(&psql)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(["-qc", &format!("CREATE DATABASE {name}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts the unleash-server installed in `installed` (tests/unleash's `server.js` in
/// `scripts`) on database `database` and waits for its health check (its first start runs
/// every migration: about 1.5 minutes).
async fn start_unleash(
    installed: &Path,
    scripts: &Path,
    pg_port: u16,
    database: &str,
) -> (Process, String) {
    let port = free_port();
    let child = Command::new("node")
        .arg(scripts.join("server.js"))
        .current_dir(installed)
        .env("PGPORT", pg_port.to_string())
        .env("PGDATABASE", database)
        .env("UNLEASH_PORT", port.to_string())
        .env("CHECK_VERSION", "false")
        .env("SEND_TELEMETRY", "false")
        .env("INIT_ADMIN_API_TOKENS", ADMIN_TOKEN)
        .env("UNLEASH_EXPERIMENTAL_ENABLE_LEGACY_VARIANTS", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs");
    let process = Process(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let healthy = http
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if healthy {
            settle(&http, &base).await;
            return (process, base);
        }
        assert!(Instant::now() < deadline, "unleash-server did not start");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until Unleash's client document revision holds still (it follows writes about a
/// second late; the command refuses an Unleash that changes while it reads).
async fn settle(http: &reqwest::Client, base: &str) {
    let revision = || async {
        http.get(format!("{base}/api/client/features"))
            .header("Authorization", ADMIN_TOKEN)
            .send()
            .await
            .ok()
            .and_then(|r| r.headers().get("etag").map(|v| v.as_bytes().to_vec()))
    };
    let mut last = revision().await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = revision().await;
        if now == last {
            return;
        }
        last = now;
    }
    panic!("Unleash's revision kept moving");
}

/// Fills the Unleash at `base` (tests/unleash's fill.js, run where the server is installed):
/// its tokens, `(secret, type)`.
async fn fill(
    installed: &Path,
    scripts: &Path,
    base: &str,
    pg_port: u16,
    database: &str,
) -> Vec<(String, String)> {
    let filled = node(
        installed,
        &[&scripts.join("fill.js").display().to_string()],
        &[
            ("UNLEASH_URL", base.to_string()),
            ("ADMIN_TOKEN", ADMIN_TOKEN.into()),
            ("PGPORT", pg_port.to_string()),
            ("PGDATABASE", database.to_string()),
        ],
    );
    settle(&reqwest::Client::new(), base).await;
    filled["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| {
            (
                t["secret"].as_str().expect("secret").to_string(),
                t["type"].as_str().expect("type").to_string(),
            )
        })
        .collect()
}

/// Runs a Node script of tests/unleash: its JSON line.
fn node(unleash_dir: &Path, args: &[&str], envs: &[(&str, String)]) -> Value {
    let output = Command::new("node")
        .args(args)
        .current_dir(unleash_dir)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "node {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON line")
}

/// The store flags of `backend`.
fn store_flags(backend: &Backend) -> Vec<String> {
    let store = backend.settings().store;
    match store.redis_url {
        Some(url) => vec![
            "--redis-url".into(),
            url,
            "--key-prefix".into(),
            store.key_prefix,
        ],
        None => vec!["--data-dir".into(), store.data_dir.display().to_string()],
    }
}

/// `flagpole import-unleash` with `args`.
fn import_unleash(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .arg("import-unleash")
        .args(args)
        .arg("--quiet")
        .env("FLAGPOLE_REDIS_URL", "")
        .env("FLAGPOLE_UNLEASH_TOKEN", "")
        .output()
        .expect("flagpole runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What every case needs: the 7.x install (its scripts: server.js, fill.js, compare.js), the
/// Node SDK and a PostgreSQL cluster of its own (each case runs alone within the time limit).
struct Setup {
    _postgres: Postgres,
    pg_port: u16,
    unleash_dir: PathBuf,
    sdk_dir: String,
}

/// The setup, with a cluster in `cluster` under the target's temporary directory; none (after
/// saying "skipping") without unleash-server, the Node SDK or PostgreSQL.
fn setup(cluster: &str) -> Option<Setup> {
    let (Ok(unleash_dir), Ok(sdk_dir)) = (
        std::env::var("FLAGPOLE_UNLEASH_DIR"),
        std::env::var("FLAGPOLE_SDK_NODE_DIR"),
    ) else {
        eprintln!("skipping: FLAGPOLE_UNLEASH_DIR or FLAGPOLE_SDK_NODE_DIR not set (scripts/test.sh installs them)");
        return None;
    };
    if postgres_program("initdb").is_none() || postgres_program("psql").is_none() {
        eprintln!("skipping: PostgreSQL 15 (initdb, postgres, psql) not found");
        return None;
    }
    let (postgres, pg_port) = start_postgres(&Path::new(env!("CARGO_TARGET_TMPDIR")).join(cluster));
    Some(Setup {
        _postgres: postgres,
        pg_port,
        unleash_dir: PathBuf::from(unleash_dir),
        sdk_dir,
    })
}

/// Partial reads, an Unleash changing during the read, Flagpole's own records under Unleash's
/// ids and re-entered addon secrets (`faults`), against its own 7.5.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_read_commits_nothing_and_a_rerun_keeps_what_flagpole_holds() {
    let Some(setup) = setup("migration-postgres-faults") else {
        return;
    };
    let dir = &setup.unleash_dir;
    let (_unleash, unleash) = start_unleash(dir, dir, setup.pg_port, "unleash").await;
    fill(dir, dir, &unleash, setup.pg_port, "unleash").await;
    faults::faults_commit_nothing_and_records_stay_apart(&unleash).await;
}

/// 122 environments (more than the event log's last 100 events), and a change buried under
/// a read's exports (`many_environments`), against its own 7.5.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unleash_with_many_environments_moves_and_a_change_behind_its_exports_is_seen() {
    let Some(setup) = setup("migration-postgres-environments") else {
        return;
    };
    let dir = &setup.unleash_dir;
    let (_unleash, unleash) = start_unleash(dir, dir, setup.pg_port, "unleash").await;
    many_environments::many_environments_move_and_a_buried_change_is_seen(&unleash, setup.pg_port)
        .await;
}

/// Unleash 6.10.1 (`FLAGPOLE_UNLEASH6_DIR`): the route set, no REGEX, `client` tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unleash_6_moves_and_evaluates_the_same() {
    moves_an_older_unleash("FLAGPOLE_UNLEASH6_DIR", "6.10.1", &[Backend::embedded]).await;
}

/// Unleash 5.12.8 (`FLAGPOLE_UNLEASH5_DIR`): the state export of 4.x–5.x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unleash_5_moves_and_evaluates_the_same() {
    moves_an_older_unleash("FLAGPOLE_UNLEASH5_DIR", "5.12.8", &[Backend::embedded]).await;
}

/// Unleash 4.19.5 (`FLAGPOLE_UNLEASH4_DIR`, the newest 4.x the registry serves): the state
/// export without variants per environment (read from each environment's client document),
/// no segment API (fill.js writes the segment into its database), no dependencies; into both
/// stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unleash_4_moves_into_both_stores_and_evaluates_the_same() {
    moves_an_older_unleash(
        "FLAGPOLE_UNLEASH4_DIR",
        "4.19.5",
        &[Backend::embedded, Backend::redis],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unleash_instance_moves_into_both_stores_and_evaluates_the_same() {
    let Some(setup) = setup("migration-postgres") else {
        return;
    };
    let (pg_port, unleash_dir, sdk_dir) =
        (setup.pg_port, setup.unleash_dir.clone(), &setup.sdk_dir);
    let unleash_process = start_unleash(&unleash_dir, &unleash_dir, pg_port, "unleash").await;
    let unleash = unleash_process.1.clone();
    let tokens = fill(&unleash_dir, &unleash_dir, &unleash, pg_port, "unleash").await;
    let backend_token = tokens
        .iter()
        .find(|(_, kind)| kind == "backend")
        .map(|(s, _)| s.clone())
        .expect("a backend token");

    // Refusals: nothing committed, a clear reason.
    let embedded = Backend::embedded();
    let flags = store_flags(&embedded);
    let with = |url: &str, token: &str| {
        let mut args = vec!["--url".into(), url.into(), "--token".into(), token.into()];
        args.extend(flags.iter().cloned());
        args
    };
    let unreachable = import_unleash(&with("http://127.0.0.1:1", ADMIN_TOKEN));
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(
        text(&unreachable.stderr).contains("cannot reach Unleash"),
        "{}",
        text(&unreachable.stderr)
    );
    assert!(text(&unreachable.stderr).contains("Nothing was committed"));
    let not_admin = import_unleash(&with(&unleash, &backend_token));
    assert_eq!(not_admin.status.code(), Some(1));
    assert!(
        text(&not_admin.stderr).contains("an admin token is needed"),
        "{}",
        text(&not_admin.stderr)
    );

    faults::progress_shows_counts_on_a_terminal(&unleash);

    // The bundle: written, then taken by the import API of an empty store.
    let bundle_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("migration-bundle.json");
    let mut args = with(&unleash, ADMIN_TOKEN);
    args.extend(["--out".to_string(), bundle_path.display().to_string()]);
    let out = import_unleash(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bundle: Value =
        serde_json::from_slice(&std::fs::read(&bundle_path).expect("the bundle")).expect("JSON");
    assert_eq!(bundle["version"], 2);
    assert_eq!(bundle["archivedFeatures"][0]["name"], "retired");
    let reenter = text(&out.stdout);
    assert!(reenter.contains("Re-enter"), "{reenter}");
    assert!(
        reenter.contains("url, customHeaders (Unleash's authorization)"),
        "{reenter}"
    );

    for backend in [Backend::embedded(), Backend::redis()] {
        let flags = store_flags(&backend);
        let mut args = vec![
            "--url".to_string(),
            unleash.clone(),
            "--token".into(),
            ADMIN_TOKEN.into(),
        ];
        args.extend(flags);
        let mut dry = args.clone();
        dry.push("--dry-run".into());
        let dry_run = import_unleash(&dry);
        assert!(dry_run.status.success(), "{}", text(&dry_run.stderr));
        assert!(
            text(&dry_run.stdout).contains("Dry run, nothing written"),
            "{}",
            text(&dry_run.stdout)
        );

        let moved = import_unleash(&args);
        let report = format!("{}\n{}", text(&moved.stdout), text(&moved.stderr));
        assert!(moved.status.success(), "{report}");
        assert!(report.contains("Committed in one import"), "{report}");
        assert!(report.contains("Verified"), "{report}");
        let again = import_unleash(&args);
        assert!(again.status.success(), "{}", text(&again.stderr));
        assert!(
            text(&again.stdout).contains("No changes"),
            "{}",
            text(&again.stdout)
        );

        let mut settings = backend.settings();
        settings.auth.mode = flagpole::config::AuthMode::Token;
        settings.auth.client_auth = flagpole::config::ClientAuth::Token;
        let app = TestApp::spawn_with(settings).await;
        for (secret, kind) in tokens.iter().filter(|(_, k)| k != "frontend") {
            let compared = node(
                &unleash_dir,
                &["compare.js", &unleash, &app.base, secret, CONTEXTS],
                &[("FLAGPOLE_SDK_NODE_DIR", sdk_dir.clone())],
            );
            assert_eq!(
                compared["differences"],
                serde_json::json!([]),
                "{kind} {secret}: {compared}"
            );
            assert!(compared["toggles"].as_u64() > Some(0), "{compared}");
            assert!(compared["enabled"].as_u64() > Some(0), "{compared}");
        }
        app.stop().await;
    }

    // The bundle is what the import API takes: into an empty store, then again (no change).
    let app = TestApp::spawn(&Backend::embedded()).await;
    let report = app
        .post("/api/admin/state/import", bundle.clone())
        .await
        .expect(202)
        .json;
    assert_eq!(report["changed"], true, "{report}");
    assert_eq!(report["summary"]["apiTokens"]["created"], 6, "{report}");
    let again = app
        .post("/api/admin/state/import", bundle)
        .await
        .expect(202)
        .json;
    assert_eq!(again["changed"], false, "{again}");
    app.stop().await;
    drop(unleash_process);
}

/// The Unleash `version` installed where `variable` says, on a cluster of its own, filled by
/// tests/unleash's fill.js, moves into an empty store of each of `backends`, verified, a rerun
/// changes nothing, and the Node SDK evaluates a client token's toggles the same on both.
async fn moves_an_older_unleash(variable: &str, version: &str, backends: &[fn() -> Backend]) {
    let Ok(installed) = std::env::var(variable) else {
        eprintln!("skipping Unleash {version}: {variable} not set (scripts/test.sh installs it)");
        return;
    };
    let Some(setup) = setup(&format!("migration-postgres-{version}")) else {
        return;
    };
    let installed = PathBuf::from(installed);
    let (unleash_dir, sdk_dir, pg_port) = (&setup.unleash_dir, &setup.sdk_dir, setup.pg_port);
    let database = "unleash";
    let (_unleash, base) = start_unleash(&installed, unleash_dir, pg_port, database).await;
    let tokens = fill(&installed, unleash_dir, &base, pg_port, database).await;
    let (secret, _) = tokens
        .iter()
        .find(|(_, k)| k == "client")
        .expect("a client token");
    for backend in backends.iter().map(|make| make()) {
        let mut args = vec![
            "--url".to_string(),
            base.clone(),
            "--token".into(),
            ADMIN_TOKEN.into(),
        ];
        args.extend(store_flags(&backend));
        let moved = import_unleash(&args);
        let report = format!("{}\n{}", text(&moved.stdout), text(&moved.stderr));
        assert!(moved.status.success(), "{report}");
        assert!(
            report.contains(&format!("Read Unleash {version}")),
            "{report}"
        );
        assert!(report.contains("Verified"), "{report}");
        let again = import_unleash(&args);
        assert!(
            text(&again.stdout).contains("No changes"),
            "{}",
            text(&again.stdout)
        );
        let mut settings = backend.settings();
        settings.auth.mode = flagpole::config::AuthMode::Token;
        settings.auth.client_auth = flagpole::config::ClientAuth::Token;
        let app = TestApp::spawn_with(settings).await;
        let compared = node(
            unleash_dir,
            &["compare.js", &base, &app.base, secret, CONTEXTS],
            &[("FLAGPOLE_SDK_NODE_DIR", sdk_dir.clone())],
        );
        assert_eq!(compared["differences"], serde_json::json!([]), "{compared}");
        assert!(compared["toggles"].as_u64() > Some(0), "{compared}");
        app.stop().await;
    }
}
