//! No secret in any log line: the real binary, logging everything it can, is sent tokens,
//! basic-auth passwords and session cookies, and its output is searched for them.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::receiver::free_port;

const ADMIN: &str = "bootstrap-admin-secret-7f3a";
const PASSWORD: &str = "basic-password-91c2";

/// Runs the binary with `args`, lets `exercise` call it, stops it, and returns its output.
async fn logged<F, Fut>(args: &[&str], exercise: F) -> String
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    let data = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ])
        .arg("--data-dir")
        .arg(data.path())
        .args(args)
        .env("RUST_LOG", "trace")
        .env("FLAGPOLE_SHUTDOWN_DRAIN_MS", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flagpole");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !matches!(http.get(format!("{base}/health")).send().await, Ok(r) if r.status() == 200) {
        assert!(Instant::now() < deadline, "binary did not become healthy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut secrets = exercise(base).await;
    secrets.push(ADMIN.into());
    secrets.push(PASSWORD.into());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.lines().count() > 10, "the binary logged: {text}");
    for secret in secrets {
        assert!(!secret.is_empty());
        let leaked: Vec<&str> = text.lines().filter(|l| l.contains(&secret)).collect();
        assert!(leaked.is_empty(), "secret {secret} logged in: {leaked:?}");
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_passwords_and_cookies_never_reach_the_logs() {
    logged(
        &["--auth", "token", "--admin-token", ADMIN],
        |base| async move {
            let http = reqwest::Client::new();
            let created: serde_json::Value = http
                .post(format!("{base}/api/admin/api-tokens"))
                .header("Authorization", ADMIN)
                .json(&json!({"username": "sdk", "type": "client"}))
                .send()
                .await
                .expect("create")
                .json()
                .await
                .expect("json");
            let secret = created["secret"].as_str().expect("secret").to_string();
            for token in [secret.as_str(), "unknown-token-5d1e", ADMIN] {
                let _ = http
                    .get(format!("{base}/api/client/features"))
                    .bearer_auth(token)
                    .send()
                    .await;
                let _ = http
                    .get(format!("{base}/api/admin/features"))
                    .header("Authorization", token)
                    .send()
                    .await;
            }
            let _ = http
                .put(format!("{base}/api/admin/api-tokens/{secret}"))
                .header("Authorization", ADMIN)
                .json(&json!({"expiresAt": null}))
                .send()
                .await;
            let _ = http
                .get(format!("{base}/api/admin/features"))
                .basic_auth("ann", Some(PASSWORD))
                .send()
                .await;
            vec![secret, "unknown-token-5d1e".into()]
        },
    )
    .await;
    logged(&["--auth", "insecure"], |base| async move {
        let http = reqwest::Client::new();
        let login = http
            .post(format!("{base}/api/admin/login"))
            .json(&json!({"email": "ann@example.com"}))
            .send()
            .await
            .expect("login");
        let cookie = login
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|c| c.split(';').next())
            .expect("cookie")
            .to_string();
        let _ = http
            .get(format!("{base}/api/admin/user"))
            .header("Cookie", &cookie)
            .send()
            .await;
        let _ = http
            .get(format!("{base}/api/admin/features"))
            .basic_auth("ann", Some(PASSWORD))
            .send()
            .await;
        let value = cookie
            .split_once('=')
            .map(|(_, v)| v.to_string())
            .expect("value");
        vec![value]
    })
    .await;
}

#[test]
fn a_refused_token_setting_is_not_echoed() {
    let output = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .env("FLAGPOLE_ADMIN_TOKEN", "short-secret")
        .args(["--listen", "127.0.0.1:0", "--auth", "token"])
        .output()
        .expect("run flagpole");
    assert!(!output.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("--admin-token"), "{text}");
    assert!(!text.contains("short-secret"), "{text}");
}
