//! The Rust SDK (`unleash-api-client`) against a real Flagpole: it registers, fetches,
//! evaluates and sends metrics, and the views show exactly what it evaluated.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use unleash_api_client::client::{ClientBuilder, FeatureKey};
use unleash_api_client::context::Context;

use crate::common::{eventually, Backend, TestApp};
use crate::conformance;

conformance!(the_rust_sdk_registers_evaluates_and_reports);

#[derive(Debug, Clone, Copy)]
enum Flags {
    On,
    Off,
    Colours,
}

impl FeatureKey for Flags {
    fn name(self) -> &'static str {
        match self {
            Flags::On => "rust.on",
            Flags::Off => "rust.off",
            Flags::Colours => "rust.colours",
        }
    }
}

async fn the_rust_sdk_registers_evaluates_and_reports(backend: &Backend) {
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 100;
    let app = TestApp::spawn_with(settings).await;
    for (name, enabled) in [("rust.on", true), ("rust.off", false)] {
        app.post(
            "/api/admin/features",
            json!({"name": name, "enabled": enabled, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200);
    }
    app.post(
        "/api/admin/features",
        json!({"name": "rust.colours", "enabled": true, "strategies": [{"name": "default"}],
               "variants": [{"name": "blue", "weight": 500}, {"name": "green", "weight": 500}]}),
    )
    .await
    .expect(200);

    app.settle().await;
    let client = ClientBuilder::default()
        .interval(200)
        .into_client::<Flags>(&format!("{}/api", app.base), "rust-app", "rust-1", None)
        .expect("client");
    client.register().await.expect("registered");
    let client = Arc::new(client);
    let poller = tokio::spawn({
        let client = client.clone();
        async move { client.poll_for_updates().await }
    });
    let fetched = eventually(Duration::from_secs(10), || {
        let loaded = client.cached_state().is_some();
        async move { loaded }
    })
    .await;
    assert!(fetched, "the SDK never fetched the toggles");

    let context = Context::default();
    for _ in 0..7 {
        assert!(client.is_enabled(Flags::On, Some(&context), false));
    }
    for _ in 0..5 {
        assert!(!client.is_enabled(Flags::Off, Some(&context), true));
    }
    for _ in 0..9 {
        let variant = client.get_variant(Flags::Colours, &context);
        assert!(
            ["blue", "green"].contains(&variant.name.as_str()),
            "{variant:?}"
        );
    }

    // The SDK sends the previous cycle's metrics with its next poll.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let view = loop {
        let view = app.get("/api/admin/metrics/feature-toggles").await.json;
        if view["lastHour"]["rust.colours"]["yes"]
            .as_u64()
            .unwrap_or(0)
            >= 9
        {
            break view;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the SDK's metrics never showed: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(view["lastHour"]["rust.on"], json!({"yes": 7, "no": 0}));
    assert_eq!(view["lastHour"]["rust.off"], json!({"yes": 0, "no": 5}));
    assert_eq!(view["lastHour"]["rust.colours"], json!({"yes": 9, "no": 0}));
    let detail = app
        .get("/api/admin/metrics/feature-toggles/rust.colours")
        .await
        .expect(200)
        .json;
    let variants: u64 = detail["lastHour"]["variants"]
        .as_object()
        .expect("variants")
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(variants, 9, "the variant breakdown: {detail}");

    let details = app
        .get("/api/admin/metrics/applications/rust-app")
        .await
        .expect(200)
        .json;
    let instance = &details["instances"][0];
    assert_eq!(instance["instanceId"], "rust-1");
    assert!(
        instance["sdkVersion"]
            .as_str()
            .is_some_and(|v| v.contains("rust")),
        "{instance}"
    );
    assert_eq!(instance["configuration"]["current"], true, "{instance}");
    let seen = app
        .get("/api/admin/metrics/seen-toggles")
        .await
        .expect(200)
        .json;
    assert_eq!(seen[0]["appName"], "rust-app");
    assert_eq!(
        seen[0]["seenToggles"],
        json!(["rust.colours", "rust.off", "rust.on"])
    );

    client.stop_poll().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), poller).await;
}
