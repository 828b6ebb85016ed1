//! Receivers that fail: retried until delivered (once), `Retry-After` honoured, dead letters
//! after the last attempt and redelivery, a receiver down for half a minute, one that hangs,
//! one too slow for the request timeout; jobs of a disabled addon; Slack retries; metrics.

use std::time::Duration;

use serde_json::json;

use super::{deliveries, quick, touch, wait_status, webhook};
use crate::common::receiver::{Answer, Receiver, ReservedPort};
use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    a_failure_then_success_is_delivered_once,
    retry_after_is_honoured,
    dead_letters_after_the_last_attempt_can_be_redelivered,
    a_receiver_down_for_30_seconds_gets_everything_once_up,
    a_hanging_receiver_does_not_stall_other_addons,
    each_request_has_the_delivery_timeout,
    jobs_of_a_disabled_addon_are_dropped,
    a_slack_retry_resends_only_the_channels_that_failed,
    delivery_metrics_are_exported
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

async fn a_failure_then_success_is_delivered_once(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    receiver.answer_next([Answer::Status(500), Answer::Status(503)]);
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("flaky").await;
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert_eq!(
        received.len(),
        3,
        "two failures, one success, nothing after"
    );
    assert!(received
        .iter()
        .all(|r| r.delivery() == received[0].delivery()));
    assert!(received.iter().all(|r| r.body == received[0].body));
    let record = wait_status(&app, id, &received[0].delivery(), "delivered").await;
    assert_eq!(record["attempts"], 3);
}

async fn retry_after_is_honoured(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    receiver.answer_next([Answer::RetryAfter(429, "2".into())]);
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("slow-down").await;
    assert!(receiver.wait_received(1, Duration::from_secs(15)).await);
    let delivery = receiver.received()[0].delivery();
    let waiting = wait_status(&app, id, &delivery, "retrying").await;
    assert_eq!(waiting["lastStatusCode"], 429);
    assert!(waiting["nextAttemptAt"].is_string());
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    // The backoff alone would retry after 25–50 ms.
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");
}

async fn dead_letters_after_the_last_attempt_can_be_redelivered(backend: &Backend) {
    let mut settings = quick(backend);
    settings.delivery.delivery_max_attempts = 3;
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Answer::Status(500));
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("doomed-1").await;
    app.create_toggle("doomed-2").await;
    assert!(receiver.wait_received(6, Duration::from_secs(15)).await);
    let first = receiver.received()[0].delivery();
    let dead = wait_status(&app, id, &first, "dead").await;
    assert_eq!(dead["attempts"], 3);
    assert!(
        dead["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("3 attempts") && e.contains("500")),
        "{dead}"
    );
    let letters = crate::common::eventually(Duration::from_secs(10), || async {
        app.get(&format!("/api/admin/addons/{id}/deliveries/dead"))
            .await
            .json["deadLetters"]
            .as_array()
            .is_some_and(|l| l.len() == 2)
    })
    .await;
    assert!(letters, "two dead letters");
    let listed = app
        .get(&format!("/api/admin/addons/{id}/deliveries/dead?limit=1"))
        .await
        .expect(200)
        .json;
    assert_eq!(listed["total"], 2);
    let letter = &listed["deadLetters"][0];
    let doomed: Vec<String> = receiver.received().iter().map(|r| r.delivery()).collect();
    let listed_id = letter["job"]["delivery"].as_str().expect("delivery");
    assert!(doomed.iter().any(|d| d == listed_id), "{letter}");
    assert!(letter["error"].as_str().is_some_and(|e| e.contains("500")));
    assert!(letter["deadAt"].is_string());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 6, "no attempt after the last");

    // A refusal a retry cannot fix (4xx) is dead at once.
    receiver.answer_next([Answer::Status(410)]);
    app.create_toggle("gone").await;
    assert!(receiver.wait_received(7, Duration::from_secs(15)).await);
    let gone = receiver.received()[6].delivery();
    let record = wait_status(&app, id, &gone, "dead").await;
    assert_eq!(record["attempts"], 1);
    assert_eq!(record["lastStatusCode"], 410);

    receiver.answer_always(Answer::Status(200));
    let path = format!("/api/admin/addons/{id}/deliveries/{first}/redeliver");
    let queued = app.post_empty(&path).await.expect(202).json;
    assert_eq!(queued["redelivered"], 1);
    wait_status(&app, id, &first, "delivered").await;
    assert_eq!(receiver.accepted().len(), 1);
    assert_eq!(
        receiver.accepted()[0].delivery(),
        first,
        "same idempotency key"
    );
    let all = app
        .post_empty(&format!(
            "/api/admin/addons/{id}/deliveries/redeliver-all-dead"
        ))
        .await
        .expect(202)
        .json;
    assert_eq!(all["redelivered"], 2);
    assert_eq!(all["remaining"], 0);
    assert!(receiver.wait_accepted(3, Duration::from_secs(15)).await);
    let letters = app
        .get(&format!("/api/admin/addons/{id}/deliveries/dead"))
        .await
        .expect(200)
        .json;
    assert_eq!(letters["deadLetters"], json!([]));

    // A delivered delivery may be sent again; unknown ones and addons are 404.
    app.post_empty(&path).await.expect(202);
    assert!(receiver.wait_accepted(4, Duration::from_secs(15)).await);
    app.post_empty(&format!(
        "/api/admin/addons/{id}/deliveries/999.9/redeliver"
    ))
    .await
    .expect(404);
    app.get("/api/admin/addons/999/deliveries")
        .await
        .expect(404);
    app.post_empty("/api/admin/addons/999/deliveries/redeliver-all-dead")
        .await
        .expect(404);

    // One still waiting for its answer cannot be queued twice.
    receiver.answer_always(Answer::Hang(Duration::from_millis(1500), 200));
    app.create_toggle("in-flight").await;
    assert!(receiver.wait_received(12, Duration::from_secs(15)).await);
    let pending = receiver.received()[11].delivery();
    let conflict = app
        .post_empty(&format!(
            "/api/admin/addons/{id}/deliveries/{pending}/redeliver"
        ))
        .await
        .expect(409);
    conflict.error_message();
    wait_status(&app, id, &pending, "delivered").await;
}

async fn a_receiver_down_for_30_seconds_gets_everything_once_up(backend: &Backend) {
    let mut settings = quick(backend);
    settings.delivery.delivery_max_attempts = 100;
    settings.delivery.delivery_backoff_max_ms = 2_000;
    let app = TestApp::spawn_with(settings).await;
    let reserved = ReservedPort::new();
    let id = webhook(
        &app,
        &format!("http://127.0.0.1:{}/later", reserved.port),
        &["feature-created", "feature-updated"],
        json!({}),
    )
    .await;
    app.create_toggle("patient").await;
    touch(&app, "patient", "again").await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let log = deliveries(&app, id).await;
    assert_eq!(log.len(), 2);
    for record in &log {
        assert_eq!(record["status"], "retrying", "{record}");
        assert!(
            record["attempts"].as_u64().is_some_and(|a| a > 3),
            "{record}"
        );
    }
    let receiver = reserved.start_receiver().await;
    assert!(receiver.wait_accepted(2, Duration::from_secs(15)).await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "each once");
    assert_ne!(received[0].delivery(), received[1].delivery());
}

async fn a_hanging_receiver_does_not_stall_other_addons(backend: &Backend) {
    let mut settings = quick(backend);
    settings.delivery.delivery_concurrency = 4;
    settings.delivery.delivery_concurrency_per_addon = 2;
    settings.delivery.delivery_timeout_ms = 20_000;
    settings.delivery.delivery_visibility_timeout_ms = 60_000;
    let app = TestApp::spawn_with(settings).await;
    let hanging = Receiver::start().await;
    hanging.answer_always(Answer::Hang(Duration::from_secs(60), 200));
    let fast = Receiver::start().await;
    webhook(&app, &hanging.url("/"), &["feature-created"], json!({})).await;
    webhook(&app, &fast.url("/"), &["feature-created"], json!({})).await;
    // More jobs for the hanging receiver than a replica holds at once (4 × 4).
    for i in 0..40 {
        app.create_toggle(&format!("busy-{i}")).await;
    }
    assert!(
        fast.wait_accepted(40, Duration::from_secs(30)).await,
        "the fast receiver got {} of 40",
        fast.accepted().len()
    );
    assert!(
        hanging.received().len() <= 2,
        "at most two attempts in flight to one addon, got {}",
        hanging.received().len()
    );
}

async fn each_request_has_the_delivery_timeout(backend: &Backend) {
    let mut settings = quick(backend);
    settings.delivery.delivery_timeout_ms = 500;
    settings.delivery.delivery_visibility_timeout_ms = 60_000;
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    receiver.answer_next([Answer::Hang(Duration::from_secs(20), 200)]);
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("slowpoke").await;
    // The first request is cut off after 0.5 s (not the 30 s attempt budget) and retried.
    assert!(receiver.wait_accepted(1, Duration::from_secs(5)).await);
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    let record = wait_status(&app, id, &received[0].delivery(), "delivered").await;
    assert_eq!(record["attempts"], 2);
}

async fn jobs_of_a_disabled_addon_are_dropped(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Answer::Status(503));
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("never").await;
    assert!(receiver.wait_received(1, Duration::from_secs(15)).await);
    let delivery = receiver.received()[0].delivery();
    let mut addon = app
        .get(&format!("/api/admin/addons/{id}"))
        .await
        .expect(200)
        .json;
    addon["enabled"] = json!(false);
    app.put(&format!("/api/admin/addons/{id}"), addon)
        .await
        .expect(200);
    let record = wait_status(&app, id, &delivery, "dropped").await;
    assert!(record["lastError"]
        .as_str()
        .is_some_and(|e| e.contains("disabled")));
    receiver.answer_always(Answer::Status(200));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(receiver.accepted().is_empty());
}

async fn a_slack_retry_resends_only_the_channels_that_failed(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    app.post(
        "/api/admin/addons",
        json!({"provider": "slack", "parameters": {"url": receiver.url("/slack"),
               "defaultChannel": "general"}, "events": ["feature-updated"]}),
    )
    .await
    .expect(201);
    app.create_toggle("split").await;
    for channel in ["alpha", "beta"] {
        app.post(
            "/api/admin/features/split/tags",
            json!({"type": "slack", "value": channel}),
        )
        .await
        .expect(201);
    }
    receiver.answer_next([Answer::Status(200), Answer::Status(500)]);
    touch(&app, "split", "now").await;
    assert!(receiver.wait_accepted(2, Duration::from_secs(15)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let channels: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["channel"].as_str().expect("channel").to_string())
        .collect();
    assert_eq!(
        channels,
        ["#alpha", "#beta", "#beta"],
        "alpha is not sent twice"
    );
}

async fn delivery_metrics_are_exported(backend: &Backend) {
    let mut settings = quick(backend);
    settings.delivery.delivery_max_attempts = 2;
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    receiver.answer_next([
        Answer::Status(500),
        Answer::Status(500),
        Answer::Status(500),
    ]);
    webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("counted-dead").await;
    assert!(receiver.wait_received(2, Duration::from_secs(15)).await);
    app.create_toggle("counted-ok").await;
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    let metric = |text: &str, name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    let scraped = crate::common::eventually(Duration::from_secs(10), || async {
        let text = String::from_utf8(app.get("/internal-backstage/prometheus").await.bytes)
            .expect("utf-8");
        text.contains("outcome=\"dead\"") && text.contains("flagpole_addon_dead_letters 1")
    })
    .await;
    assert!(scraped, "dead letter counted and sampled");
    let text =
        String::from_utf8(app.get("/internal-backstage/prometheus").await.bytes).expect("utf-8");
    let labels = "{provider=\"webhook\",outcome=";
    assert_eq!(
        metric(
            &text,
            &format!("flagpole_addon_deliveries_total{labels}\"delivered\"}}")
        ),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            &format!("flagpole_addon_deliveries_total{labels}\"retried\"}}")
        ),
        2.0
    );
    assert_eq!(
        metric(
            &text,
            &format!("flagpole_addon_deliveries_total{labels}\"dead\"}}")
        ),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            "flagpole_addon_delivery_attempts_total{provider=\"webhook\"}"
        ),
        4.0
    );
    assert_eq!(
        metric(
            &text,
            "flagpole_addon_delivery_latency_seconds_count{provider=\"webhook\"}"
        ),
        1.0
    );
    assert_eq!(metric(&text, "flagpole_addon_delivery_backlog"), 0.0);
}
