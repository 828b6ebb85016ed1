//! Usage in Redis: a hash of counters per minute, one per toggle and hour, and per application a few sorted sets and
//! hashes (see `keys.rs`). A flush part is one Lua script (`flush.lua`) whose size grows with
//! the toggles and instances reported since the last flush, not with the number of reports;
//! a marker key makes it apply at most once however often it is retried.
//! (The script names keys it does not declare: fine on a standalone Redis or behind Sentinel,
//! and on Cluster, where all usage keys share one hash tag, hence one slot.)

use std::collections::HashMap;
use std::sync::Arc;

use redis::AsyncCommands;

use super::redis_fields::{add_field, escape, field, hour_field, parse_field, parse_hour_field};
use super::{
    AppMetadata, AppRecord, CountKey, Counts, Hour, InstanceRecord, Minute, PollRecord,
    RegistrationRecord, UsageBatch, COUNTS_RETENTION_MINUTES, HOURLY_RETENTION_HOURS,
    REGISTRY_RETENTION_MS,
};
use crate::store::keys::Keys;
use crate::store::redis_conn::RedisConn;
use crate::store::StoreError;

/// The usage side of the Redis backend.
#[derive(Clone)]
pub struct RedisUsage {
    conn: RedisConn,
    keys: Arc<Keys>,
    scripts: Arc<Scripts>,
}

/// The usage scripts (`flush.lua`, `settle.lua`, `trim.lua`).
struct Scripts {
    flush: redis::Script,
    settle: redis::Script,
    trim: redis::Script,
}

fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// A write that timed out may still have been applied; one that could not be sent was not.
fn write_failure(e: redis::RedisError) -> StoreError {
    if e.is_timeout() {
        StoreError::Uncertain(e.to_string())
    } else {
        StoreError::Unavailable(e.to_string())
    }
}

/// How long a flush part's marker is kept: longer than any part waits to be retried or
/// settled (a part kept longer than an hour loses its minute counters anyway).
const FLUSH_MARKER_TTL_SECONDS: u64 = 2 * 60 * 60;

/// Most members one multi-member command of the flush script carries (Lua's `unpack` has a
/// limit of about 8,000 values).
const MEMBERS_PER_COMMAND: usize = 1_000;

/// Appends `prefix` + pairs as commands of at most `MEMBERS_PER_COMMAND` pairs each.
fn push_chunked(ops: &mut Vec<Vec<String>>, prefix: &[&str], pairs: Vec<(String, String)>) {
    for chunk in pairs.chunks(MEMBERS_PER_COMMAND) {
        let mut op: Vec<String> = prefix.iter().map(|p| p.to_string()).collect();
        for (a, b) in chunk {
            op.push(a.clone());
            op.push(b.clone());
        }
        ops.push(op);
    }
}

/// `n` as a Redis integer argument (at most i64::MAX).
fn redis_integer(n: u64) -> String {
    n.min(i64::MAX as u64).to_string()
}

/// A per-instance record as stored: `<epoch ms>|<JSON>`, so the flush script can keep the
/// newer of two records without decoding them.
fn stamped<T: serde::Serialize>(at: i64, record: &T) -> Result<String, StoreError> {
    Ok(format!("{at}|{}", to_json(record)?))
}

/// The record of a stamped value.
fn unstamp<T: serde::de::DeserializeOwned>(raw: &str) -> Option<T> {
    let json = raw.split_once('|').map_or(raw, |(_, json)| json);
    serde_json::from_str(json).ok()
}

/// The epoch second the counters of `minute` expire at.
fn counts_expire_at(minute: Minute) -> u64 {
    (minute + 1 + COUNTS_RETENTION_MINUTES) * 60
}

/// The epoch second the hourly counters of `hour` expire at.
fn hour_counts_expire_at(hour: Hour) -> u64 {
    (hour + 1 + HOURLY_RETENTION_HOURS) * 3600
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl RedisUsage {
    /// The usage side over the backend's connection and keys.
    pub(crate) fn new(conn: RedisConn, keys: Arc<Keys>) -> Self {
        Self {
            conn,
            keys,
            scripts: Arc::new(Scripts {
                flush: redis::Script::new(include_str!("flush.lua")),
                settle: redis::Script::new(include_str!("settle.lua")),
                trim: redis::Script::new(include_str!("trim.lua")),
            }),
        }
    }

    pub(super) async fn flush(&self, id: u64, batch: &UsageBatch) -> Result<(), StoreError> {
        let ops = serde_json::to_string(&self.operations(batch)?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut conn = self.conn.clone();
        let (_applied, refused, first): (u8, u64, String) = self
            .scripts
            .flush
            .key(self.keys.usage_flush_marker(id))
            .arg(FLUSH_MARKER_TTL_SECONDS)
            .arg(ops)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if refused > 0 {
            // Not retried: the same commands would be refused again.
            tracing::warn!(refused, error = %first, "Redis refused commands of a usage flush");
        }
        Ok(())
    }

    pub(super) async fn settle(&self, id: u64) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let state: String = self
            .scripts
            .settle
            .key(self.keys.usage_flush_marker(id))
            .arg(FLUSH_MARKER_TTL_SECONDS)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(state == "applied")
    }

    /// The Redis commands that add `batch` (see `flush.lua` for `HSETNEWER`).
    fn operations(&self, batch: &UsageBatch) -> Result<Vec<Vec<String>>, StoreError> {
        let mut ops: Vec<Vec<String>> = Vec::new();
        let op = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        for (minute, counts) in &batch.counts {
            let key = self.keys.usage_counts(*minute);
            for (app, toggles) in counts {
                for (toggle, counts) in toggles {
                    let mut add = |kind: &str, n: u64| {
                        ops.push(vec![
                            "HINCRBY".into(),
                            key.clone(),
                            field(toggle, app, kind),
                            redis_integer(n),
                        ]);
                    };
                    // Zero yes/no counts add nothing; a variant reported with zero is listed,
                    // as the embedded store does.
                    if counts.yes > 0 {
                        add("y", counts.yes);
                    }
                    if counts.no > 0 {
                        add("n", counts.no);
                    }
                    for (variant, n) in &counts.variants {
                        add(&format!("v|{}", escape(variant)), *n);
                    }
                }
            }
            ops.push(op(&[
                "EXPIREAT",
                &key,
                &counts_expire_at(*minute).to_string(),
            ]));
        }
        // The same counts per toggle and hour, in the same script (no extra round trip).
        for (hour, toggles) in batch.hourly() {
            let expire_at = hour_counts_expire_at(hour).to_string();
            for (toggle, apps) in toggles {
                let key = self.keys.usage_hour_counts(hour, &toggle);
                for (app, counts) in apps {
                    let mut add = |kind: &str, n: u64| {
                        ops.push(vec![
                            "HINCRBY".into(),
                            key.clone(),
                            hour_field(&app, kind),
                            redis_integer(n),
                        ]);
                    };
                    if counts.yes > 0 {
                        add("y", counts.yes);
                    }
                    if counts.no > 0 {
                        add("n", counts.no);
                    }
                    for (variant, n) in &counts.variants {
                        add(&format!("v|{}", escape(variant)), *n);
                    }
                }
                ops.push(op(&["EXPIREAT", &key, &expire_at]));
            }
        }
        let apps: Vec<(String, String)> = batch
            .apps
            .iter()
            .map(|(app, a)| (a.last_seen.to_string(), app.clone()))
            .collect();
        push_chunked(&mut ops, &["ZADD", &self.keys.usage_apps(), "GT"], apps);
        for (app, activity) in &batch.apps {
            let app_key = self.keys.usage_app(app);
            let seen = activity.last_seen.to_string();
            let first = activity.first_seen().to_string();
            ops.push(op(&["HSETNX", &app_key, "createdAt", &first]));
            ops.push(op(&["HSET", &app_key, "updatedAt", &seen]));
            if let Some(strategies) = &activity.strategies {
                ops.push(op(&["HSET", &app_key, "strategies", &to_json(strategies)?]));
            }
            if activity.metrics_count > 0 {
                // Redis refuses an increment past i64::MAX: the count then stays where it is.
                let n = redis_integer(activity.metrics_count);
                ops.push(op(&["HINCRBY", &app_key, "metricsCount", &n]));
            }
            let mut last = Vec::new();
            let mut first = Vec::new();
            let mut ips = Vec::new();
            let mut registrations = Vec::new();
            let mut polls = Vec::new();
            for (id, instance) in &activity.instances {
                last.push((instance.last_seen.to_string(), id.clone()));
                first.push((instance.first_seen.to_string(), id.clone()));
                if let Some(ip) = &instance.client_ip {
                    ips.push((id.clone(), ip.clone()));
                }
                if let Some(r) = &instance.registration {
                    registrations.push((id.clone(), stamped(r.registered_at, r)?));
                }
                if let Some(p) = &instance.poll {
                    polls.push((id.clone(), stamped(p.at, p)?));
                }
            }
            push_chunked(
                &mut ops,
                &["ZADD", &self.keys.usage_instances(app), "GT"],
                last,
            );
            push_chunked(
                &mut ops,
                &["ZADD", &self.keys.usage_instances_first_seen(app), "NX"],
                first,
            );
            push_chunked(&mut ops, &["HSET", &self.keys.usage_instance_ips(app)], ips);
            push_chunked(
                &mut ops,
                &["HSETNEWER", &self.keys.usage_registrations(app)],
                registrations,
            );
            push_chunked(&mut ops, &["HSETNEWER", &self.keys.usage_polls(app)], polls);
            let toggles = activity
                .toggles
                .iter()
                .map(|(toggle, at)| (at.to_string(), toggle.clone()))
                .collect();
            push_chunked(
                &mut ops,
                &["ZADD", &self.keys.usage_seen_toggles(app), "GT"],
                toggles,
            );
        }
        Ok(ops)
    }

    pub(super) async fn trim(&self, now_ms: i64) -> Result<(), StoreError> {
        let cutoff = now_ms - REGISTRY_RETENTION_MS;
        let mut conn = self.conn.clone();
        let apps: Vec<String> = conn
            .zrange(self.keys.usage_apps(), 0, -1)
            .await
            .map_err(unavailable)?;
        for app in apps {
            let [hash, instances, first, ips, registrations, polls, toggles] =
                self.keys.usage_app_keys(&app);
            // Bounded: each call removes up to 1,000 instances.
            for _ in 0..1_000 {
                let removed: i64 = self
                    .scripts
                    .trim
                    .key(self.keys.usage_apps())
                    .key(&hash)
                    .key(&instances)
                    .key(&first)
                    .key(&ips)
                    .key(&registrations)
                    .key(&polls)
                    .key(&toggles)
                    .arg(cutoff)
                    .arg(&app)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(unavailable)?;
                if removed < 1_000 {
                    break;
                }
            }
        }
        Ok(())
    }

    pub(super) async fn counts(
        &self,
        from: Minute,
        to: Minute,
    ) -> Result<Vec<(Minute, HashMap<CountKey, Counts>)>, StoreError> {
        let keys = (from..=to).map(|minute| (minute, self.keys.usage_counts(minute)));
        self.read_count_hashes(keys, parse_field).await
    }

    pub(super) async fn hourly_counts(
        &self,
        toggle: &str,
        from: Hour,
        to: Hour,
    ) -> Result<Vec<(Hour, HashMap<String, Counts>)>, StoreError> {
        let keys = (from..=to).map(|hour| (hour, self.keys.usage_hour_counts(hour, toggle)));
        self.read_count_hashes(keys, parse_hour_field).await
    }

    /// The counter hashes at `keys` (each with its minute or hour; one round trip), their
    /// fields read with `parse` into counts per what `parse` keys them by; empty ones left out.
    async fn read_count_hashes<K: Eq + std::hash::Hash>(
        &self,
        keys: impl Iterator<Item = (u64, String)>,
        parse: impl Fn(&str) -> Option<(K, &str, Option<String>)>,
    ) -> Result<Vec<(u64, HashMap<K, Counts>)>, StoreError> {
        let mut pipe = redis::pipe();
        let mut at = Vec::new();
        for (time, key) in keys {
            pipe.hgetall(key);
            at.push(time);
        }
        let mut conn = self.conn.clone();
        let hashes: Vec<HashMap<String, u64>> =
            pipe.query_async(&mut conn).await.map_err(unavailable)?;
        let mut out = Vec::new();
        for (time, hash) in at.into_iter().zip(hashes) {
            if hash.is_empty() {
                continue;
            }
            let mut counts: HashMap<K, Counts> = HashMap::new();
            for (field, n) in &hash {
                let Some((key, kind, variant)) = parse(field) else {
                    continue;
                };
                add_field(counts.entry(key).or_default(), kind, variant, *n);
            }
            out.push((time, counts));
        }
        Ok(out)
    }

    /// Reads the application hashes of `names` (with their last-seen scores).
    async fn app_records(&self, names: Vec<(String, i64)>) -> Result<Vec<AppRecord>, StoreError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (name, _) in &names {
            pipe.hgetall(self.keys.usage_app(name));
        }
        let mut conn = self.conn.clone();
        let hashes: Vec<HashMap<String, String>> =
            pipe.query_async(&mut conn).await.map_err(unavailable)?;
        Ok(names
            .into_iter()
            .zip(hashes)
            .map(|((name, last_seen), hash)| app_record(name, last_seen, &hash))
            .collect())
    }

    pub(super) async fn applications(&self, since_ms: i64) -> Result<Vec<AppRecord>, StoreError> {
        let mut conn = self.conn.clone();
        let mut names: Vec<(String, i64)> = conn
            .zrangebyscore_withscores(self.keys.usage_apps(), since_ms, "+inf")
            .await
            .map_err(unavailable)?;
        names.sort();
        self.app_records(names).await
    }

    pub(super) async fn application(
        &self,
        name: &str,
        since_ms: i64,
    ) -> Result<Option<AppRecord>, StoreError> {
        let mut conn = self.conn.clone();
        let score: Option<i64> = conn
            .zscore(self.keys.usage_apps(), name)
            .await
            .map_err(unavailable)?;
        match score {
            Some(last_seen) if last_seen >= since_ms => Ok(self
                .app_records(vec![(name.to_string(), last_seen)])
                .await?
                .pop()),
            _ => Ok(None),
        }
    }

    pub(super) async fn instances(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<InstanceRecord>>, StoreError> {
        if apps.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for app in apps {
            pipe.zrevrangebyscore_withscores(self.keys.usage_instances(app), "+inf", since_ms)
                .cmd("ZRANGE")
                .arg(self.keys.usage_instances_first_seen(app))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .hgetall(self.keys.usage_instance_ips(app))
                .hgetall(self.keys.usage_registrations(app))
                .hgetall(self.keys.usage_polls(app));
        }
        let mut conn = self.conn.clone();
        let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await.map_err(unavailable)?;
        let mut replies = replies.into_iter();
        let mut next = move || -> Result<redis::Value, StoreError> {
            replies
                .next()
                .ok_or_else(|| StoreError::Corrupt("short reply to an instances read".into()))
        };
        let mut out = Vec::with_capacity(apps.len());
        for _ in apps {
            let last: Vec<(String, i64)> = decode(next()?)?;
            let first: HashMap<String, i64> = decode(next()?)?;
            let ips: HashMap<String, String> = decode(next()?)?;
            let registrations: HashMap<String, String> = decode(next()?)?;
            let polls: HashMap<String, String> = decode(next()?)?;
            out.push(
                last.into_iter()
                    .map(|(id, last_seen)| InstanceRecord {
                        first_seen: first.get(&id).copied().unwrap_or(last_seen),
                        client_ip: ips.get(&id).cloned(),
                        registration: registrations
                            .get(&id)
                            .and_then(|raw| unstamp::<RegistrationRecord>(raw)),
                        poll: polls.get(&id).and_then(|raw| unstamp::<PollRecord>(raw)),
                        last_seen,
                        instance_id: id,
                    })
                    .collect(),
            );
        }
        Ok(out)
    }

    pub(super) async fn seen_toggles(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        if apps.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for app in apps {
            pipe.zrangebyscore(self.keys.usage_seen_toggles(app), since_ms, "+inf");
        }
        let mut conn = self.conn.clone();
        let mut lists: Vec<Vec<String>> = pipe.query_async(&mut conn).await.map_err(unavailable)?;
        for toggles in &mut lists {
            toggles.sort();
        }
        Ok(lists)
    }

    pub(super) async fn set_metadata(
        &self,
        app: &str,
        metadata: &AppMetadata,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let app_key = self.keys.usage_app(app);
        let mut conn = self.conn.clone();
        redis::pipe()
            .atomic()
            .hset(&app_key, "metadata", to_json(metadata)?)
            .ignore()
            .hset_nx(&app_key, "createdAt", now_ms)
            .ignore()
            .cmd("ZADD")
            .arg(self.keys.usage_apps())
            .arg("GT")
            .arg(now_ms)
            .arg(app)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(write_failure)
    }

    pub(super) async fn delete_application(&self, app: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        redis::pipe()
            .atomic()
            .del(&self.keys.usage_app_keys(app)[..])
            .ignore()
            .zrem(self.keys.usage_apps(), app)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(write_failure)
    }
}

/// Decodes one reply of a pipeline.
fn decode<T: redis::FromRedisValue>(value: redis::Value) -> Result<T, StoreError> {
    redis::from_redis_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Builds an application from its hash.
fn app_record(name: String, last_seen: i64, hash: &HashMap<String, String>) -> AppRecord {
    let number = |field: &str| hash.get(field).and_then(|v| v.parse::<i64>().ok());
    AppRecord {
        created_at: number("createdAt").unwrap_or(last_seen),
        last_seen: number("updatedAt").unwrap_or(last_seen).max(last_seen),
        strategies: hash
            .get("strategies")
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_default(),
        metadata: hash
            .get("metadata")
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_default(),
        metrics_count: number("metricsCount").unwrap_or(0).max(0) as u64,
        name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hour_counters_outlive_the_hour_by_the_retention() {
        // Hour 10 ends at 11:00; kept 49 hours more.
        assert_eq!(hour_counts_expire_at(10), (11 + 49) * 3600);
        assert!(hour_counts_expire_at(10) > counts_expire_at(10 * 60 + 59));
    }
}
