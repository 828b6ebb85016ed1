//! The client specification through Flagpole's server-side evaluation: every case of every
//! file asked of the frontend API (`POST /api/frontend`), of OFREP's single-flag evaluation
//! and of OFREP's bulk evaluation, each file imported into a replica of its own (as for the
//! SDKs, `FlagpoleServer`). A case passes as it does for an SDK (`verdict`), the answer read
//! from the interface:
//!
//! - frontend: the toggle is on when it is listed; its variant is the listed one, or the
//!   `disabled` variant when it is not listed;
//! - OFREP: on is `metadata.enabled`; the variant is `variant` (enabled unless `disabled`),
//!   its payload `metadata.payloadType`/`payloadValue`; an unknown flag (404
//!   `FLAG_NOT_FOUND`) is off with the `disabled` variant.
//!
//! Requests come from 127.0.0.2: both interfaces take the caller's address as `remoteAddress`
//! when the context has none (as Unleash's frontend API and Edge do), and the case "should not
//! be enabled for missing remoteAddress" of file 06 lists 127.0.0.1, the address a test
//! client would otherwise have. `tests/it/frontend.rs` checks the filling itself.

use serde_json::{json, Value};

use super::server::{FlagpoleServer, SpecServer};
use super::spec::{self, Expected, SpecFile};
use super::{verdict, Answer};

/// Cases an interface answers otherwise than the specification, as `(interface, file id,
/// case description)`, each group under the reason. Measured on 2026-11-28: none.
const EVALUATION_DEVIATIONS: &[(&str, &str, &str)] = &[];

/// The interfaces asked.
const INTERFACES: [&str; 3] = ["frontend", "ofrep", "ofrep-bulk"];

/// What the toggle's answer is, from a frontend answer's list.
fn from_frontend(case_toggle: &str, expected: &Expected, answer: &Value) -> Answer {
    let Some(toggles) = answer["toggles"].as_array() else {
        return Answer::Error(format!("no toggles in {answer}"));
    };
    let found = toggles.iter().find(|t| t["name"] == case_toggle);
    match expected {
        Expected::Enabled(_) => Answer::Enabled(found.is_some()),
        Expected::Variant(_) => Answer::Variant(match found {
            Some(toggle) => toggle["variant"].clone(),
            None => json!({"name": "disabled", "enabled": false, "feature_enabled": false}),
        }),
    }
}

/// What the toggle's answer is, from one OFREP evaluation (`None`: the flag was not found).
fn from_ofrep(expected: &Expected, evaluation: Option<&Value>) -> Answer {
    let Some(evaluation) = evaluation else {
        return match expected {
            Expected::Enabled(_) => Answer::Enabled(false),
            Expected::Variant(_) => Answer::Variant(
                json!({"name": "disabled", "enabled": false, "feature_enabled": false}),
            ),
        };
    };
    let Some(enabled) = evaluation["metadata"]["enabled"].as_bool() else {
        return Answer::Error(format!("no metadata.enabled in {evaluation}"));
    };
    let Some(variant) = evaluation["variant"].as_str() else {
        return Answer::Error(format!("no variant in {evaluation}"));
    };
    match expected {
        Expected::Enabled(_) => Answer::Enabled(enabled),
        Expected::Variant(_) => {
            let mut answer = json!({
                "name": variant,
                "enabled": variant != "disabled",
                "feature_enabled": enabled,
            });
            let metadata = &evaluation["metadata"];
            if let (Some(kind), Some(value)) = (
                metadata["payloadType"].as_str(),
                metadata["payloadValue"].as_str(),
            ) {
                answer["payload"] = json!({"type": kind, "value": value});
            }
            Answer::Variant(answer)
        }
    }
}

/// Asks `interface` of the replica at `base` (`http://host:port`) for one case.
async fn ask(
    http: &reqwest::Client,
    base: &str,
    interface: &str,
    file: &SpecFile,
    index: usize,
) -> Answer {
    let case = &file.cases[index];
    let body = json!({"context": case.context});
    let path = match interface {
        "frontend" => format!("{base}/api/frontend"),
        "ofrep" => format!("{base}/ofrep/v1/evaluate/flags/{}", case.toggle),
        _ => format!("{base}/ofrep/v1/evaluate/flags"),
    };
    let reply = match http.post(&path).json(&body).send().await {
        Ok(reply) => reply,
        Err(e) => return Answer::Error(format!("{path}: {e}")),
    };
    let status = reply.status().as_u16();
    let json: Value = reply.json().await.unwrap_or(Value::Null);
    match (interface, status) {
        ("frontend", 200) => from_frontend(&case.toggle, &case.expected, &json),
        ("ofrep", 200) => from_ofrep(&case.expected, Some(&json)),
        ("ofrep", 404) if json["errorCode"] == "FLAG_NOT_FOUND" => from_ofrep(&case.expected, None),
        ("ofrep-bulk", 200) => {
            let flags = json["flags"].as_array().cloned().unwrap_or_default();
            from_ofrep(
                &case.expected,
                flags.iter().find(|f| f["key"] == case.toggle),
            )
        }
        _ => Answer::Error(format!("{path} answered {status}: {json}")),
    }
}

/// Every case through the three interfaces; the failures must be the listed deviations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_spec_through_the_frontend_api_and_ofrep() {
    let Some(dir) = spec::installed_spec_dir() else {
        return;
    };
    let files = spec::load_all(&dir);
    let documents: Vec<(String, Value)> = files
        .iter()
        .map(|f| (f.id.clone(), f.document.clone()))
        .collect();
    let mut server = FlagpoleServer::default();
    let served = server.serve_all(&documents).await;
    let http = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("an HTTP client on 127.0.0.2");
    let mut failures = Vec::new();
    let mut total = 0;
    for (file, served) in files.iter().zip(&served) {
        let base = served.api_url.trim_end_matches("/api");
        for (index, case) in file.cases.iter().enumerate() {
            for interface in INTERFACES {
                total += 1;
                let answer = ask(&http, base, interface, file, index).await;
                if let Err(detail) = verdict(case, &answer) {
                    failures.push((interface, file.id.clone(), case.description.clone(), detail));
                }
            }
        }
    }
    eprintln!(
        "client spec through server-side evaluation: {} of {total} answers pass",
        total - failures.len()
    );
    let unexpected: Vec<String> = failures
        .iter()
        .filter(|(i, f, d, _)| {
            !EVALUATION_DEVIATIONS
                .iter()
                .any(|(di, df, dd)| di == i && df == f && dd == d)
        })
        .map(|(i, f, d, detail)| format!("  ({i:?}, {f:?}, {d:?}), // {detail}"))
        .collect();
    let passing: Vec<String> = EVALUATION_DEVIATIONS
        .iter()
        .filter(|(di, df, dd)| {
            !failures
                .iter()
                .any(|(i, f, d, _)| di == i && df == f && dd == d)
        })
        .map(|d| format!("  {d:?}"))
        .collect();
    assert!(
        unexpected.is_empty() && passing.is_empty(),
        "failing but not listed ({}):\n{}\nlisted but passing ({}):\n{}",
        unexpected.len(),
        unexpected.join("\n"),
        passing.len(),
        passing.join("\n")
    );
    assert_eq!(
        total,
        279 * INTERFACES.len(),
        "every case through every interface"
    );
}
