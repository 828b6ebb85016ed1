//! Rate limits: per caller and per group, 429 with `Retry-After`, one bucket shared by the
//! replicas of one Redis, per-replica buckets while Redis is down (fail open), and no way
//! around them by making up credentials. Bounds allow for the refill during each burst, so a
//! slow machine cannot fail them.

use std::time::{Duration, Instant};

use reqwest::Method;

use crate::common::{send, Backend, TestApp};

/// Fires `n` client feature requests spread over `replicas`, each with `header` if given;
/// how many got through, and how long it took.
async fn fire(
    replicas: &[&TestApp],
    n: usize,
    header: impl Fn(usize) -> Option<(&'static str, String)>,
) -> (usize, Duration) {
    let started = Instant::now();
    let mut allowed = 0;
    for i in 0..n {
        let mut request =
            replicas[i % replicas.len()].anonymous(Method::GET, "/api/client/features");
        if let Some((name, value)) = header(i) {
            request = request.header(name, value);
        }
        let reply = send(request).await;
        match reply.status.as_u16() {
            200 => allowed += 1,
            429 => {
                assert!(reply.header("retry-after").is_some());
                reply.error_message();
            }
            other => panic!("unexpected {other}"),
        }
    }
    (allowed, started.elapsed())
}

fn plain(_: usize) -> Option<(&'static str, String)> {
    None
}

/// The most a bucket of `rate`/s (burst 2·rate) lets through in `elapsed`, plus `slack`.
fn at_most(rate: f64, elapsed: Duration, slack: f64) -> usize {
    (2.0 * rate + rate * elapsed.as_secs_f64() + slack).ceil() as usize
}

fn limited(backend: &Backend, per_second: f64) -> flagpole::config::Settings {
    let mut settings = backend.settings();
    settings.auth.rate_limit_client = per_second;
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_bucket_per_caller() {
    let backend = Backend::redis();
    let a = TestApp::spawn_with(limited(&backend, 3.0)).await;
    let b = TestApp::spawn_with(limited(&backend, 3.0)).await;
    // Both replicas have met the caller and reported once.
    fire(&[&a, &b], 2, plain).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    // A burst of 6 in all (not 6 per replica), plus the refill while it lasts; one report
    // period of lag on each replica.
    let (allowed, elapsed) = fire(&[&a, &b], 60, plain).await;
    assert!(allowed >= 3, "allowed {allowed}");
    assert!(
        allowed <= at_most(3.0, elapsed, 3.0),
        "allowed {allowed} of 60 in {elapsed:?}"
    );
    // The admin API is another group, not limited here.
    a.get("/api/admin/features").await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_burst_over_several_replicas_still_admits() {
    let backend = Backend::redis();
    let replicas = [
        TestApp::spawn_with(limited(&backend, 0.5)).await,
        TestApp::spawn_with(limited(&backend, 0.5)).await,
        TestApp::spawn_with(limited(&backend, 0.5)).await,
    ];
    let all: Vec<&TestApp> = replicas.iter().collect();
    // One request every 250 ms for 8 s: about 1 + 0.5 * 8 = 5 let through, never all refused.
    let mut allowed = 0;
    let started = Instant::now();
    for i in 0..32 {
        let (n, _) = fire(&all[i % 3..i % 3 + 1], 1, plain).await;
        allowed += n;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(allowed >= 2, "only {allowed} admitted");
    assert!(allowed <= at_most(0.5, started.elapsed(), 4.0), "{allowed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_each_replica_limits_alone() {
    let backend = Backend::redis();
    let mut settings = limited(&backend, 5.0);
    // A second limited group that sees no traffic must not mask the outage.
    settings.auth.rate_limit_usage = 5.0;
    let app = TestApp::spawn_with(settings).await;
    fire(&[&app], 1, plain).await;
    backend.redis_server().stop();
    // The next report fails; from then on the replica's own bucket refills.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (first, elapsed) = fire(&[&app], 40, plain).await;
    assert!(first >= 5, "fails open to a local bucket: {first}");
    assert!(
        first <= at_most(5.0, elapsed, 1.0),
        "{first} in {elapsed:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let (later, _) = fire(&[&app], 40, plain).await;
    assert!(later >= 3, "refilled locally: {later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_credentials_and_forwarded_addresses_do_not_get_around_limits() {
    let backend = Backend::embedded();
    let mut settings = limited(&backend, 2.0);
    settings.server.trust_proxy = true;
    let app = TestApp::spawn_with(settings).await;
    // Unverified tokens are not callers of their own: the address is.
    let junk = |i: usize| Some(("Authorization", format!("made-up-{i}")));
    let (allowed, elapsed) = fire(&[&app], 30, junk).await;
    assert!(allowed <= at_most(2.0, elapsed, 1.0), "{allowed}");
    // Only the last X-Forwarded-For entry (the proxy's) counts.
    let forged = |i: usize| Some(("X-Forwarded-For", format!("10.0.0.{i}, 192.0.2.7")));
    let (allowed, elapsed) = fire(&[&app], 30, forged).await;
    assert!(allowed <= at_most(2.0, elapsed, 1.0), "{allowed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_callers_are_limited_apart() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.auth.rate_limit_admin = 1.0;
    let app = TestApp::spawn_with(settings).await;
    let mut refused = None;
    for _ in 0..10 {
        let reply = app.get("/api/admin/features").await;
        if reply.status.as_u16() == 429 {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("the admin limit refuses");
    assert!(refused.error_message().contains("Too many requests"));
    assert!(refused.header("retry-after").is_some());
    // The client path has its own (no) limit.
    send(app.anonymous(Method::GET, "/api/client/features"))
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_address_has_a_bucket_of_its_own() {
    // The client features are answered before routing, where the peer address is given only
    // when a limit reads it: a caller from another address is not refused for this one.
    let backend = Backend::embedded();
    // One request, then one more every 5 s.
    let app = TestApp::spawn_with(limited(&backend, 0.2)).await;
    let poll = |client: &reqwest::Client| client.get(format!("{}/api/client/features", app.base));
    let here = reqwest::Client::new();
    send(poll(&here)).await.expect(200);
    send(poll(&here)).await.expect(429);
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("a client on 127.0.0.2");
    send(poll(&elsewhere)).await.expect(200);
    send(poll(&elsewhere)).await.expect(429);
}
