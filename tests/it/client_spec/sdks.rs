//! The three SDKs evaluating every case of every file: the Rust SDK in this process, the Node
//! and Python SDKs in one child process each (`tests/sdk/*_client_spec.*`), all files in one
//! run (starting a process per file would cost more than the evaluation).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use unleash_api_client::client::{ClientBuilder, FeatureKey};
use unleash_api_client::context::Context;

use super::server::Served;
use super::spec::{Case, Expected, SpecFile};
use crate::common::eventually;

/// How long one script SDK process may run in all (the scripts give up by themselves after
/// 50 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the Rust SDK may take to fetch one file's document.
const RUST_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// An SDK under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sdk {
    /// `unleash-api-client` 0.17 (evaluating with `unleash-yggdrasil`), in-process.
    Rust,
    /// `unleash-client` 6.12.1, through `tests/sdk/node_client_spec.js`.
    Node,
    /// `UnleashClient` 6.9.1, through `tests/sdk/python_client_spec.py`.
    Python,
}

impl Sdk {
    /// The name the deviation list uses.
    pub fn label(self) -> &'static str {
        match self {
            Sdk::Rust => "rust",
            Sdk::Node => "node",
            Sdk::Python => "python",
        }
    }

    /// The variable `scripts/test.sh` sets when a script SDK is installed.
    fn env_var(self) -> Option<&'static str> {
        match self {
            Sdk::Rust => None,
            Sdk::Node => Some("FLAGPOLE_SDK_NODE_DIR"),
            Sdk::Python => Some("FLAGPOLE_SDK_PYTHON"),
        }
    }

    /// Whether this SDK can run here (saying "skipping" when not).
    pub fn available(self) -> bool {
        match self.env_var().map(std::env::var) {
            None => true,
            Some(Ok(value)) if !value.is_empty() => true,
            Some(_) => {
                eprintln!(
                    "skipping the {} SDK: {} not set",
                    self.label(),
                    self.env_var().unwrap_or_default()
                );
                false
            }
        }
    }
}

/// What an SDK answered for one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Enabled(bool),
    /// The variant as the SDK reports it, as JSON.
    Variant(Value),
    /// The SDK (or the runner, e.g. when the SDK never fetched the file) gave no answer.
    Error(String),
}

/// Runs `sdk` over every file, `served` saying where each file is (same order as `files`);
/// the answers are per file, per case, in order.
pub async fn answers(sdk: Sdk, files: &[SpecFile], served: &[Served]) -> Vec<Vec<Answer>> {
    assert_eq!(files.len(), served.len(), "a location for every file");
    match sdk {
        Sdk::Rust => {
            let runs = files.iter().zip(served).map(|(f, s)| rust_file(f, s));
            spawn_all(runs).await
        }
        Sdk::Node | Sdk::Python => script_answers(sdk, files, served).await,
    }
}

/// Runs the futures as tasks of their own, at the same time, and returns their outputs in
/// order (one task per file is cheap).
async fn spawn_all<F>(runs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = runs.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("an SDK run panicked"));
    }
    out
}

/// The Rust SDK asks for a feature enum; the cases are looked up by name only.
#[derive(Debug, Clone, Copy)]
enum ByName {}

impl FeatureKey for ByName {
    fn name(self) -> &'static str {
        match self {}
    }
}

/// One Rust SDK client, fresh for this file, polling its URL.
fn rust_file(
    file: &SpecFile,
    served: &Served,
) -> impl std::future::Future<Output = Vec<Answer>> + Send + 'static {
    let cases = file.cases.clone();
    let served = served.clone();
    async move {
        let client = ClientBuilder::default()
            // Also the request timeout (ms) the SDK uses.
            .interval(1000)
            .disable_metric_submission()
            .enable_string_features()
            .into_client::<ByName>(
                &served.api_url,
                "flagpole-client-spec",
                &format!("rust-client-spec-{}", served.file_id),
                served.authorization.clone(),
            )
            .expect("the Rust SDK client");
        let client = Arc::new(client);
        let poller = tokio::spawn({
            let client = client.clone();
            async move { client.poll_for_updates().await }
        });
        let fetched = eventually(RUST_FETCH_TIMEOUT, || {
            let has = client.cached_state().is_some();
            async move { has }
        })
        .await;
        let answers = if !fetched {
            let why = format!("the Rust SDK did not fetch the file within {RUST_FETCH_TIMEOUT:?}");
            vec![Answer::Error(why); cases.len()]
        } else {
            cases
                .iter()
                .map(|case| rust_answer(&client, case))
                .collect()
        };
        // The poller would only stop after its next interval; nothing is left to wait for.
        poller.abort();
        answers
    }
}

fn rust_answer(client: &unleash_api_client::Client<ByName>, case: &Case) -> Answer {
    // The SDK's Context deserialises from the Unleash context's JSON field names.
    let context: Context = match serde_json::from_value(case.context.clone()) {
        Ok(context) => context,
        Err(e) => return Answer::Error(format!("the Rust SDK's Context refuses it: {e}")),
    };
    match case.expected {
        Expected::Enabled(_) => {
            Answer::Enabled(client.is_enabled_str(&case.toggle, Some(&context), false))
        }
        Expected::Variant(_) => {
            let variant = client.get_variant_str(&case.toggle, &context);
            // The SDK reports no payload as an empty map, and no `feature_enabled`.
            let mut out = json!({"name": variant.name, "enabled": variant.enabled});
            if !variant.payload.is_empty() {
                out["payload"] = json!(variant.payload);
            }
            Answer::Variant(out)
        }
    }
}

/// Runs the Node or Python script once over every file. Its input (on stdin):
///
/// `{"files": [{"id", "url", "authorization"?, "cases": [{"kind": "enabled"|"variant",
/// "toggle", "context"}]}]}`
///
/// and its output (the last line on stdout):
///
/// `{"sdk", "files": [{"id", "error"?, "results": [{"enabled": bool} | {"variant": {...}}
/// | {"error": "..."}]}]}`.
async fn script_answers(sdk: Sdk, files: &[SpecFile], served: &[Served]) -> Vec<Vec<Answer>> {
    use tokio::io::AsyncWriteExt;

    let label = sdk.label();
    let installed = std::env::var(sdk.env_var().expect("a script SDK")).expect("checked");
    let input = json!({"files": files.iter().zip(served).map(|(file, served)| json!({
        "id": file.id,
        "url": served.api_url,
        "authorization": served.authorization,
        "cases": file.cases.iter().map(|case| json!({
            "kind": match case.expected { Expected::Enabled(_) => "enabled", Expected::Variant(_) => "variant" },
            "toggle": case.toggle,
            "context": case.context,
        })).collect::<Vec<_>>(),
    })).collect::<Vec<_>>()});

    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    let mut command = match sdk {
        Sdk::Python => {
            let mut command = tokio::process::Command::new(&installed);
            command
                .arg(scripts.join("python_client_spec.py"))
                .env("PYTHONUNBUFFERED", "1")
                .env("PYTHONDONTWRITEBYTECODE", "1");
            command
        }
        Sdk::Node => {
            let mut command = tokio::process::Command::new("node");
            command
                .arg(scripts.join("node_client_spec.js"))
                .env("NODE_PATH", PathBuf::from(&installed).join("node_modules"));
            command
        }
        Sdk::Rust => unreachable!("the Rust SDK runs in-process"),
    };
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("could not start the {label} SDK script: {e}"));
    let mut stdin = child.stdin.take().expect("the script's stdin");
    stdin
        .write_all(&serde_json::to_vec(&input).expect("the input as JSON"))
        .await
        .expect("writing the script's input");
    drop(stdin);
    // On timeout the child is dropped, and so killed (kill_on_drop).
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
    let reported = report["files"].as_array().expect("a files list");
    assert_eq!(reported.len(), files.len(), "{label}: a report per file");
    files
        .iter()
        .zip(reported)
        .map(|(file, got)| {
            assert_eq!(got["id"], file.id.as_str(), "{label}: files in order");
            if let Some(error) = got["error"].as_str() {
                return vec![Answer::Error(format!("{label}: {error}")); file.cases.len()];
            }
            let results = got["results"].as_array().expect("a results list");
            assert_eq!(
                results.len(),
                file.cases.len(),
                "{label} {}: a result per case",
                file.id
            );
            results.iter().map(script_answer).collect()
        })
        .collect()
}

fn script_answer(result: &Value) -> Answer {
    if let Some(enabled) = result.get("enabled") {
        match enabled.as_bool() {
            Some(b) => Answer::Enabled(b),
            None => Answer::Error(format!("isEnabled returned {enabled}")),
        }
    } else if let Some(variant) = result.get("variant") {
        Answer::Variant(variant.clone())
    } else {
        Answer::Error(result["error"].as_str().unwrap_or("no answer").to_string())
    }
}
