//! Real clients of server-side evaluation against a real Flagpole: the frontend JS SDK
//! (`unleash-proxy-client` 3.8.2 on Node) polling, evaluating and sending metrics; the OFREP
//! providers for Node (`@openfeature/ofrep-provider`) and Python (`openfeature-provider-ofrep`)
//! evaluating through OpenFeature (`tests/sdk/node_frontend.mjs`, `tests/sdk/python_ofrep.py`).
//!
//! Installed by `scripts/test.sh` with the other SDKs; a test whose SDK is not installed
//! (`FLAGPOLE_SDK_NODE_DIR`, `FLAGPOLE_SDK_PYTHON` unset) says "skipping" and passes.

use std::path::PathBuf;
use std::time::Duration;

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::{json, Value};

use crate::auth::{create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{eventually, Backend, TestApp};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// A replica in token mode with the scripts' toggles, and a frontend token.
async fn start() -> (Backend, TestApp, String) {
    let backend = Backend::embedded();
    let app = TestApp::spawn_with(settings(&backend, AuthMode::Token, ClientAuth::Token)).await;
    let document = json!({"version": 2, "features": [
        {"name": "sdk.on", "enabled": true, "strategies": [{"name": "default"}]},
        {"name": "sdk.off", "enabled": false, "strategies": [{"name": "default"}]},
        {"name": "sdk.user", "enabled": true,
         "strategies": [{"name": "userWithId", "parameters": {"userIds": "u1"}}]},
        {"name": "sdk.payload", "enabled": true, "strategies": [{"name": "default"}],
         "variants": [{"name": "blue", "weight": 1000, "stickiness": "default",
                       "payload": {"type": "string", "value": "b"}}]},
    ]});
    with_token(
        &app,
        Method::POST,
        "/api/admin/state/import?environment=default&drop=true",
        Some(ADMIN_TOKEN),
        Some(document),
    )
    .await
    .expect(202);
    let token = create_token(&app, json!({"tokenName": "web", "type": "frontend"})).await;
    (backend, app, token)
}

/// Runs `command` and returns the last line it printed, as JSON.
async fn run(mut command: tokio::process::Command, what: &str) -> Value {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {what}: {e}"));
    let output = tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {SCRIPT_TIMEOUT:?}"))
        .expect("waiting for the script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("{what} printed nothing; stderr:\n{stderr}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {line}"))
}

fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontend_js_sdk_and_the_node_ofrep_provider() {
    let Some(node_dir) = std::env::var("FLAGPOLE_SDK_NODE_DIR")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        eprintln!("skipping: FLAGPOLE_SDK_NODE_DIR not set");
        return;
    };
    let (_backend, app, token) = start().await;
    let mut command = tokio::process::Command::new("node");
    command
        .arg(scripts().join("node_frontend.mjs"))
        .arg(&app.base)
        .arg(&token)
        .arg("web-shop")
        .env("NODE_PATH", PathBuf::from(&node_dir).join("node_modules"));
    let report = run(command, "the frontend JS SDK script").await;
    let frontend = &report["frontend"];
    assert_eq!(frontend["on"], true, "{report}");
    assert_eq!(frontend["off"], false, "{report}");
    assert_eq!(frontend["userBefore"], false, "{report}");
    assert_eq!(frontend["userAfter"], true, "{report}");
    assert_eq!(frontend["stillOn"], true, "{report}");
    assert_eq!(frontend["variant"]["name"], "blue", "{report}");
    assert_eq!(frontend["variant"]["payload"]["value"], "b", "{report}");
    let ofrep = &report["ofrep"];
    assert_eq!(
        (
            &ofrep["on"],
            &ofrep["off"],
            &ofrep["userU1"],
            &ofrep["userU2"]
        ),
        (&json!(true), &json!(false), &json!(true), &json!(false)),
        "{report}"
    );
    assert_eq!(ofrep["payload"], "b", "{report}");
    assert_eq!(ofrep["details"]["reason"], "STATIC", "{report}");
    assert_eq!(ofrep["missing"]["value"], true, "{report}");
    assert_eq!(ofrep["missing"]["errorCode"], "FLAG_NOT_FOUND", "{report}");

    // The re-polls were answered 304, and the SDK's metrics reached the usage views.
    let not_modified = app
        .metric("flagpole_evaluation_responses_total{api=\"frontend\",response=\"304\"}")
        .await
        .unwrap_or(0.0);
    assert!(not_modified >= 1.0, "re-polls answered 304: {not_modified}");
    let counted = eventually(Duration::from_secs(10), || async {
        let view = with_token(
            &app,
            Method::GET,
            "/api/admin/metrics/feature-toggles/sdk.on",
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
        view.json.to_string().contains("web-shop")
    })
    .await;
    assert!(counted, "the frontend SDK's metrics are in the usage views");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontend_python_ofrep_provider() {
    let Some(python) = std::env::var("FLAGPOLE_SDK_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        eprintln!("skipping: FLAGPOLE_SDK_PYTHON not set");
        return;
    };
    let (_backend, app, token) = start().await;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(scripts().join("python_ofrep.py"))
        .arg(&app.base)
        .arg(&token)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let report = run(command, "the Python OFREP script").await;
    assert_eq!(report["on"], true, "{report}");
    assert_eq!(report["off"], false, "{report}");
    assert_eq!(report["userU1"], true, "{report}");
    assert_eq!(report["userU2"], false, "{report}");
    assert_eq!(report["payload"], "b", "{report}");
    assert_eq!(report["variant"], "disabled", "{report}");
    assert!(
        report["reason"].as_str().unwrap_or("").contains("STATIC"),
        "{report}"
    );
    assert_eq!(report["missingValue"], true, "{report}");
    assert!(
        report["missingError"]
            .as_str()
            .unwrap_or("")
            .contains("FLAG_NOT_FOUND"),
        "{report}"
    );
}
