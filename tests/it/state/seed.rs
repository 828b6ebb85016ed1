//! The start-up seed (`--import-file`, `--import-mode`): keep semantics by default, applied
//! once per store and document (restarts add nothing; several replicas starting at once
//! against one Redis apply it once), `overwrite` and `drop` when asked; a document that cannot
//! be read or is refused stops the replica.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use flagpole::config::{ImportMode, Settings};

use super::{
    counts, events_after, isolated_settings, json_bytes, last_event_id, toggle, type_counts, yaml,
};
use crate::common::{feature_names, Backend, TestApp};
use crate::conformance;

conformance!(
    the_seed_keeps_what_exists_and_is_applied_once,
    the_seed_overwrites_or_drops_when_asked,
);

/// The seed document: `existing` (which the store already has, differently) and `seeded`
/// in project `ops`.
fn seed_document() -> Value {
    json!({
        "version": 1,
        "projects": [{"id": "ops", "name": "Operations"}],
        "features": [
            {"name": "existing", "description": "from the seed", "enabled": true,
             "strategies": [{"name": "default"}]},
            {"name": "seeded", "project": "ops", "enabled": true,
             "strategies": [{"name": "default"}]},
        ],
    })
}

/// Writes `bytes` to `name` in `dir` and returns its path.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write the seed file");
    path
}

/// `settings` seeding from `file` in `mode`.
fn seeding(mut settings: Settings, file: &Path, mode: ImportMode) -> Settings {
    settings.import.import_file = Some(file.to_path_buf());
    settings.import.import_mode = mode;
    settings
}

/// Starts a replica on `settings`, creates `existing` (disabled) and `other`, and stops it;
/// returns the newest event id.
async fn prepare_store(settings: &Settings) -> u64 {
    let app = TestApp::spawn_with(settings.clone()).await;
    app.create_toggle("existing").await;
    app.create_toggle("other").await;
    let last = last_event_id(&app).await;
    app.stop().await;
    last
}

async fn the_seed_keeps_what_exists_and_is_applied_once(backend: &Backend) {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = isolated_settings(backend, "keep");
    let before = prepare_store(&plain).await;
    let file = write_file(dir.path(), "seed.json", &json_bytes(&seed_document()));
    // Keep is the default mode.
    assert_eq!(Settings::defaults().import.import_mode, ImportMode::Keep);
    let mut settings = plain.clone();
    settings.import.import_file = Some(file.clone());

    let app = TestApp::spawn_with(settings.clone()).await;
    let existing = app
        .get("/api/admin/features/existing")
        .await
        .expect(200)
        .json;
    assert_eq!(existing["enabled"], false, "keep never overrides");
    assert_eq!(existing["description"], "");
    let seeded = app.get("/api/admin/features/seeded").await.expect(200).json;
    assert_eq!(
        (&seeded["enabled"], &seeded["project"]),
        (&json!(true), &json!("ops"))
    );
    app.get("/api/admin/features/other").await.expect(200);
    let events = events_after(&app, before).await;
    assert_eq!(
        type_counts(&events),
        counts(&[
            ("feature-import", 1),
            ("project-import", 1),
            ("state-imported", 1)
        ])
    );
    assert!(
        events.iter().all(|e| e["createdBy"] == "import"),
        "{events:?}"
    );
    app.stop().await;

    // Restarts with the same file add nothing: a seeded project an admin deleted stays
    // deleted (keep semantics alone would create it again).
    let app = TestApp::spawn_with(settings.clone()).await;
    app.delete("/api/admin/features/seeded").await.expect(200);
    app.delete("/api/admin/projects/ops").await.expect(200);
    let deleted = last_event_id(&app).await;
    app.stop().await;
    let app = TestApp::spawn_with(settings.clone()).await;
    assert_eq!(
        last_event_id(&app).await,
        deleted,
        "a restart re-applied the seed"
    );
    app.get("/api/admin/projects/ops").await.expect(404);
    app.stop().await;

    // A changed file is applied, again creating only what is missing.
    let document = json!({"features": [
        {"name": "existing", "enabled": true, "strategies": [{"name": "default"}]},
        toggle("later")]});
    std::fs::write(&file, json_bytes(&document)).expect("rewrite the seed file");
    let app = TestApp::spawn_with(settings).await;
    let events = events_after(&app, deleted).await;
    assert_eq!(
        type_counts(&events),
        counts(&[("feature-import", 1), ("state-imported", 1)])
    );
    assert_eq!(events[0]["data"]["name"], "later");
    let existing = app
        .get("/api/admin/features/existing")
        .await
        .expect(200)
        .json;
    assert_eq!(existing["enabled"], false);
}

async fn the_seed_overwrites_or_drops_when_asked(backend: &Backend) {
    let dir = tempfile::tempdir().expect("temp dir");
    // YAML this time, by the file's extension.
    let file = write_file(dir.path(), "seed.yaml", &yaml(&seed_document()));
    for (mode, name) in [
        (ImportMode::Overwrite, "overwrite"),
        (ImportMode::Drop, "drop"),
    ] {
        let plain = isolated_settings(backend, name);
        let before = prepare_store(&plain).await;
        let settings = seeding(plain, &file, mode);
        let app = TestApp::spawn_with(settings.clone()).await;
        let existing = app
            .get("/api/admin/features/existing")
            .await
            .expect(200)
            .json;
        assert_eq!(existing["enabled"], true, "{name}");
        assert_eq!(existing["description"], "from the seed", "{name}");
        app.get("/api/admin/features/seeded").await.expect(200);
        let listed = feature_names(app.get("/api/admin/features").await.expect(200).json);
        let mut expected = vec![
            ("feature-import", 2),
            ("project-import", 1),
            ("state-imported", 1),
        ];
        if mode == ImportMode::Drop {
            assert_eq!(listed, ["existing", "seeded"], "{name}");
            app.post_empty("/api/admin/archive/revive/other")
                .await
                .expect(200);
            expected.push(("feature-archived", 1));
            expected.push(("feature-revived", 1));
        } else {
            assert_eq!(listed, ["existing", "other", "seeded"], "{name}");
        }
        let events = events_after(&app, before).await;
        assert_eq!(type_counts(&events), counts(&expected), "{name}");
        let last = last_event_id(&app).await;
        app.stop().await;
        // Applied once: a restart does not archive `other` again.
        let app = TestApp::spawn_with(settings).await;
        assert_eq!(last_event_id(&app).await, last, "{name}: restart");
        app.get("/api/admin/features/other").await.expect(200);
    }
}

/// Three replicas starting at once against one Redis with the same file: one applies it, the
/// others see it applied, and each serves it as soon as it is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_apply_the_seed_once() {
    let backend = Backend::redis();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_file(dir.path(), "seed.json", &json_bytes(&seed_document()));
    let settings = seeding(backend.settings(), &file, ImportMode::Keep);
    let (a, b, c) = tokio::join!(
        TestApp::spawn_with(settings.clone()),
        TestApp::spawn_with(settings.clone()),
        TestApp::spawn_with(settings.clone()),
    );
    for app in [&a, &b, &c] {
        app.get("/api/admin/features/seeded").await.expect(200);
        app.get("/api/admin/projects/ops").await.expect(200);
    }
    let events = events_after(&a, 0).await;
    let counted = type_counts(&events);
    assert_eq!(counted.get("state-imported"), Some(&1), "{counted:?}");
    assert_eq!(counted.get("feature-import"), Some(&2), "{counted:?}");
    assert_eq!(counted.get("project-import"), Some(&1), "{counted:?}");
    // The built-ins were seeded once too.
    assert_eq!(
        counted.get("project-created"),
        Some(&1),
        "the default project was created more than once: {counted:?}"
    );
    let last = last_event_id(&a).await;
    drop((b, c));
    a.stop().await;
    let again = TestApp::spawn_with(settings).await;
    assert_eq!(last_event_id(&again).await, last);
}

/// Runs the binary until it exits (at most 20 s) and returns what it printed.
fn run_to_exit(command: &mut Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flagpole");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("flagpole kept running with an invalid seed file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// The real binary exits non-zero, saying why on stderr, when its seed file cannot be read,
/// parsed or applied.
#[test]
fn an_invalid_seed_file_stops_the_binary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let refused = json!({"features": [{"name": "homeless", "project": "nowhere",
        "strategies": [{"name": "default"}]}]});
    let cases = [
        ("missing.json", None, "missing.json"),
        (
            "broken.yml",
            Some(b"features: [\n".to_vec()),
            "not valid YAML",
        ),
        (
            "refused.json",
            Some(json_bytes(&refused)),
            "features[0].project",
        ),
    ];
    for (name, content, expected) in cases {
        let path = dir.path().join(name);
        if let Some(bytes) = &content {
            std::fs::write(&path, bytes).expect("write the seed file");
        }
        let output = run_to_exit(
            Command::new(env!("CARGO_BIN_EXE_flagpole"))
                .args(["--listen", "127.0.0.1:0", "--data-dir"])
                .arg(dir.path().join(format!("data-{name}")))
                .env("FLAGPOLE_IMPORT_FILE", &path)
                .env("FLAGPOLE_REDIS_URL", ""),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            !output.status.success(),
            "{name}: exit status {}",
            output.status
        );
        assert!(
            stderr.contains(expected),
            "{name}: stderr does not say {expected:?}\nstderr: {stderr}\nstdout: {stdout}"
        );
    }
}
