//! The real binary: settings from flags and environment, serving, graceful shutdown.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_and_stops_on_sigterm() {
    let data = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .env("FLAGPOLE_LISTEN", format!("127.0.0.1:{port}"))
        // Set but empty, as templated environments do: the embedded store.
        .env("FLAGPOLE_REDIS_URL", "")
        .env("FLAGPOLE_SHUTDOWN_DRAIN_MS", "0")
        .args(["--data-dir"])
        .arg(data.path())
        .args(["--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flagpole");
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(r) = http.get(format!("{base}/health")).send().await {
            if r.status() == 200 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "binary did not become healthy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let created = http
        .post(format!("{base}/api/admin/features"))
        .basic_auth("ops", Some(""))
        .json(&serde_json::json!({"name": "from-binary", "strategies": [{"name": "default"}]}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 200);
    assert!(data.path().join("flagpole.redb").exists());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "binary did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "exit status {exit}");
}

/// Runs the binary with `args`, asserts it refused to start, and returns what it said.
fn refused(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .args(args)
        .output()
        .expect("run flagpole");
    assert!(!output.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_settings_are_refused_at_start() {
    assert!(refused(&["--key-prefix", "a{b}"]).contains("key prefix"));
    assert!(refused(&["--embedded-cache-mib", "0"]).contains("embedded-cache-mib"));
    let help = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .arg("--help")
        .output()
        .expect("run flagpole --help");
    let text = String::from_utf8_lossy(&help.stdout);
    for variable in [
        "FLAGPOLE_LISTEN",
        "FLAGPOLE_REDIS_URL",
        "FLAGPOLE_DATA_DIR",
        "FLAGPOLE_EMBEDDED_CACHE_MIB",
        "FLAGPOLE_KEY_PREFIX",
        "FLAGPOLE_LOG_FORMAT",
        "FLAGPOLE_AUTH",
        "FLAGPOLE_REDIS_MODE",
        "FLAGPOLE_REDIS_SENTINEL_SERVICE",
        "FLAGPOLE_REDIS_TLS_CA",
        "FLAGPOLE_REDIS_TLS_CERT",
        "FLAGPOLE_REDIS_TLS_KEY",
        "FLAGPOLE_REDIS_WAIT_REPLICAS",
        "FLAGPOLE_REDIS_WAIT_TIMEOUT_MS",
    ] {
        assert!(
            text.contains(variable),
            "--help does not mention {variable}"
        );
    }
}

/// The flags `--help` lists, one line each, sorted: the flag, its variable, its default and
/// its possible values. Groups and descriptions may change; these are what deployments rely on.
fn help_flags(help: &str) -> Vec<String> {
    let mut flags: Vec<Vec<String>> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        // A flag starts an entry at the options' indent (2 or 6 spaces); its description,
        // brackets and possible values follow further in (10 spaces).
        if trimmed.starts_with('-') && (1..10).contains(&indent) {
            let name = trimmed.split(" <").next().unwrap_or(trimmed);
            flags.push(vec![name.to_string()]);
            continue;
        }
        let Some(entry) = flags.last_mut() else {
            continue;
        };
        if indent < 10 {
            continue;
        }
        if let Some(env) = trimmed.strip_prefix("[env: ") {
            // The value shown after `=` is the caller's environment, not the flag's.
            let name = env.trim_end_matches(']').split('=').next().unwrap_or(env);
            entry.push(format!("env={name}"));
        } else if let Some(default) = trimmed.strip_prefix("[default: ") {
            entry.push(format!("default={}", default.trim_end_matches(']')));
        } else if let Some(values) = trimmed.strip_prefix("[possible values: ") {
            entry.push(format!(
                "values={}",
                values.trim_end_matches(']').replace(' ', "")
            ));
        } else if let Some(value) = trimmed.strip_prefix("- ") {
            // Long help lists documented values one a line: `- name: what it means`.
            let value = value.split(':').next().unwrap_or(value);
            match entry.iter_mut().find(|part| part.starts_with("values=")) {
                Some(values) => values.push_str(&format!(",{value}")),
                None => entry.push(format!("values={value}")),
            }
        }
    }
    let mut lines: Vec<String> = flags
        .into_iter()
        .map(|mut entry| {
            entry[1..].sort();
            entry.join(" ")
        })
        .collect();
    lines.sort();
    lines
}

/// Grouping the settings must not change a flag, a variable or a default: `--help`'s flags
/// are compared with the list taken from the binary before the settings were grouped.
#[test]
fn help_lists_the_same_flags_variables_and_defaults() {
    let help = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .arg("--help")
        // Variables set in the test's environment would show their values in `--help`.
        .env_clear()
        .output()
        .expect("run flagpole --help");
    assert!(help.status.success(), "flagpole --help failed");
    let actual = help_flags(&String::from_utf8_lossy(&help.stdout));
    let expected: Vec<String> = include_str!("fixtures/help_flags.txt")
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = expected.iter().filter(|l| !actual.contains(l)).collect();
    let added: Vec<_> = actual.iter().filter(|l| !expected.contains(l)).collect();
    assert!(
        missing.is_empty() && added.is_empty(),
        "--help's flags changed\nmissing: {missing:#?}\nnew: {added:#?}\nall of them now:\n{}",
        actual.join("\n")
    );
    assert_eq!(actual.len(), expected.len(), "a flag is listed twice");
}
