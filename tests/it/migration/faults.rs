//! What `flagpole import-unleash` does when reading goes wrong, and on a store that already
//! holds records: a loopback proxy in front of the real Unleash answers 500 on one route, cuts
//! the connection midway on another, or changes Unleash (a toggle made through its API) while
//! the command reads; each time the command names the cause, exits 1 and the store's export
//! stays as it was, and a rerun once the cause is gone moves what changed. Flagpole's own
//! segment and addon under Unleash's ids stay, Unleash's are renumbered (and said so); an
//! addon whose secrets the operator re-entered is not reset by a rerun. The progress line:
//! counts per kind under a pseudo-terminal (`script`), nothing without one.

use std::process::{Command, Output};

use serde_json::{json, Value};

use super::proxy::{Fault, Proxy};
use super::{settle, store_flags, text, ADMIN_TOKEN};
use crate::common::{Backend, TestApp};

/// `flagpole import-unleash` of `url` into `backend`'s store, with `extra` flags.
pub(super) fn run(url: &str, backend: &Backend, extra: &[&str]) -> Output {
    let mut args = vec![
        "--url".to_string(),
        url.to_string(),
        "--token".into(),
        ADMIN_TOKEN.into(),
    ];
    args.extend(store_flags(backend));
    args.extend(extra.iter().map(|a| a.to_string()));
    super::import_unleash(&args)
}

/// The store's state export (addon secrets included), less what says when it was made.
pub(super) async fn export(backend: &Backend) -> Value {
    let app = TestApp::spawn(backend).await;
    let mut document = app
        .get("/api/admin/state/export?addonSecrets=true")
        .await
        .expect(200)
        .json;
    app.stop().await;
    if let Some(top) = document.as_object_mut() {
        top.retain(|_, v| v.is_array());
    }
    document
}

/// Asserts the run failed naming `cause` and committed nothing (`before` is the export).
pub(super) async fn assert_nothing_committed(
    out: &Output,
    cause: &str,
    backend: &Backend,
    before: &Value,
) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(cause), "{cause}: {stderr}");
    assert!(stderr.contains("Nothing was committed"), "{stderr}");
    assert!(
        export(backend).await == *before,
        "the store changed after: {stderr}"
    );
}

pub(super) fn named<'a>(document: &'a Value, section: &str, key: &str, value: &str) -> &'a Value {
    document[section]
        .as_array()
        .and_then(|items| items.iter().find(|i| i[key] == value))
        .unwrap_or_else(|| panic!("{section} {key}={value} in {document}"))
}

/// The whole sequence against the 7.x Unleash at `unleash` (filled by fill.js: segment 1,
/// addon 1, both Unleash's only).
pub(super) async fn faults_commit_nothing_and_records_stay_apart(unleash: &str) {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    let segment = app
        .post(
            "/api/admin/segments",
            json!({"name": "flagpole-own", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["x"]}]}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(segment["id"], 1, "{segment}");
    let addon = app
        .post(
            "/api/admin/addons",
            json!({"provider": "webhook", "description": "ours", "enabled": true,
                   "parameters": {"url": "https://ours.example/hook"},
                   "events": ["feature-created"]}),
        )
        .await
        .json;
    assert_eq!(addon["id"], 1, "{addon}");
    app.stop().await;

    let (proxy, through_proxy) = Proxy::start(unleash).await;
    let moved = run(&through_proxy, &backend, &[]);
    let report = format!("{}\n{}", text(&moved.stdout), text(&moved.stderr));
    assert!(moved.status.success(), "{report}");
    assert!(report.contains("Verified"), "{report}");
    assert!(
        report.contains("segment \"beta-users\": Unleash's id 1 is Flagpole's 2"),
        "{report}"
    );
    assert!(
        report.contains("addon 1 (webhook): Flagpole's addon 2"),
        "{report}"
    );
    let first = export(&backend).await;
    let own = first["segments"].as_array().expect("segments");
    assert!(
        own.iter()
            .any(|s| s["id"] == 1 && s["name"] == "flagpole-own"),
        "{first}"
    );
    assert!(
        own.iter()
            .any(|s| s["id"] == 2 && s["name"] == "beta-users"),
        "{first}"
    );
    let addons = first["addons"].as_array().expect("addons");
    assert!(
        addons.iter().any(|a| a["id"] == 1
            && a["parameters"]["url"] == "https://ours.example/hook"
            && a["enabled"] == true),
        "{first}"
    );
    assert!(
        addons.iter().any(|a| a["id"] == 2 && a["enabled"] == false),
        "{first}"
    );
    // Strategies refer to the renumbered segment.
    let checkout = first["featureEnvironments"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["featureName"] == "checkout" && c["environment"] == "production")
        })
        .expect("checkout's configuration");
    assert_eq!(
        checkout["strategies"][0]["segments"],
        json!([2]),
        "{checkout}"
    );

    // Unleash moves on; the store keeps `first` through every failed run.
    let http = reqwest::Client::new();
    let made = http
        .post(format!("{unleash}/api/admin/projects/default/features"))
        .header("Authorization", ADMIN_TOKEN)
        .json(&json!({"name": "late-arrival"}))
        .send()
        .await
        .expect("Unleash answers");
    assert!(made.status().is_success());
    settle(&http, unleash).await;

    proxy.set(Fault::Fail("/api/admin/segments"));
    let failed = run(&through_proxy, &backend, &[]);
    let cause = "reading /api/admin/segments from Unleash failed: 500";
    assert_nothing_committed(&failed, cause, &backend, &first).await;

    proxy.set(Fault::Cut("/api/admin/features-batch/export"));
    let cut = run(&through_proxy, &backend, &[]);
    let cause = "reading /api/admin/features-batch/export from Unleash failed";
    assert_nothing_committed(&cut, cause, &backend, &first).await;

    proxy.set(Fault::ChangeUnleash("/api/admin/api-tokens"));
    let changed = run(&through_proxy, &backend, &[]);
    assert_nothing_committed(
        &changed,
        "Unleash changed while it was read",
        &backend,
        &first,
    )
    .await;
    settle(&http, unleash).await;

    // The operator re-enters the webhook's secrets and enables it.
    let app = TestApp::spawn(&backend).await;
    let mut webhook = app.get("/api/admin/addons/2").await.expect(200).json;
    webhook["parameters"]["url"] = json!("https://hooks.example.com/re-entered");
    webhook["parameters"]["customHeaders"] = json!("{\"Authorization\":\"Bearer again\"}");
    webhook["enabled"] = json!(true);
    app.put("/api/admin/addons/2", webhook).await.expect(200);
    app.stop().await;

    // The cause gone: the rerun moves what changed, and keeps what was re-entered.
    let again = run(unleash, &backend, &[]);
    let report = format!("{}\n{}", text(&again.stdout), text(&again.stderr));
    assert!(again.status.success(), "{report}");
    assert!(report.contains("Committed in one import"), "{report}");
    assert!(report.contains("Verified"), "{report}");
    assert!(!report.contains("Re-enter"), "{report}");
    let second = export(&backend).await;
    for name in ["late-arrival", "made-during-the-read"] {
        named(&second, "features", "name", name);
    }
    let webhook = second["addons"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["id"] == 2))
        .expect("addon 2");
    assert_eq!(webhook["enabled"], true, "{webhook}");
    assert_eq!(
        webhook["parameters"]["url"], "https://hooks.example.com/re-entered",
        "{webhook}"
    );
    assert_eq!(
        second["addons"].as_array().map(Vec::len),
        Some(2),
        "{second}"
    );
    let once_more = run(unleash, &backend, &["--no-verify"]);
    assert!(once_more.status.success(), "{}", text(&once_more.stderr));
    assert!(
        text(&once_more.stdout).contains("No changes"),
        "{}",
        text(&once_more.stdout)
    );
}

/// The progress line: under a pseudo-terminal the counts per kind, without one nothing.
pub(super) fn progress_shows_counts_on_a_terminal(unleash: &str) {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("migration-pty.json");
    let flagpole = env!("CARGO_BIN_EXE_flagpole");
    let args = [
        "import-unleash",
        "--url",
        unleash,
        "--token",
        ADMIN_TOKEN,
        "--out",
        &out.display().to_string(),
    ]
    .map(|a| format!("'{a}'"))
    .join(" ");
    let Ok(terminal) = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("'{flagpole}' {args}"),
            "/dev/null",
        ])
        .env("FLAGPOLE_REDIS_URL", "")
        .output()
    else {
        eprintln!("skipping the progress line's check: `script` (util-linux) not found");
        return;
    };
    let shown = text(&terminal.stdout);
    assert!(terminal.status.success(), "{shown}");
    assert!(shown.contains("read from Unleash:"), "{shown}");
    for count in [
        "environments 3",
        "segments 1",
        "API tokens 6",
        "addons 1",
        "toggle environments",
    ] {
        assert!(shown.contains(count), "{count}: {shown}");
    }
    let piped = Command::new(flagpole)
        .args([
            "import-unleash",
            "--url",
            unleash,
            "--token",
            ADMIN_TOKEN,
            "--out",
        ])
        .arg(&out)
        .env("FLAGPOLE_REDIS_URL", "")
        .output()
        .expect("flagpole runs");
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    let stderr = text(&piped.stderr);
    assert!(
        !stderr.contains("Unleash:"),
        "no line without a terminal: {stderr}"
    );
}
