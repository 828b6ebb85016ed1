//! The real Node (`unleash-client` 6.12.1) and Python (`UnleashClient` 6.9.1) SDKs in
//! streaming mode, polling set to an hour: a toggle turned off reaches them through the
//! stream (`tests/sdk/*_streaming.*`). Installed as for `tests/it/sdks.rs`; a test whose SDK
//! is not installed says "skipping" and passes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{Backend, TestApp};

/// Runs `command` (an SDK script) against a replica holding `live` (on); turns it off once
/// the script says `ready` and returns the script's last line.
async fn flip_through_the_stream(
    app: &TestApp,
    mut command: tokio::process::Command,
) -> serde_json::Value {
    app.create_toggle("live").await;
    app.post_empty("/api/admin/features/live/toggle/on")
        .await
        .expect(200);
    let mut child = command
        .arg(&app.base)
        .arg("live")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the SDK script starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the SDK got the toggle within 30 s")
        .expect("stdout");
    if ready.as_deref() != Some("ready") {
        let output = child.wait_with_output().await.expect("script output");
        panic!(
            "the SDK script did not get ready: {ready:?}; stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    app.post_empty("/api/admin/features/live/toggle/off")
        .await
        .expect(200);
    let last = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the script finished within 30 s")
        .expect("stdout");
    let output = child.wait_with_output().await.expect("script output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK script failed:\n{stderr}");
    serde_json::from_str(last.as_deref().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the script's last line is not JSON ({e}): {last:?}\n{stderr}"))
}

fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_sdk_sees_a_toggle_flip_through_the_stream() {
    let Ok(installed) = std::env::var("FLAGPOLE_SDK_NODE_DIR") else {
        eprintln!("skipping: FLAGPOLE_SDK_NODE_DIR not set");
        return;
    };
    for backend in [Backend::redis(), Backend::embedded()] {
        let app = TestApp::spawn(&backend).await;
        let mut command = tokio::process::Command::new("node");
        command
            .arg(scripts().join("node_streaming.js"))
            .env("NODE_PATH", PathBuf::from(&installed).join("node_modules"));
        let report = flip_through_the_stream(&app, command).await;
        assert_eq!(report["sdk"], "node", "{report}");
        assert!(
            report["disabledAfterMs"]
                .as_u64()
                .is_some_and(|ms| ms < 5000),
            "{report}"
        );
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_sees_a_toggle_flip_through_the_stream() {
    let Ok(python) = std::env::var("FLAGPOLE_SDK_PYTHON") else {
        eprintln!("skipping: FLAGPOLE_SDK_PYTHON not set");
        return;
    };
    for backend in [Backend::redis(), Backend::embedded()] {
        let app = TestApp::spawn(&backend).await;
        let mut command = tokio::process::Command::new(&python);
        command
            .arg(scripts().join("python_streaming.py"))
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1");
        let report = flip_through_the_stream(&app, command).await;
        assert_eq!(report["sdk"], "python", "{report}");
        assert!(
            report["disabledAfterMs"]
                .as_u64()
                .is_some_and(|ms| ms < 5000),
            "{report}"
        );
        app.stop().await;
    }
}
