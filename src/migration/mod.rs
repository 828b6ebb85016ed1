//! `flagpole import-unleash`: moves a running Unleash 4.0–7.x into the store (issue 33).
//!
//! Unleash is read whole (`reader`), turned into a version-2 state document (`bundle`), which
//! is committed in one import — through a replica started in this process on the store, by
//! the very route `POST /api/admin/state/import` — and then the client documents of Unleash
//! and of that replica are compared for every environment and migrated client token
//! (`verify`). Any failure before the import commits nothing.

/// Prints a line of the report on stdout. A reader that went away (`… | head`) is no reason
/// to panic, as `println!` would: the lines it did not want are dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod addons;
mod bundle;
mod progress;
mod reader;
mod revision;
mod store_fit;
mod unleash_api;
mod verify;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{AuthMode, ClientAuth, ImportUnleashArgs, SecretString, Settings};
pub use bundle::{build_bundle, Notes};
pub use reader::{read_instance, read_version, UnleashInstance, Version};
pub use unleash_api::{MigrationError, UnleashApi};
pub use verify::{compare, normalise, Caller};

/// Runs the command with the server's `settings` (for the replica that commits and serves
/// the comparison); prints the summary on stdout, problems on stderr.
pub async fn run(settings: Settings, args: ImportUnleashArgs) -> ExitCode {
    // Its output is its report: the replica's logs go to stderr, warnings only, less the
    // 503s of its readiness probe while it loads (`RUST_LOG` overrides).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,tower_http=off"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .try_init();
    match migrate(settings, args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("flagpole import-unleash: {e}");
            match e {
                MigrationError::Verification(_) => eprintln!(
                    "The import was committed; run the command again to verify (a rerun commits no changes)."
                ),
                _ => eprintln!("Nothing was committed."),
            }
            ExitCode::FAILURE
        }
    }
}

/// Whether the migration ended with no difference.
async fn migrate(settings: Settings, args: ImportUnleashArgs) -> Result<bool, MigrationError> {
    let api = UnleashApi::new(&args.url, &args.token.0)?;
    let progress = progress::Progress::new(args.quiet);
    let read = read_instance(&api, &progress).await;
    progress.finish();
    let instance = read?;
    let (mut bundle, mut notes) = build_bundle(&instance);
    say!(
        "Read Unleash {} at {} in {:.1} s: {}",
        instance.version.map_or("?".into(), |v| v.to_string()),
        api.base(),
        instance.read_time.as_secs_f64(),
        bundle_counts(&bundle)
    );
    if let Some(path) = &args.out {
        write_bundle(path, &bundle)?;
        say!(
            "Wrote the bundle to {} (it holds token secrets: keep it as a secret).",
            path.display()
        );
        print_notes(&notes);
        return Ok(true);
    }
    let replica = Replica::start(settings, &args).await?;
    let outcome = match replica.stored().await {
        Ok(stored) => {
            let segment_ids = store_fit::fit_to_store(&mut bundle, &stored, &mut notes);
            commit_and_verify(&replica, &api, &args, &bundle, &segment_ids).await
        }
        Err(e) => Err(e),
    };
    replica.stop().await;
    let clean = outcome?;
    print_notes(&notes);
    Ok(clean)
}

/// Imports the bundle (or reports it, on a dry run) and compares; whether no difference was
/// found.
async fn commit_and_verify(
    replica: &Replica,
    api: &UnleashApi,
    args: &ImportUnleashArgs,
    bundle: &Value,
    segment_ids: &store_fit::SegmentIds,
) -> Result<bool, MigrationError> {
    let started = Instant::now();
    let report = replica.import(bundle, args.dry_run).await?;
    let imported = started.elapsed();
    print_report(&report);
    say!("  (worked out in {:.1} s)", imported.as_secs_f64());
    if args.dry_run || args.no_verify {
        return Ok(true);
    }
    let callers = callers(bundle, &args.token.0, &replica.admin_token);
    let started = Instant::now();
    // After the commit: a failure here must not say that nothing was committed.
    let after_commit = |e: MigrationError| MigrationError::Verification(e.to_string());
    let mut verification = verify::verify(api, &replica.base, &callers, segment_ids)
        .await
        .map_err(after_commit)?;
    if !verification.differences.is_empty() {
        // The replica builds its client documents right after the commit: look once more.
        tokio::time::sleep(Duration::from_secs(2)).await;
        verification = verify::verify(api, &replica.base, &callers, segment_ids)
            .await
            .map_err(after_commit)?;
    }
    let timing = format!(
        "in {:.1} s, {:.1} s of it waiting for Unleash",
        started.elapsed().as_secs_f64(),
        verification.unleash_time.as_secs_f64()
    );
    if verification.differences.is_empty() {
        say!(
            "Verified: {} client documents are the same in Unleash and Flagpole \
             (every environment and client token, segments inlined and by reference; {timing}).",
            callers.len() * 2
        );
        Ok(true)
    } else {
        eprintln!(
            "Verification found {} differences ({timing}):",
            verification.differences.len()
        );
        for difference in &verification.differences {
            eprintln!("  {difference}");
        }
        Ok(false)
    }
}

/// Who is compared: every environment (Unleash's admin token, the replica's own), every
/// migrated client or backend token (its own secret on both sides).
fn callers(bundle: &Value, unleash_admin: &str, flagpole_admin: &str) -> Vec<Caller> {
    let mut callers: Vec<Caller> = bundle["environments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .map(|name| Caller {
            label: format!("environment {name}"),
            unleash_token: unleash_admin.to_string(),
            flagpole_token: flagpole_admin.to_string(),
            environment: Some(name.to_string()),
        })
        .collect();
    for token in bundle["apiTokens"].as_array().into_iter().flatten() {
        let kind = token["type"].as_str().unwrap_or_default();
        let Some(secret) = token["secret"].as_str() else {
            continue;
        };
        if kind == "client" || kind == "backend" {
            let shown: String = secret.chars().take_while(|c| *c != '.').collect();
            callers.push(Caller {
                label: format!(
                    "token \"{}\" ({shown}.…)",
                    token["tokenName"].as_str().unwrap_or_default()
                ),
                unleash_token: secret.to_string(),
                flagpole_token: secret.to_string(),
                environment: None,
            });
        }
    }
    callers
}

/// `kind count` for every section of the bundle.
fn bundle_counts(bundle: &Value) -> String {
    bundle
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_array().map(|a| format!("{k} {}", a.len())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes the bundle, readable by its owner only on Unix (it holds token secrets).
fn write_bundle(path: &std::path::Path, bundle: &Value) -> Result<(), MigrationError> {
    let fail = |e: std::io::Error| MigrationError::Output(format!("{}: {e}", path.display()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(fail)?;
    // `mode` applies only to a file it creates: an existing one is made private too.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(fail)?;
    let text = serde_json::to_vec_pretty(bundle)
        .map_err(|e| MigrationError::Output(format!("the bundle: {e}")))?;
    file.write_all(&text).map_err(fail)?;
    file.write_all(b"\n").map_err(fail)
}

/// The import's account, one line per kind; "no changes" when nothing was written.
fn print_report(report: &Value) {
    let dry_run = report["dryRun"].as_bool() == Some(true);
    let changed = report["changed"].as_bool() == Some(true);
    if !changed {
        say!("No changes: the store already holds this Unleash.");
        return;
    }
    say!(
        "{}",
        if dry_run {
            "Dry run, nothing written. What the import would do:"
        } else {
            "Committed in one import:"
        }
    );
    for (kind, counts) in report["summary"].as_object().into_iter().flatten() {
        let line: Vec<String> = counts
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
            .map(|(what, n)| format!("{what} {n}"))
            .collect();
        let line = if line.is_empty() {
            "nothing".into()
        } else {
            line.join(", ")
        };
        say!("  {kind}: {line}");
    }
    if dry_run {
        for toggle in report["toggles"].as_array().into_iter().flatten() {
            say!(
                "  toggle {}: {} ({} differences)",
                toggle["name"].as_str().unwrap_or_default(),
                toggle["change"].as_str().unwrap_or_default(),
                toggle["diffs"].as_array().map_or(0, Vec::len)
            );
        }
    }
}

fn print_notes(notes: &Notes) {
    if !notes.reenter.is_empty() {
        say!(
            "Addons moved in disabled: Unleash shows their secrets masked. Re-enter, then enable:"
        );
        for addon in &notes.reenter {
            let parameters: Vec<String> = addon
                .parameters
                .iter()
                .map(|p| addons::parameter_label(p))
                .collect();
            say!(
                "  addon {} ({}{}): {}",
                addon.id,
                addon.provider,
                if addon.description.is_empty() {
                    String::new()
                } else {
                    format!(", \"{}\"", addon.description)
                },
                parameters.join(", ")
            );
        }
    }
    if !notes.renumbered.is_empty() {
        say!("Moved in under another id (Flagpole holds a different record under Unleash's):");
        for line in &notes.renumbered {
            say!("  {line}");
        }
    }
    if !notes.left_behind.is_empty() {
        say!("Not moved:");
        for line in &notes.left_behind {
            say!("  {line}");
        }
    }
}

/// A replica of Flagpole on the store, in this process, on a loopback port: it commits the
/// import and serves the client documents compared, exactly as a server would.
struct Replica {
    base: String,
    admin_token: String,
    http: reqwest::Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), crate::RunError>>,
}

/// How long the replica may take to load the store.
const READY_WITHIN: Duration = Duration::from_secs(120);

impl Replica {
    async fn start(
        mut settings: Settings,
        args: &ImportUnleashArgs,
    ) -> Result<Self, MigrationError> {
        let mut random = [0u8; 24];
        getrandom::fill(&mut random)
            .map_err(|e| MigrationError::Store(format!("no randomness for a token: {e}")))?;
        let admin_token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        settings.store = args.store.clone();
        settings.command = None;
        settings.auth.mode = AuthMode::Token;
        settings.auth.client_auth = ClientAuth::Token;
        settings.auth.admin_token = Some(SecretString(admin_token.clone()));
        // No webhook may hear of the import from here: delivery is the server's business.
        settings.delivery.enabled = false;
        // What the server's environment may set is not this replica's business: no start-up
        // document of its own, no writes sent on to another replica (the bundle is committed
        // here, in one commit).
        settings.import.import_file = None;
        settings.replication.forward_writes = false;
        settings.server.import_body_limit_mib = 1024;
        settings.server.request_timeout_ms = 600_000;
        // Nobody but this command talks to it: no drain at the end.
        settings.server.shutdown_drain_ms = 0;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| MigrationError::Store(format!("cannot listen on loopback: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| MigrationError::Store(e.to_string()))?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(crate::run(settings, listener, shutdown.clone()));
        let replica = Self {
            base: format!("http://{address}"),
            admin_token,
            http: reqwest::Client::new(),
            shutdown,
            task,
        };
        replica.wait_ready().await?;
        Ok(replica)
    }

    async fn wait_ready(&self) -> Result<(), MigrationError> {
        let started = tokio::time::Instant::now();
        loop {
            if self.task.is_finished() {
                return Err(MigrationError::Store(
                    "the store could not be opened (see the log above)".into(),
                ));
            }
            let ready = self
                .http
                .get(format!("{}/health/ready", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if started.elapsed() > READY_WITHIN {
                return Err(MigrationError::Store(format!(
                    "the store was not loaded within {} s",
                    READY_WITHIN.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// What the store holds: its state export, addon secrets included (the bundle is fitted
    /// to it).
    async fn stored(&self) -> Result<Value, MigrationError> {
        let failed = |e: String| MigrationError::Store(format!("reading what it holds: {e}"));
        let response = self
            .http
            .get(format!(
                "{}/api/admin/state/export?addonSecrets=true",
                self.base
            ))
            .header("Authorization", &self.admin_token)
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failed(status.to_string()));
        }
        response.json().await.map_err(|e| failed(e.to_string()))
    }

    /// `POST /api/admin/state/import` of the bundle: the report.
    async fn import(&self, bundle: &Value, dry_run: bool) -> Result<Value, MigrationError> {
        let response = self
            .http
            .post(format!(
                "{}/api/admin/state/import?dryRun={dry_run}",
                self.base
            ))
            .header("Authorization", &self.admin_token)
            .json(bundle)
            .send()
            .await
            .map_err(|e| MigrationError::Store(format!("the import: {e}")))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| MigrationError::Store(format!("the import's answer: {e}")))?;
        if status.is_success() {
            Ok(body)
        } else if status.is_client_error() {
            Err(MigrationError::Refused(problems(&body)))
        } else {
            Err(MigrationError::Store(format!("{status}: {body}")))
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

/// The problems of an error body, one per line.
fn problems(body: &Value) -> String {
    let details: Vec<String> = body["details"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            format!(
                "\n  {}: {}",
                d["path"].as_str().unwrap_or_default(),
                d["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if details.is_empty() {
        body.to_string()
    } else {
        format!(
            "{}{}",
            body["message"].as_str().unwrap_or_default(),
            details.concat()
        )
    }
}
