//! Rate limits per caller — a token (by its SHA-256) or, without one, the client IP — kept
//! apart for the client features path, client registrations and metrics, and the admin API.
//!
//! Every decision is taken in memory: no store call per request. With Redis the buckets are
//! shared by the replicas: each replica charges its local copy of a bucket and reports what it
//! let through every `SYNC_EVERY`; the shared bucket refills by Redis' clock and tells each
//! replica how many tokens are left and how many replicas use it, and each replica spends its
//! share until its next report. (A caller new to a replica starts with a full bucket there,
//! so the very first burst can exceed the limit by up to one burst per replica.) While Redis cannot be reached the limiter fails open to a
//! bucket per replica that refills locally (so the fleet-wide limit is then that many times
//! higher). On the embedded store the buckets are local.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::domain::api_token::hash_secret;
use crate::store::rate_limit::SharedBuckets;

/// How often a replica reports to the shared buckets.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);
/// A replica that reported to a bucket within this time shares its tokens.
const REPORTERS_WINDOW: Duration = Duration::from_secs(2);
/// A bucket not used for this long is forgotten (it is full again by then).
const IDLE: Duration = Duration::from_secs(60);
/// Callers tracked per group and shard; beyond, new callers are not limited (memory stays
/// bounded under a flood of distinct tokens or addresses).
const MAX_PER_SHARD: usize = 16_384;
const SHARDS: usize = 16;

/// The parts of the API limited apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitGroup {
    /// `GET /api/client/features[/:name]`.
    ClientFeatures,
    /// `POST /api/client/register` and `/metrics`.
    ClientUsage,
    /// The admin API.
    Admin,
}

impl LimitGroup {
    const ALL: [LimitGroup; 3] = [
        LimitGroup::ClientFeatures,
        LimitGroup::ClientUsage,
        LimitGroup::Admin,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            LimitGroup::ClientFeatures => "features",
            LimitGroup::ClientUsage => "usage",
            LimitGroup::Admin => "admin",
        }
    }
}

/// A rate and the burst above it.
#[derive(Debug, Clone, Copy)]
struct Limit {
    per_second: f64,
    burst: f64,
}

/// One caller's bucket on this replica.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// Let through since the last report.
    used: u32,
    touched: Instant,
}

type Shard = Mutex<HashMap<String, Bucket>>;

/// The rate limiter of one replica.
pub struct RateLimiter {
    limits: [Option<Limit>; 3],
    buckets: [Vec<Shard>; 3],
    shared: Option<SharedBuckets>,
    /// The shared buckets answered the last report.
    shared_ok: AtomicBool,
    /// This replica's id in the shared buckets.
    replica: u64,
    hasher: foldhash::fast::RandomState,
}

fn lock(shard: &Shard) -> MutexGuard<'_, HashMap<String, Bucket>> {
    match shard.lock() {
        Ok(map) => map,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The rate-limit key of a token, from its SHA-256 (hex): a prefix of it (an address has a
/// `.` or a `:`, so the two never meet).
pub fn token_key(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

/// Who a request comes from: its credentials (their SHA-256, a prefix of it), or else its
/// client IP.
pub fn caller(headers: &HeaderMap, ip: Option<&str>) -> String {
    match headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        Some(credential) => token_key(&hash_secret(credential)).to_string(),
        None => ip.unwrap_or("unknown").to_string(),
    }
}

impl RateLimiter {
    /// The limits of `settings` (0: none), shared through `shared` when given.
    pub fn new(settings: &Settings, shared: Option<SharedBuckets>) -> Self {
        let limit = |per_second: f64| {
            (per_second > 0.0).then_some(Limit {
                per_second,
                burst: (per_second * 2.0).max(1.0),
            })
        };
        let shards = || (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect();
        Self {
            limits: [
                limit(settings.rate_limit_client),
                limit(settings.rate_limit_usage),
                limit(settings.rate_limit_admin),
            ],
            buckets: [shards(), shards(), shards()],
            shared,
            shared_ok: AtomicBool::new(true),
            replica: crate::store::random_id(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Whether `group` is limited at all.
    pub fn limits(&self, group: LimitGroup) -> bool {
        self.limits[group.index()].is_some()
    }

    fn shard(&self, group: LimitGroup, key: &str) -> &Shard {
        &self.buckets[group.index()][self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// Lets a request of `key` through, or says how long to wait.
    pub fn check(&self, group: LimitGroup, key: &str) -> Result<(), Duration> {
        let Some(limit) = self.limits[group.index()] else {
            return Ok(());
        };
        let now = Instant::now();
        // Shared buckets refill by their reports; a local one (no Redis, or Redis down) here.
        let local = self.shared.is_none() || !self.shared_ok.load(Ordering::Relaxed);
        let mut shard = lock(self.shard(group, key));
        if !shard.contains_key(key) {
            if shard.len() >= MAX_PER_SHARD {
                return Ok(());
            }
            shard.insert(
                key.to_string(),
                Bucket {
                    tokens: limit.burst,
                    refilled: now,
                    used: 0,
                    touched: now,
                },
            );
        }
        let Some(bucket) = shard.get_mut(key) else {
            return Ok(());
        };
        if local {
            let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
            bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(limit.burst);
        }
        bucket.refilled = now;
        bucket.touched = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            bucket.used += 1;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / limit.per_second;
            Err(Duration::from_secs_f64(wait.clamp(0.001, 3600.0)))
        }
    }

    /// Reports to the shared buckets every `SYNC_EVERY` (and forgets idle callers) until
    /// `shutdown`.
    pub async fn run_sync(self: std::sync::Arc<Self>, shutdown: CancellationToken) {
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(SYNC_EVERY) => {}
            }
            for group in LimitGroup::ALL {
                let Some(limit) = self.limits[group.index()] else {
                    continue;
                };
                match self.sync(group, limit).await {
                    Ok(()) => {
                        if failing {
                            tracing::info!("rate limits shared again");
                            failing = false;
                        }
                        self.shared_ok.store(true, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "rate limits cannot be shared; limiting per replica");
                            failing = true;
                        }
                        self.shared_ok.store(false, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// One report of `group`: what each caller used, and the tokens its bucket has left.
    async fn sync(&self, group: LimitGroup, limit: Limit) -> Result<(), crate::store::StoreError> {
        let now = Instant::now();
        let mut used = Vec::new();
        for shard in &self.buckets[group.index()] {
            let mut map = lock(shard);
            map.retain(|_, b| now.duration_since(b.touched) < IDLE || b.used > 0);
            for (key, bucket) in map.iter_mut() {
                // Buckets that are not full refill through the report too.
                if bucket.used > 0 || bucket.tokens < limit.burst {
                    used.push((key.clone(), std::mem::take(&mut bucket.used)));
                }
            }
        }
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let context = (group.name(), self.replica, REPORTERS_WINDOW);
        let tokens = match shared
            .report(context, limit.per_second, limit.burst, &used)
            .await
        {
            Ok(tokens) => tokens,
            Err(e) => {
                // Lost reports only make the shared buckets fuller: the limiter fails open.
                return Err(e);
            }
        };
        for ((key, _), (left, reporters)) in used.iter().zip(tokens) {
            let mut map = lock(self.shard(group, key));
            if let Some(bucket) = map.get_mut(key) {
                // This replica's share; what it let through since the report was taken is
                // still to be charged.
                let share = if left > 0.0 {
                    left / f64::from(reporters)
                } else {
                    left
                };
                bucket.tokens = share - f64::from(bucket.used);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_second: f64) -> RateLimiter {
        let mut settings = Settings::defaults();
        settings.rate_limit_client = per_second;
        RateLimiter::new(&settings, None)
    }

    #[test]
    fn a_local_bucket_allows_its_burst_then_its_rate() {
        let limiter = limiter(10.0);
        for _ in 0..20 {
            assert!(limiter.check(LimitGroup::ClientFeatures, "a").is_ok());
        }
        let wait = limiter
            .check(LimitGroup::ClientFeatures, "a")
            .expect_err("burst used up");
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(
            limiter.check(LimitGroup::ClientFeatures, "b").is_ok(),
            "per caller"
        );
        assert!(limiter.check(LimitGroup::Admin, "a").is_ok(), "per group");
        std::thread::sleep(Duration::from_millis(120));
        assert!(
            limiter.check(LimitGroup::ClientFeatures, "a").is_ok(),
            "refilled"
        );
    }

    #[test]
    fn callers_are_their_token_or_their_address() {
        let mut headers = HeaderMap::new();
        assert_eq!(caller(&headers, Some("10.0.0.1")), "10.0.0.1");
        headers.insert(
            axum::http::header::AUTHORIZATION,
            axum::http::HeaderValue::from_static("secret-token"),
        );
        let key = caller(&headers, Some("10.0.0.1"));
        assert!(key.len() == 16 && !key.contains("secret"));
    }
}
