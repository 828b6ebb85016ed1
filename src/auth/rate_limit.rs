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

use tokio_util::sync::CancellationToken;

use crate::config::AuthSettings;
use crate::store::rate_limit::SharedBuckets;

/// How often a replica reports to the shared buckets.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);
/// A replica that reported to a bucket within this time shares its tokens.
const REPORTERS_WINDOW: Duration = Duration::from_secs(2);
/// A bucket not used for this long is forgotten (and reported no more); a caller that comes
/// back starts with a full bucket on this replica.
const IDLE: Duration = Duration::from_secs(5);
/// Callers tracked per group and shard; beyond, new callers share one overflow bucket (memory
/// stays bounded under a flood of distinct addresses).
const MAX_PER_SHARD: usize = 4_096;
const SHARDS: usize = 16;
/// The bucket callers share when the table is full.
const OVERFLOW: &str = "~overflow";
/// Keys per report script call, and per report cycle of one group (the rest wait a cycle).
const REPORT_BATCH: usize = 500;
const REPORT_MAX: usize = 5_000;

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
    /// Per group: the shared buckets answered its last report.
    shared_ok: [AtomicBool; 3],
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

/// The rate-limit key of a verified token, from its SHA-256 (hex): a prefix of it (an address
/// has a `.` or a `:`, so the two never meet). Unverified credentials are never keys: a caller
/// could make up a new one per request.
pub fn token_key(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

/// A uniform draw in [0, 1).
fn draw() -> f64 {
    (crate::store::random_id() % 1_000_000) as f64 / 1_000_000.0
}

impl RateLimiter {
    /// The limits of `settings` (0: none), shared through `shared` when given.
    pub fn new(settings: &AuthSettings, shared: Option<SharedBuckets>) -> Self {
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
            shared_ok: Default::default(),
            replica: crate::store::random_id(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Whether `group` is limited at all.
    pub fn limits(&self, group: LimitGroup) -> bool {
        self.limits[group.index()].is_some()
    }

    /// Lets an admin request through, or says how long to wait (see `check_caller`).
    pub fn check_admin(
        &self,
        token_hash: Option<&str>,
        req: &axum::extract::Request,
        trust_proxy: bool,
    ) -> Result<(), Duration> {
        self.check_caller(LimitGroup::Admin, token_hash, req, trust_proxy)
    }

    /// Lets a request of `group` through, or says how long to wait: keyed by the verified
    /// token it came with (`token_hash`), else by the caller's address.
    pub fn check_caller(
        &self,
        group: LimitGroup,
        token_hash: Option<&str>,
        req: &axum::extract::Request,
        trust_proxy: bool,
    ) -> Result<(), Duration> {
        if !self.limits(group) {
            return Ok(());
        }
        match token_hash {
            Some(hash) => self.check(group, token_key(hash)),
            None => {
                let ip = super::client_ip(req, trust_proxy);
                self.check(group, ip.as_deref().unwrap_or("unknown"))
            }
        }
    }

    fn shard(&self, group: LimitGroup, key: &str) -> &Shard {
        &self.buckets[group.index()][self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// Lets a request of `key` (a verified token's key, or a client IP) through, or says how
    /// long to wait.
    pub fn check(&self, group: LimitGroup, key: &str) -> Result<(), Duration> {
        let Some(limit) = self.limits[group.index()] else {
            return Ok(());
        };
        let now = Instant::now();
        // Shared buckets refill by their reports; a local one (no Redis, or Redis down) here.
        let local = self.shared.is_none() || !self.shared_ok[group.index()].load(Ordering::Relaxed);
        let mut shard = lock(self.shard(group, key));
        // A known caller costs one lookup; the key is allocated only for a caller met for the
        // first time (callers beyond the shard's bound share one overflow bucket).
        if let Some(bucket) = shard.get_mut(key) {
            return spend(bucket, limit, local, now);
        }
        let key = if shard.len() < MAX_PER_SHARD {
            key
        } else {
            if let Some(bucket) = shard.get_mut(OVERFLOW) {
                return spend(bucket, limit, local, now);
            }
            OVERFLOW
        };
        let bucket = shard.entry(key.to_string()).or_insert(Bucket {
            tokens: limit.burst,
            refilled: now,
            used: 0,
            touched: now,
        });
        spend(bucket, limit, local, now)
    }

    /// Reports to the shared buckets every `SYNC_EVERY` (and forgets idle callers) until
    /// `shutdown`.
    pub async fn run_sync(self: std::sync::Arc<Self>, shutdown: CancellationToken) {
        let mut failing = [false; 3];
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(SYNC_EVERY) => {}
            }
            for group in LimitGroup::ALL {
                let Some(limit) = self.limits[group.index()] else {
                    continue;
                };
                let failed = &mut failing[group.index()];
                match self.sync(group, limit).await {
                    // Nothing to report: nothing learnt about the shared buckets.
                    Ok(false) => {}
                    Ok(true) => {
                        if *failed {
                            tracing::info!(group = group.name(), "rate limits shared again");
                            *failed = false;
                        }
                        self.shared_ok[group.index()].store(true, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if !*failed {
                            tracing::warn!(group = group.name(), error = %e, "rate limits cannot be shared; limiting per replica");
                            *failed = true;
                        }
                        self.shared_ok[group.index()].store(false, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// One report of `group`: what each recent caller used, and the tokens its bucket has
    /// left. `Ok(false)`: there was nothing to report (or no shared buckets).
    async fn sync(
        &self,
        group: LimitGroup,
        limit: Limit,
    ) -> Result<bool, crate::store::StoreError> {
        let now = Instant::now();
        let mut used = Vec::new();
        for shard in &self.buckets[group.index()] {
            let mut map = lock(shard);
            map.retain(|_, b| now.duration_since(b.touched) < IDLE || b.used > 0);
            for (key, bucket) in map.iter_mut() {
                if used.len() >= REPORT_MAX {
                    break;
                }
                // Buckets that are not full refill through the report too.
                if bucket.used > 0 || bucket.tokens < limit.burst {
                    used.push((key.clone(), std::mem::take(&mut bucket.used)));
                }
            }
        }
        let Some(shared) = &self.shared else {
            return Ok(false);
        };
        if used.is_empty() {
            return Ok(false);
        }
        let context = (group.name(), self.replica, REPORTERS_WINDOW);
        for batch in used.chunks(REPORT_BATCH) {
            // Lost reports only make the shared buckets fuller: the limiter fails open.
            let tokens = shared
                .report(context, limit.per_second, limit.burst, batch)
                .await?;
            for ((key, _), (left, reporters)) in batch.iter().zip(tokens) {
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
        }
        Ok(true)
    }
}

/// Takes one token from `bucket` (refilled first when it is `local`), or says how long to wait.
fn spend(bucket: &mut Bucket, limit: Limit, local: bool, now: Instant) -> Result<(), Duration> {
    if local {
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(limit.burst);
    }
    bucket.refilled = now;
    bucket.touched = now;
    // A share below one token (a small burst over many replicas) is spent by a draw, so
    // that the replicas together admit about what the bucket holds.
    let admit = if bucket.tokens >= 1.0 {
        true
    } else if bucket.tokens > 0.0 {
        let won = draw() < bucket.tokens;
        if !won {
            bucket.tokens = 0.0;
        }
        won
    } else {
        false
    };
    if admit {
        bucket.tokens -= 1.0;
        bucket.used += 1;
        Ok(())
    } else {
        let wait = (1.0 - bucket.tokens.max(0.0)) / limit.per_second;
        Err(Duration::from_secs_f64(wait.clamp(0.001, 3600.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_second: f64) -> RateLimiter {
        let mut settings = crate::config::Settings::defaults().auth;
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
    fn a_share_below_one_token_admits_about_that_share() {
        let limiter = limiter(1.0);
        let mut admitted = 0;
        for i in 0..2000 {
            let key = format!("k{i}");
            // A bucket holding a third of a token, as each of three replicas sees one token.
            limiter
                .check(LimitGroup::ClientFeatures, &key)
                .expect("full at first");
            limiter
                .check(LimitGroup::ClientFeatures, &key)
                .expect("burst of two");
            {
                let mut shard = lock(limiter.shard(LimitGroup::ClientFeatures, &key));
                if let Some(bucket) = shard.get_mut(&key) {
                    bucket.tokens = 1.0 / 3.0;
                    bucket.refilled = Instant::now() + Duration::from_secs(3600);
                }
            }
            if limiter.check(LimitGroup::ClientFeatures, &key).is_ok() {
                admitted += 1;
            }
            assert!(
                limiter.check(LimitGroup::ClientFeatures, &key).is_err(),
                "spent"
            );
        }
        assert!((500..=830).contains(&admitted), "{admitted} of 2000");
    }
}
