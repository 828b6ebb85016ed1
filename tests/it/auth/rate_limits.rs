//! Rate limits: per caller and per group, 429 with `Retry-After`, one bucket shared by the
//! replicas of one Redis, and per-replica buckets while Redis is down (fail open).

use std::time::Duration;

use reqwest::Method;

use crate::common::{send, Backend, TestApp};

/// Fires `n` client feature requests, spread over `replicas`; how many got through.
async fn fire(replicas: &[&TestApp], n: usize) -> usize {
    let mut allowed = 0;
    for i in 0..n {
        let reply =
            send(replicas[i % replicas.len()].anonymous(Method::GET, "/api/client/features")).await;
        match reply.status.as_u16() {
            200 => allowed += 1,
            429 => {
                assert!(reply.header("retry-after").is_some());
                reply.error_message();
            }
            other => panic!("unexpected {other}"),
        }
    }
    allowed
}

fn limited(backend: &Backend, per_second: f64) -> flagpole::config::Settings {
    let mut settings = backend.settings();
    settings.rate_limit_client = per_second;
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_bucket_per_caller() {
    let backend = Backend::redis();
    let a = TestApp::spawn_with(limited(&backend, 5.0)).await;
    let b = TestApp::spawn_with(limited(&backend, 5.0)).await;
    // Both replicas have met the caller and reported once.
    fire(&[&a, &b], 2).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    // A burst of 10 in all, not 10 per replica.
    let allowed = fire(&[&a, &b], 40).await;
    assert!((8..=14).contains(&allowed), "allowed {allowed} of 40");
    // Other groups and the admin API are not limited.
    a.get("/api/admin/features").await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_each_replica_limits_alone() {
    let backend = Backend::redis();
    let app = TestApp::spawn_with(limited(&backend, 5.0)).await;
    fire(&[&app], 1).await;
    backend.redis_server().stop();
    // The next report fails; from then on the replica's own bucket refills.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let first = fire(&[&app], 30).await;
    assert!((8..=14).contains(&first), "allowed {first} of 30");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let later = fire(&[&app], 30).await;
    assert!((3..=8).contains(&later), "refilled at 5/s locally: {later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_callers_are_limited_apart() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.rate_limit_admin = 1.0;
    let app = TestApp::spawn_with(settings).await;
    app.get("/api/admin/features").await.expect(200);
    app.get("/api/admin/features").await.expect(200);
    let refused = app.get("/api/admin/features").await.expect(429);
    assert!(refused.error_message().contains("Too many requests"));
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    // The client path has its own (no) limit; another caller (a token) its own bucket.
    send(app.anonymous(Method::GET, "/api/client/features"))
        .await
        .expect(200);
    send(
        app.anonymous(Method::GET, "/api/admin/features")
            .basic_auth("other", Some("")),
    )
    .await
    .expect(200);
}
