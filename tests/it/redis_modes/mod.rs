//! Redis beyond one server: TLS and ACL users, start-up errors, WAIT, Sentinel and Cluster,
//! on real servers started by the tests (see `common::topology`).

mod cluster;
mod sentinel;
mod startup;
mod tls;
mod wait;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::TestApp;

/// What a stream of writes through a failover saw.
pub struct WriteStream {
    /// Toggles whose creation was acknowledged (200).
    pub acknowledged: Vec<String>,
    /// Writes answered 503 (the store unreachable, or the write unconfirmed).
    pub refused: usize,
}

/// Creates toggles `<prefix>.<n>` one after the other: `before` of them, then calls
/// `trigger` (the failover), then goes on until `after` writes were acknowledged once
/// `switched` holds (the new master serves). Fails after `deadline`. Any status other than
/// 200 and 503 fails the test.
pub async fn write_through_failover(
    app: &TestApp,
    prefix: &str,
    before: usize,
    trigger: impl FnOnce(),
    mut switched: impl FnMut() -> bool,
    after: usize,
    deadline: Duration,
) -> WriteStream {
    let mut stream = WriteStream {
        acknowledged: Vec::new(),
        refused: 0,
    };
    let mut n = 0;
    let write = |n: usize| {
        let name = format!("{prefix}.{n}");
        async move { (app.create_toggle_reply(&name).await, name) }
    };
    for _ in 0..before {
        let (reply, name) = write(n).await;
        n += 1;
        assert_eq!(reply.status, 200, "before the failover: {:?}", reply.json);
        stream.acknowledged.push(name);
    }
    trigger();
    let started = Instant::now();
    let mut resumed = 0;
    let mut seen_switch = false;
    while resumed < after {
        assert!(
            started.elapsed() < deadline,
            "writes did not resume within {deadline:?} ({} refused, switch seen: {seen_switch})",
            stream.refused
        );
        let (reply, name) = write(n).await;
        n += 1;
        seen_switch = seen_switch || switched();
        match reply.status.as_u16() {
            200 => {
                stream.acknowledged.push(name);
                if seen_switch {
                    resumed += 1;
                }
            }
            503 => {
                stream.refused += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!(
                "unexpected status {other} during the failover: {:?}",
                reply.json
            ),
        }
    }
    // For the record (shown with --no-capture); nothing here is asserted on time.
    eprintln!(
        "{} writes acknowledged, {} refused; writes resumed {:?} after the failover began",
        stream.acknowledged.len(),
        stream.refused,
        started.elapsed()
    );
    stream
}

/// Asserts that a replica started now (it loads everything from Redis) has every
/// acknowledged toggle.
pub async fn assert_all_kept(fresh: &TestApp, stream: &WriteStream, prefix: &str) {
    let listing = fresh
        .get(&format!("/api/admin/features?namePrefix={prefix}."))
        .await
        .expect(200)
        .json;
    let stored: BTreeSet<String> = crate::common::feature_names(listing).into_iter().collect();
    let lost: Vec<&String> = stream
        .acknowledged
        .iter()
        .filter(|name| !stored.contains(*name))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes were lost: {lost:?}",
        lost.len(),
        stream.acknowledged.len()
    );
}
