//! Export → import into an empty store → export gives the same document, on either backend
//! and from the embedded store to Redis (the documented move from one node to many): equal
//! apart from the timestamps of records the empty store already had (`default`, the built-in
//! context fields); the toggles, whose `createdAt` the import honours, are equal outright.

use std::time::Duration;

use serde_json::Value;

use super::{export, import, populate, spawn_isolated, upload, without_timestamps, yaml, Upload};
use crate::common::{eventually, Backend, TestApp};
use crate::conformance;

conformance!(an_export_imported_into_an_empty_store_exports_the_same);

/// Asserts that `copy` is the same document as `original`, timestamps aside for all but the
/// toggles.
fn assert_same_document(original: &Value, copy: &Value, what: &str) {
    assert_eq!(copy["features"], original["features"], "{what}: toggles");
    assert_eq!(
        without_timestamps(copy),
        without_timestamps(original),
        "{what}: the documents differ"
    );
}

async fn an_export_imported_into_an_empty_store_exports_the_same(backend: &Backend) {
    let source = spawn_isolated(backend, "source").await;
    populate(&source).await;
    let original = export(&source, "").await;
    let original_yaml = super::export_reply(&source, "?format=yaml").await.bytes;

    // As a JSON body.
    let target = spawn_isolated(backend, "target-json").await;
    import(&target, "", &original).await.expect(202);
    assert_same_document(&original, &export(&target, "").await, "JSON body");
    // Importing its own export again changes nothing.
    let again = import(&target, "", &export(&target, "").await)
        .await
        .expect(202)
        .json;
    assert_eq!(again["changed"], false, "{again}");

    // As the YAML file a download gives.
    let target = spawn_isolated(backend, "target-yaml").await;
    upload(&target, "", Upload::File(Some("export.yml"), original_yaml))
        .await
        .expect(202);
    assert_same_document(&original, &export(&target, "").await, "YAML file");
    // The YAML of the copy is the YAML of the original, timestamps aside.
    let copy_yaml: Value =
        yaml_serde::from_slice(&super::export_reply(&target, "?format=yaml").await.bytes)
            .expect("YAML");
    assert_same_document(&original, &copy_yaml, "YAML export");
}

/// The move from one node to many: an export of the embedded store imported into Redis is
/// served by every replica on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_store_moves_to_redis() {
    let embedded = Backend::embedded();
    let single = TestApp::spawn(&embedded).await;
    populate(&single).await;
    let original = export(&single, "?download=1").await;

    let redis = Backend::redis();
    let first = TestApp::spawn(&redis).await;
    let second = TestApp::spawn(&redis).await;
    upload(
        &first,
        "",
        Upload::File(Some("export.yml"), yaml(&original)),
    )
    .await
    .expect(202);
    assert_same_document(
        &original,
        &export(&first, "").await,
        "replica that imported",
    );
    let arrived = eventually(Duration::from_secs(5), || async {
        export(&second, "").await["features"] == original["features"]
    })
    .await;
    assert!(arrived, "the other replica did not see the import");
    assert_same_document(&original, &export(&second, "").await, "other replica");
    // Archived toggles travel as names (so they stay taken), without their configuration.
    let archive = second
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    assert_eq!(archive["features"][0]["name"], "old");
}
