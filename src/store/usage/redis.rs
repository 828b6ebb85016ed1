//! Usage in Redis: a hash of counters per minute, and per application a few sorted sets and
//! hashes (see `keys.rs`). A flush is one MULTI/EXEC pipeline whose size grows with the toggles
//! and applications reported since the last flush, not with the number of reports.

use std::collections::HashMap;
use std::sync::Arc;

use redis::aio::ConnectionManager;
use redis::AsyncCommands;

use super::{
    AppMetadata, AppRecord, CountKey, Counts, InstanceRecord, Minute, PollRecord,
    RegistrationRecord, UsageBatch, COUNTS_RETENTION_MINUTES, REGISTRY_RETENTION_MS,
};
use crate::store::keys::Keys;
use crate::store::StoreError;

/// The usage side of the Redis backend.
#[derive(Clone)]
pub struct RedisUsage {
    conn: ConnectionManager,
    keys: Arc<Keys>,
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

/// Escapes one part of a counter field, so `|` separates parts unambiguously.
fn escape(part: &str) -> std::borrow::Cow<'_, str> {
    if part.contains(['%', '|']) {
        part.replace('%', "%25").replace('|', "%7C").into()
    } else {
        part.into()
    }
}

fn unescape(part: &str) -> String {
    part.replace("%7C", "|").replace("%25", "%")
}

/// The counter field of a toggle's yes (`y`), no (`n`) or variant (`v|<name>`) count in one
/// application.
pub fn field(toggle: &str, app: &str, kind: &str) -> String {
    format!("{}|{}|{kind}", escape(toggle), escape(app))
}

/// Reads a counter field back: the key and `None` for yes/no, or the variant name.
fn parse_field(field: &str) -> Option<(CountKey, &str, Option<String>)> {
    let mut parts = field.splitn(4, '|');
    let toggle = unescape(parts.next()?);
    let app = unescape(parts.next()?);
    let kind = parts.next()?;
    let variant = parts.next().map(unescape);
    Some((CountKey { toggle, app }, kind, variant))
}

/// The epoch second the counters of `minute` expire at.
fn counts_expire_at(minute: Minute) -> u64 {
    (minute + 1 + COUNTS_RETENTION_MINUTES) * 60
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl RedisUsage {
    /// The usage side over the backend's connection and keys.
    pub(crate) fn new(conn: ConnectionManager, keys: Arc<Keys>) -> Self {
        Self { conn, keys }
    }

    pub(super) async fn flush(&self, batch: &UsageBatch) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (minute, counts) in &batch.counts {
            let key = self.keys.usage_counts(*minute);
            for (app, toggles) in counts {
                for (toggle, counts) in toggles {
                    if counts.yes > 0 {
                        pipe.hincr(&key, field(toggle, app, "y"), counts.yes)
                            .ignore();
                    }
                    if counts.no > 0 {
                        pipe.hincr(&key, field(toggle, app, "n"), counts.no)
                            .ignore();
                    }
                    for (variant, n) in &counts.variants {
                        let kind = format!("v|{}", escape(variant));
                        pipe.hincr(&key, field(toggle, app, &kind), *n).ignore();
                    }
                }
            }
            pipe.cmd("EXPIREAT")
                .arg(&key)
                .arg(counts_expire_at(*minute))
                .ignore();
        }
        if !batch.apps.is_empty() {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(self.keys.usage_apps()).arg("GT");
            for (app, activity) in &batch.apps {
                zadd.arg(activity.last_seen).arg(app);
            }
            pipe.add_command(zadd).ignore();
        }
        for (app, activity) in &batch.apps {
            let app_key = self.keys.usage_app(app);
            pipe.hset_nx(&app_key, "createdAt", activity.last_seen)
                .ignore();
            pipe.hset(&app_key, "updatedAt", activity.last_seen)
                .ignore();
            if let Some(strategies) = &activity.strategies {
                pipe.hset(&app_key, "strategies", to_json(strategies)?)
                    .ignore();
            }
            if activity.metrics_count > 0 {
                pipe.hincr(&app_key, "metricsCount", activity.metrics_count)
                    .ignore();
            }
            if !activity.instances.is_empty() {
                let mut last = redis::cmd("ZADD");
                last.arg(self.keys.usage_instances(app)).arg("GT");
                let mut first = redis::cmd("ZADD");
                first
                    .arg(self.keys.usage_instances_first_seen(app))
                    .arg("NX");
                let mut ips = Vec::new();
                let mut registrations = Vec::new();
                let mut polls = Vec::new();
                for (id, instance) in &activity.instances {
                    last.arg(instance.last_seen).arg(id);
                    first.arg(instance.first_seen).arg(id);
                    if let Some(ip) = &instance.client_ip {
                        ips.push((id.as_str(), ip.clone()));
                    }
                    if let Some(registration) = &instance.registration {
                        registrations.push((id.as_str(), to_json(registration)?));
                    }
                    if let Some(poll) = &instance.poll {
                        polls.push((id.as_str(), to_json(poll)?));
                    }
                }
                pipe.add_command(last).ignore();
                pipe.add_command(first).ignore();
                if !ips.is_empty() {
                    pipe.hset_multiple(self.keys.usage_instance_ips(app), &ips)
                        .ignore();
                }
                if !registrations.is_empty() {
                    pipe.hset_multiple(self.keys.usage_registrations(app), &registrations)
                        .ignore();
                }
                if !polls.is_empty() {
                    pipe.hset_multiple(self.keys.usage_polls(app), &polls)
                        .ignore();
                }
            }
            if !activity.toggles.is_empty() {
                let mut seen = redis::cmd("ZADD");
                seen.arg(self.keys.usage_seen_toggles(app)).arg("GT");
                for (toggle, at) in &activity.toggles {
                    seen.arg(*at).arg(toggle);
                }
                pipe.add_command(seen).ignore();
            }
        }
        let mut conn = self.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(write_failure)
    }

    pub(super) async fn trim(&self, now_ms: i64) -> Result<(), StoreError> {
        let cutoff = now_ms - REGISTRY_RETENTION_MS;
        let mut conn = self.conn.clone();
        let gone: Vec<String> = conn
            .zrangebyscore(self.keys.usage_apps(), "-inf", format!("({cutoff}"))
            .await
            .map_err(unavailable)?;
        for app in &gone {
            self.delete_application(app).await?;
        }
        let apps: Vec<String> = conn
            .zrange(self.keys.usage_apps(), 0, -1)
            .await
            .map_err(unavailable)?;
        for app in apps {
            let old: Vec<String> = conn
                .zrangebyscore(
                    self.keys.usage_instances(&app),
                    "-inf",
                    format!("({cutoff}"),
                )
                .await
                .map_err(unavailable)?;
            let mut pipe = redis::pipe();
            if !old.is_empty() {
                pipe.hdel(self.keys.usage_instance_ips(&app), &old).ignore();
                pipe.hdel(self.keys.usage_registrations(&app), &old)
                    .ignore();
                pipe.hdel(self.keys.usage_polls(&app), &old).ignore();
                pipe.zrem(self.keys.usage_instances_first_seen(&app), &old)
                    .ignore();
                pipe.zrem(self.keys.usage_instances(&app), &old).ignore();
            }
            pipe.zrembyscore(
                self.keys.usage_seen_toggles(&app),
                "-inf",
                format!("({cutoff}"),
            )
            .ignore();
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    pub(super) async fn counts(
        &self,
        from: Minute,
        to: Minute,
    ) -> Result<Vec<(Minute, HashMap<CountKey, Counts>)>, StoreError> {
        let mut pipe = redis::pipe();
        for minute in from..=to {
            pipe.hgetall(self.keys.usage_counts(minute));
        }
        let mut conn = self.conn.clone();
        let hashes: Vec<HashMap<String, u64>> =
            pipe.query_async(&mut conn).await.map_err(unavailable)?;
        let mut out = Vec::new();
        for (minute, hash) in (from..=to).zip(hashes) {
            if hash.is_empty() {
                continue;
            }
            let mut counts: HashMap<CountKey, Counts> = HashMap::new();
            for (field, n) in hash {
                let Some((key, kind, variant)) = parse_field(&field) else {
                    continue;
                };
                let slot = counts.entry(key).or_default();
                match (kind, variant) {
                    ("y", None) => slot.yes += n,
                    ("n", None) => slot.no += n,
                    ("v", Some(variant)) => *slot.variants.entry(variant).or_default() += n,
                    _ => {}
                }
            }
            out.push((minute, counts));
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
        app: &str,
        since_ms: i64,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        let mut conn = self.conn.clone();
        #[allow(clippy::type_complexity)]
        let (last, first, ips, registrations, polls): (
            Vec<(String, i64)>,
            HashMap<String, i64>,
            HashMap<String, String>,
            HashMap<String, String>,
            HashMap<String, String>,
        ) = redis::pipe()
            .zrevrangebyscore_withscores(self.keys.usage_instances(app), "+inf", since_ms)
            .cmd("ZRANGE")
            .arg(self.keys.usage_instances_first_seen(app))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .hgetall(self.keys.usage_instance_ips(app))
            .hgetall(self.keys.usage_registrations(app))
            .hgetall(self.keys.usage_polls(app))
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(last
            .into_iter()
            .map(|(id, last_seen)| InstanceRecord {
                first_seen: first.get(&id).copied().unwrap_or(last_seen),
                client_ip: ips.get(&id).cloned(),
                registration: registrations
                    .get(&id)
                    .and_then(|raw| serde_json::from_str::<RegistrationRecord>(raw).ok()),
                poll: polls
                    .get(&id)
                    .and_then(|raw| serde_json::from_str::<PollRecord>(raw).ok()),
                last_seen,
                instance_id: id,
            })
            .collect())
    }

    pub(super) async fn seen_toggles(
        &self,
        app: &str,
        since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn.clone();
        let mut toggles: Vec<String> = conn
            .zrangebyscore(self.keys.usage_seen_toggles(app), since_ms, "+inf")
            .await
            .map_err(unavailable)?;
        toggles.sort();
        Ok(toggles)
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
    fn fields_round_trip_with_separators_in_names() {
        let key = CountKey {
            toggle: "a|b%7C".into(),
            app: "my|app".into(),
        };
        let kind = format!("v|{}", escape("x|y"));
        let encoded = field(&key.toggle, &key.app, &kind);
        let (parsed, k, variant) = parse_field(&encoded).expect("parses");
        assert_eq!(parsed, key);
        assert_eq!(k, "v");
        assert_eq!(variant.as_deref(), Some("x|y"));
        let encoded = field(&key.toggle, &key.app, "y");
        let (parsed, k, variant) = parse_field(&encoded).expect("parses");
        assert_eq!((parsed, k, variant), (key, "y", None));
    }
}
