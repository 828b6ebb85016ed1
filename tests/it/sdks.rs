//! The real Unleash SDKs for Python (`UnleashClient`) and Node (`unleash-client`) against a
//! real Flagpole: each SDK registers, polls, evaluates three toggles and sends its metrics
//! (`tests/sdk/*_sdk.*`), and the admin metrics views must then show exactly what it
//! evaluated.
//!
//! `scripts/test.sh` installs the SDKs (pinned in `tests/sdk/requirements.txt` and
//! `tests/sdk/package.json`) and sets `FLAGPOLE_SDK_PYTHON` (the venv's python) and
//! `FLAGPOLE_SDK_NODE_DIR` (the folder holding the SDK's `node_modules`). A test whose
//! variable is unset says so and passes, so that a plain offline `cargo test` works.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{eventually, send, Backend, TestApp};

/// How long one SDK script may run (it gives up by itself after 30 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the views may take to show the metrics once the script is done (a flush is
/// every 200 ms here).
const VIEW_TIMEOUT: Duration = Duration::from_secs(15);
const TOGGLES: [&str; 3] = ["sdk.on", "sdk.off", "sdk.variants"];

#[derive(Clone, Copy)]
enum Sdk {
    Python,
    Node,
}

impl Sdk {
    fn label(self) -> &'static str {
        match self {
            Sdk::Python => "python",
            Sdk::Node => "node",
        }
    }

    /// The variable `scripts/test.sh` sets when the SDK is installed.
    fn env_var(self) -> &'static str {
        match self {
            Sdk::Python => "FLAGPOLE_SDK_PYTHON",
            Sdk::Node => "FLAGPOLE_SDK_NODE_DIR",
        }
    }

    /// The SDK's name as it appears in its `sdkVersion` (`name:version`).
    fn sdk_name(self) -> &'static str {
        match self {
            Sdk::Python => "unleash-python-sdk",
            Sdk::Node => "unleash-node-sdk",
        }
    }

    /// The command running this SDK's script; `installed` is the variable's value.
    fn command(self, installed: &str) -> tokio::process::Command {
        let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
        match self {
            Sdk::Python => {
                let mut command = tokio::process::Command::new(installed);
                command
                    .arg(scripts.join("python_sdk.py"))
                    .env("PYTHONUNBUFFERED", "1")
                    .env("PYTHONDONTWRITEBYTECODE", "1");
                command
            }
            Sdk::Node => {
                let mut command = tokio::process::Command::new("node");
                command
                    .arg(scripts.join("node_sdk.js"))
                    .env("NODE_PATH", PathBuf::from(installed).join("node_modules"));
                command
            }
        }
    }
}

/// Where the SDK is installed, or `None` (after saying so) when the test must be skipped.
fn installed_sdk(sdk: Sdk) -> Option<String> {
    match std::env::var(sdk.env_var()) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            eprintln!("skipping: {} not set", sdk.env_var());
            None
        }
    }
}

/// Creates `sdk.on` (on, default strategy), `sdk.off` (off) and `sdk.variants` (on, two
/// variants) through the admin API.
async fn create_toggles(app: &TestApp) {
    for body in [
        json!({"name": "sdk.on", "enabled": true, "strategies": [{"name": "default"}]}),
        json!({"name": "sdk.off", "enabled": false, "strategies": [{"name": "default"}]}),
        json!({
            "name": "sdk.variants",
            "enabled": true,
            "strategies": [{"name": "default"}],
            "variants": [
                {"name": "blue", "weight": 500, "payload": {"type": "string", "value": "b"}},
                {"name": "green", "weight": 500}
            ]
        }),
    ] {
        app.post("/api/admin/features", body).await.expect(200);
    }
    let features = app.client_features("", None).await.expect(200).json;
    let enabled: Vec<(String, bool)> = features["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("name").to_string(),
                t["enabled"].as_bool().expect("enabled"),
            )
        })
        .collect();
    assert_eq!(
        enabled,
        [
            ("sdk.off".to_string(), false),
            ("sdk.on".to_string(), true),
            ("sdk.variants".to_string(), true)
        ],
        "the client document does not hold the three toggles as created"
    );
}

/// Runs the SDK's script against `app` and returns the JSON line it printed.
async fn run_script(sdk: Sdk, installed: &str, app: &TestApp, app_name: &str) -> Value {
    let mut command = sdk.command(installed);
    command
        .arg(&app.base)
        .arg(app_name)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("could not start the {} SDK script: {e}", sdk.label()));
    let output = tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the {} SDK script did not finish within {SCRIPT_TIMEOUT:?}",
                sdk.label()
            )
        })
        .expect("waiting for the SDK script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the {} SDK script failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        sdk.label(),
        output.status
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| {
            panic!(
                "the {} SDK script printed nothing; stderr:\n{stderr}",
                sdk.label()
            )
        });
    let report: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("the last line of the script is not JSON ({e}): {line}"));
    check_report(sdk, app_name, &report);
    report
}

/// The script's own account must be plausible, or matching the views to it proves nothing.
fn check_report(sdk: Sdk, app_name: &str, report: &Value) {
    assert_eq!(report["sdk"], sdk.label(), "{report}");
    assert_eq!(report["appName"], app_name, "{report}");
    assert_eq!(report["registered"], true, "{report}");
    assert!(report["metricsSent"].as_u64().unwrap_or(0) >= 1, "{report}");
    let sdk_version = report["sdkVersion"].as_str().unwrap_or_default();
    assert!(sdk_version.starts_with(sdk.sdk_name()), "{report}");
    assert!(
        report["strategies"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{report}"
    );
    let toggles = &report["toggles"];
    let count = |name: &str, field: &str| toggles[name][field].as_u64();
    assert!(
        count("sdk.on", "yes") > Some(0) && count("sdk.on", "no") == Some(0),
        "{report}"
    );
    assert!(
        count("sdk.off", "yes") == Some(0) && count("sdk.off", "no") > Some(0),
        "{report}"
    );
    assert!(
        count("sdk.variants", "yes") > Some(0) && count("sdk.variants", "no") == Some(0),
        "{report}"
    );
    let variants: u64 = toggles["sdk.variants"]["variants"]
        .as_object()
        .expect("variant counts")
        .values()
        .map(|n| n.as_u64().expect("count"))
        .sum();
    assert_eq!(Some(variants), count("sdk.variants", "yes"), "{report}");
}

/// `Ok` when the admin views show what the script reported, else the first difference.
async fn check_views(
    app: &TestApp,
    app_name: &str,
    sdk: Sdk,
    report: &Value,
) -> Result<(), String> {
    let evaluated = &report["toggles"];

    // Per toggle, every application: yes/no as evaluated (a variant counts once).
    let metrics = get_ok(app, "/api/admin/metrics/feature-toggles").await?;
    for name in TOGGLES {
        for field in ["yes", "no"] {
            let shown = metrics["lastHour"][name][field].as_u64();
            let want = evaluated[name][field].as_u64();
            if shown != want {
                return Err(format!(
                    "feature-toggles lastHour.{name}.{field} is {shown:?}, evaluated {want:?}: {metrics}"
                ));
            }
        }
    }

    // One toggle in detail: the variant breakdown and the per-application numbers.
    let detail = get_ok(app, "/api/admin/metrics/feature-toggles/sdk.variants").await?;
    let want = &evaluated["sdk.variants"];
    if detail["lastHour"]["yes"] != want["yes"]
        || detail["lastHour"]["no"] != want["no"]
        || detail["lastHour"]["variants"] != want["variants"]
    {
        return Err(format!(
            "feature-toggles/sdk.variants lastHour differs from {want}: {detail}"
        ));
    }
    let per_app = detail["applications"]
        .as_array()
        .and_then(|apps| apps.iter().find(|a| a["appName"] == app_name));
    match per_app {
        Some(a) if a["lastHour"]["yes"] == want["yes"] && a["lastHour"]["no"] == want["no"] => {}
        _ => {
            return Err(format!(
                "feature-toggles/sdk.variants lacks {app_name} with {want}: {detail}"
            ))
        }
    }

    // The application: one instance, the SDK's version, its strategies, its toggles.
    let details = get_ok(app, &format!("/api/admin/metrics/applications/{app_name}")).await?;
    let instances = details["instances"].as_array().cloned().unwrap_or_default();
    if instances.len() != 1 {
        return Err(format!(
            "applications/{app_name} should list one instance: {details}"
        ));
    }
    let instance = &instances[0];
    if instance["instanceId"] != report["instanceId"] {
        return Err(format!(
            "instanceId should be {}: {details}",
            report["instanceId"]
        ));
    }
    let sdk_version = instance["sdkVersion"].as_str().unwrap_or_default();
    if !sdk_version.contains(sdk.sdk_name()) || instance["sdkVersion"] != report["sdkVersion"] {
        return Err(format!(
            "sdkVersion should be {}: {details}",
            report["sdkVersion"]
        ));
    }
    let strategies_listed = details["strategies"].as_array().is_some_and(|entries| {
        entries
            .iter()
            .any(|e| e["appName"] == app_name && e["strategies"] == report["strategies"])
    });
    if !strategies_listed {
        return Err(format!(
            "strategies should be {}: {details}",
            report["strategies"]
        ));
    }
    if !contains_all(&details["seenToggles"]) {
        return Err(format!(
            "applications/{app_name} seenToggles lacks {TOGGLES:?}: {details}"
        ));
    }
    // The SDK polled with UNLEASH-APPNAME and UNLEASH-INSTANCEID, and nothing changed since.
    let etag = app.client_features("", None).await.header("etag");
    let configuration = &instance["configuration"];
    if configuration["etag"].as_str() != etag.as_deref() || configuration["current"] != true {
        return Err(format!(
            "configuration should be current with ETag {etag:?}: {details}"
        ));
    }

    // The application list and the seen toggles.
    let apps = get_ok(app, "/api/admin/metrics/applications").await?;
    let listed = apps["applications"]
        .as_array()
        .is_some_and(|list| list.iter().any(|a| a["appName"] == app_name));
    if !listed {
        return Err(format!("applications does not list {app_name}: {apps}"));
    }
    let seen = get_ok(app, "/api/admin/metrics/seen-toggles").await?;
    let seen_app = seen
        .as_array()
        .and_then(|list| list.iter().find(|a| a["appName"] == app_name));
    match seen_app {
        Some(entry) if contains_all(&entry["seenToggles"]) => Ok(()),
        _ => Err(format!(
            "seen-toggles lacks {TOGGLES:?} for {app_name}: {seen}"
        )),
    }
}

/// Whether a JSON array of names holds the three toggles.
fn contains_all(names: &Value) -> bool {
    names
        .as_array()
        .is_some_and(|names| TOGGLES.iter().all(|t| names.iter().any(|n| n == t)))
}

async fn get_ok(app: &TestApp, path: &str) -> Result<Value, String> {
    let reply = send(app.admin(Method::GET, path)).await;
    if reply.status.as_u16() == 200 {
        Ok(reply.json)
    } else {
        Err(format!(
            "GET {path} answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.bytes)
        ))
    }
}

/// The whole round trip of one SDK on one backend.
/// The backend is made only when the SDK is there, so a skipped test needs no redis-server.
async fn sdk_round_trip(sdk: Sdk, backend: fn() -> Backend, backend_label: &str) {
    let Some(installed) = installed_sdk(sdk) else {
        return;
    };
    let backend = backend();
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    create_toggles(&app).await;
    app.settle().await;

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    let app_name = format!(
        "sdk-{}-{backend_label}-{}-{nanos}",
        sdk.label(),
        std::process::id()
    );
    let report = run_script(sdk, &installed, &app, &app_name).await;

    let shown = eventually(VIEW_TIMEOUT, || async {
        check_views(&app, &app_name, sdk, &report).await.is_ok()
    })
    .await;
    if !shown {
        let difference = check_views(&app, &app_name, sdk, &report)
            .await
            .err()
            .unwrap_or_else(|| "(matched only on the last look)".into());
        panic!(
            "the views did not show what the {} SDK evaluated within {VIEW_TIMEOUT:?}; \
             the SDK reported {report}; {difference}",
            sdk.label()
        );
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_embedded() {
    sdk_round_trip(Sdk::Python, Backend::embedded, "embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_redis() {
    sdk_round_trip(Sdk::Python, Backend::redis, "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_embedded() {
    sdk_round_trip(Sdk::Node, Backend::embedded, "embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_redis() {
    sdk_round_trip(Sdk::Node, Backend::redis, "redis").await;
}
