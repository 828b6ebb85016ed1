//! Every strategy-constraint operator, served by Flagpole and evaluated by the real Unleash
//! SDKs, gives the answer the operator's definition gives.
//!
//! A table of cases — a toggle (enabled, strategy `default` with one constraint, or two to show
//! that constraints are ANDed), an evaluation context and the expected answer — covers `IN`,
//! `NOT_IN`, `STR_*`, `NUM_*`, `DATE_*`, `SEMVER_*` (`SEMVER_GTE` and `SEMVER_LTE` included),
//! `REGEX` and `IN_CIDR`, with `inverted` and `caseInsensitive`, on custom context fields
//! (`plan`, `email`, `age`, `appVersion`) and built-in ones (`userId`, `environment`,
//! `currentTime`). The expected answers come from the operator definitions in the Unleash
//! reference documentation (e.g. `NUM_GT`: the context value is greater than the
//! constraint's; `DATE_AFTER`: the context's `currentTime` is after it; `SEMVER_*`: semver
//! precedence, pre-releases below their release, build metadata ignored; `REGEX`: the pattern
//! matches somewhere in the value; `IN_CIDR`: the value is an address inside a block; a value
//! that does not convert makes the constraint false; `caseInsensitive` applies to `STR_*` and
//! `REGEX` only, `IN` and `NOT_IN` stay case-sensitive; `inverted` negates), never from running
//! an SDK.
//!
//! - The Rust SDK (`unleash-api-client`, evaluating with `unleash-yggdrasil`) evaluates every
//!   case in-process, on both store backends.
//! - The Python (`UnleashClient`) and Node (`unleash-client`) SDKs evaluate them through
//!   `tests/sdk/python_constraints.py` and `tests/sdk/node_constraints.js`, on the Redis backend
//!   only. As in `tests/it/sdks.rs`, such a test says "skipping" and passes when
//!   `FLAGPOLE_SDK_PYTHON` or `FLAGPOLE_SDK_NODE_DIR` is unset (`scripts/test.sh` sets them).
//!
//! Each test fails naming every case whose answer differs from the table (`cases.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use unleash_api_client::client::{ClientBuilder, FeatureKey};
use unleash_api_client::context::Context;

use crate::common::{eventually, Backend, TestApp};
use crate::conformance;

mod cases;
use cases::{cases, Case};

conformance!(the_rust_sdk_evaluates_every_operator_as_defined);

/// How long one SDK script may run (it gives up by itself after 30 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the Rust SDK may take to fetch the toggles.
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);
/// The custom context fields the cases use (the built-ins need no creating).
const CUSTOM_FIELDS: [&str; 4] = ["plan", "email", "age", "appVersion"];

#[derive(Clone, Copy)]
enum Sdk {
    Rust,
    Python,
    Node,
}

impl Sdk {
    fn label(self) -> &'static str {
        match self {
            Sdk::Rust => "rust",
            Sdk::Python => "python",
            Sdk::Node => "node",
        }
    }
}

/// Creates the custom context fields and one toggle per case, and checks that the client API
/// serves every toggle enabled with its constraints exactly as written.
async fn serve_cases(backend: &Backend, cases: &[Case]) -> TestApp {
    let app = TestApp::spawn(backend).await;
    for field in CUSTOM_FIELDS {
        app.post("/api/admin/context", json!({ "name": field }))
            .await
            .expect(201);
    }
    for case in cases {
        app.post(
            "/api/admin/features",
            json!({
                "name": case.toggle(),
                "enabled": true,
                "strategies": [{"name": "default", "constraints": case.constraints}]
            }),
        )
        .await
        .expect(200);
    }
    let served = app.client_features("", None).await.expect(200).json;
    let toggles = served["features"].as_array().expect("a features list");
    for case in cases {
        let toggle = toggles
            .iter()
            .find(|t| t["name"] == case.toggle().as_str())
            .unwrap_or_else(|| panic!("the client API does not serve {}", case.toggle()));
        assert_eq!(toggle["enabled"], true, "{toggle}");
        let strategies = toggle["strategies"].as_array().expect("a strategies list");
        assert_eq!(strategies.len(), 1, "{toggle}");
        assert_eq!(strategies[0]["name"], "default", "{toggle}");
        assert_eq!(
            strategies[0]["constraints"],
            json!(case.constraints),
            "the client API serves other constraints than were written: {toggle}"
        );
    }
    app
}

/// Compares `answers` (in case order) with the table and panics naming every case that
/// differs.
fn compare(sdk: Sdk, cases: &[Case], answers: &[bool]) {
    assert_eq!(
        answers.len(),
        cases.len(),
        "the {} SDK answered {} cases of {}",
        sdk.label(),
        answers.len(),
        cases.len()
    );
    let mut differing = Vec::new();
    for (case, &answer) in cases.iter().zip(answers) {
        if answer != case.expected {
            differing.push(format!(
                "  {}: expected {}, the SDK said {answer}; constraints {}, context {}",
                case.name,
                case.expected,
                json!(case.constraints),
                case.context
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "the {} SDK answered {} of {} cases against the operator definitions:\n{}",
        sdk.label(),
        differing.len(),
        cases.len(),
        differing.join("\n")
    );
}

/// The Rust SDK asks for a feature enum; the cases are looked up by name only.
#[derive(Debug, Clone, Copy)]
enum ByName {}

impl FeatureKey for ByName {
    fn name(self) -> &'static str {
        match self {}
    }
}

async fn the_rust_sdk_evaluates_every_operator_as_defined(backend: &Backend) {
    let cases = cases();
    let app = serve_cases(backend, &cases).await;
    let contexts: Vec<Context> = cases
        .iter()
        .map(|case| {
            serde_json::from_value(case.context.clone()).unwrap_or_else(|e| {
                panic!(
                    "the context of {} is not a Rust SDK context: {e}",
                    case.name
                )
            })
        })
        .collect();

    let client = ClientBuilder::default()
        .interval(200)
        .disable_metric_submission()
        .enable_string_features()
        .into_client::<ByName>(
            &format!("{}/api", app.base),
            "constraint-sdks",
            "rust-1",
            None,
        )
        .expect("the Rust SDK client");
    let client = Arc::new(client);
    let poller = tokio::spawn({
        let client = client.clone();
        async move { client.poll_for_updates().await }
    });
    // Once the SDK holds a fetched state, a toggle it knows answers the same whatever the
    // default; an unknown one answers the default.
    let known = |case: &Case, context: &Context| {
        client.is_enabled_str(&case.toggle(), Some(context), false)
            == client.is_enabled_str(&case.toggle(), Some(context), true)
    };
    let fetched = eventually(FETCH_TIMEOUT, || {
        let all = client.cached_state().is_some()
            && cases.iter().zip(&contexts).all(|(c, ctx)| known(c, ctx));
        async move { all }
    })
    .await;
    assert!(
        fetched,
        "the Rust SDK did not learn every toggle within {FETCH_TIMEOUT:?}"
    );

    let answers: Vec<bool> = cases
        .iter()
        .zip(&contexts)
        .map(|(case, context)| client.is_enabled_str(&case.toggle(), Some(context), false))
        .collect();
    compare(Sdk::Rust, &cases, &answers);

    client.stop_poll().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), poller).await;
    app.stop().await;
}

/// The Python or Node SDK: where it is installed (`None`, after saying so, when the test
/// must be skipped) and how its script is started.
struct ScriptSdk {
    sdk: Sdk,
    env_var: &'static str,
}

const PYTHON: ScriptSdk = ScriptSdk {
    sdk: Sdk::Python,
    env_var: "FLAGPOLE_SDK_PYTHON",
};
const NODE: ScriptSdk = ScriptSdk {
    sdk: Sdk::Node,
    env_var: "FLAGPOLE_SDK_NODE_DIR",
};

impl ScriptSdk {
    fn installed(&self) -> Option<String> {
        match std::env::var(self.env_var) {
            Ok(value) if !value.is_empty() => Some(value),
            _ => {
                eprintln!("skipping: {} not set", self.env_var);
                None
            }
        }
    }

    /// The command running this SDK's script; `installed` is the variable's value.
    fn command(&self, installed: &str) -> tokio::process::Command {
        let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
        match self.sdk {
            Sdk::Python => {
                let mut command = tokio::process::Command::new(installed);
                command
                    .arg(scripts.join("python_constraints.py"))
                    .env("PYTHONUNBUFFERED", "1")
                    .env("PYTHONDONTWRITEBYTECODE", "1");
                command
            }
            Sdk::Node => {
                let mut command = tokio::process::Command::new("node");
                command
                    .arg(scripts.join("node_constraints.js"))
                    .env("NODE_PATH", PathBuf::from(installed).join("node_modules"));
                command
            }
            Sdk::Rust => unreachable!("the Rust SDK runs in-process"),
        }
    }

    /// Runs the script on the cases in `cases_file` and returns its answers, in case order.
    async fn answers(&self, installed: &str, base: &str, cases_file: &Path) -> Vec<bool> {
        let label = self.sdk.label();
        let mut command = self.command(installed);
        command
            .arg(base)
            .arg(cases_file)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("could not start the {label} SDK script: {e}"));
        let output = tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("the {label} SDK script did not finish within {SCRIPT_TIMEOUT:?}")
            })
            .expect("waiting for the SDK script");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "the {label} SDK script failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        );
        let line = stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("the {label} SDK script printed nothing; stderr:\n{stderr}"));
        let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("the last line of the {label} script is not JSON ({e}): {line}")
        });
        assert_eq!(report["sdk"], label, "{report}");
        report["answers"]
            .as_array()
            .unwrap_or_else(|| panic!("the {label} script's report has no answers: {report}"))
            .iter()
            .map(|a| {
                a.as_bool()
                    .unwrap_or_else(|| panic!("the {label} script answered {a}: {report}"))
            })
            .collect()
    }
}

/// One script SDK evaluating every case, on the Redis backend.
async fn script_sdk_evaluates_every_operator(sdk: ScriptSdk) {
    let Some(installed) = sdk.installed() else {
        return;
    };
    let cases = cases();
    let backend = Backend::redis();
    let app = serve_cases(&backend, &cases).await;

    let input: Vec<Value> = cases
        .iter()
        .map(|c| json!({"toggle": c.toggle(), "context": c.context, "expected": c.expected}))
        .collect();
    let dir = tempfile::tempdir().expect("a temp dir for the cases");
    let cases_file = dir.path().join("cases.json");
    std::fs::write(
        &cases_file,
        serde_json::to_vec(&input).expect("the cases as JSON"),
    )
    .expect("writing the cases file");

    let answers = sdk.answers(&installed, &app.base, &cases_file).await;
    compare(sdk.sdk, &cases, &answers);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_evaluates_every_operator_as_defined() {
    script_sdk_evaluates_every_operator(PYTHON).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_sdk_evaluates_every_operator_as_defined() {
    script_sdk_evaluates_every_operator(NODE).await;
}
