//! The shared side of the rate limiter (Redis only): token buckets every replica reports to a
//! few times a second (see `auth::rate_limit`). The embedded store has one replica: its
//! buckets are local.

use std::sync::Arc;

use redis::Script;

use super::keys::Keys;
use super::redis_conn::RedisConn;
use super::StoreError;

/// The shared buckets of one installation.
#[derive(Clone)]
pub struct SharedBuckets {
    conn: RedisConn,
    keys: Arc<Keys>,
    script: Arc<Script>,
}

impl SharedBuckets {
    /// Buckets under `keys`, on `conn`.
    pub fn new(conn: RedisConn, keys: Arc<Keys>) -> Self {
        Self {
            conn,
            keys,
            script: Arc::new(Script::new(include_str!("rate_limit.lua"))),
        }
    }

    /// Reports, as replica `replica`, what each key of `group` used (`(key, tokens used)`) to
    /// buckets refilling at `rate` per second up to `burst`; returns each bucket's tokens and
    /// how many replicas reported to it within `window`, in order.
    pub async fn report(
        &self,
        (group, replica, window): (&str, u64, std::time::Duration),
        rate: f64,
        burst: f64,
        used: &[(String, u32)],
    ) -> Result<Vec<(f64, u32)>, StoreError> {
        if used.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = self.script.prepare_invoke();
        for (key, _) in used {
            invocation.key(self.keys.rate_bucket(group, key));
        }
        invocation
            .arg(rate)
            .arg(burst)
            .arg(replica)
            .arg(u64::try_from(window.as_millis()).unwrap_or(u64::MAX));
        for (_, n) in used {
            invocation.arg(*n);
        }
        let mut conn = self.conn.clone();
        let answers: Vec<(String, u32)> = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        Ok(answers
            .into_iter()
            .map(|(tokens, reporters)| (tokens.parse().unwrap_or(0.0), reporters.max(1)))
            .collect())
    }
}
