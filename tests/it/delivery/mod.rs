//! Addon delivery end to end, with real receivers on loopback: bodies and headers per event
//! kind and provider, retries, `Retry-After`, dead letters and redelivery, receivers that are
//! down or hang, several replicas, replicas killed, Redis restarted.

mod bodies;
mod failures;
mod replicas;

use std::time::Duration;

use flagpole::config::Settings;
use serde_json::{json, Value};

use crate::common::{Backend, TestApp};

/// Settings with quick retries, so failure tests take seconds.
pub fn quick(backend: &Backend) -> Settings {
    let mut settings = backend.settings();
    settings.delivery.delivery_backoff_ms = 50;
    settings.delivery.delivery_backoff_max_ms = 400;
    settings.delivery.delivery_timeout_ms = 2_000;
    settings.delivery.delivery_visibility_timeout_ms = 5_000;
    settings
}

/// Creates a webhook addon posting to `url` on `events`; extra `parameters` merged in.
pub async fn webhook(app: &TestApp, url: &str, events: &[&str], parameters: Value) -> u64 {
    let mut all = json!({"url": url});
    if let (Some(all), Some(extra)) = (all.as_object_mut(), parameters.as_object()) {
        all.extend(extra.clone());
    }
    let created = app
        .post(
            "/api/admin/addons",
            json!({"provider": "webhook", "parameters": all, "events": events}),
        )
        .await
        .expect(201)
        .json;
    created["id"].as_u64().expect("id")
}

/// The deliveries log of addon `id`.
pub async fn deliveries(app: &TestApp, id: u64) -> Vec<Value> {
    app.get(&format!("/api/admin/addons/{id}/deliveries"))
        .await
        .expect(200)
        .json["deliveries"]
        .as_array()
        .expect("deliveries")
        .clone()
}

/// Waits until the log of addon `id` shows delivery `delivery` with `status`.
pub async fn wait_status(app: &TestApp, id: u64, delivery: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        if let Some(record) = deliveries(app, id)
            .await
            .into_iter()
            .find(|d| d["id"] == delivery)
        {
            if record["status"] == status {
                return record;
            }
            last = record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("delivery {delivery} never became {status}; last: {last}");
}

/// Updates toggle `name` with a new description.
pub async fn touch(app: &TestApp, name: &str, description: &str) {
    app.put(
        &format!("/api/admin/features/{name}"),
        json!({"name": name, "description": description, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
}
