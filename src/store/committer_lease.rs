//! The committer lease (Redis only): which replica commits the installation's admin writes,
//! so that they are committed in batches by one replica rather than raced by many (see
//! `forwarding`). A replica holds it for `LEASE_TTL` after each renewal.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::keys::Keys;
use super::redis_conn::RedisConn;
use super::StoreError;

/// How long a lease lasts without renewal: how long writes may go to a replica that died
/// before another one takes over (forwards to it fail at once and are committed locally).
pub const LEASE_TTL: Duration = Duration::from_secs(5);

/// The committer lease of one installation.
#[derive(Clone)]
pub struct CommitterLease {
    conn: RedisConn,
    keys: Arc<Keys>,
    script: Arc<Script>,
}

impl CommitterLease {
    /// The lease under `keys`, on `conn`.
    pub fn new(conn: RedisConn, keys: Arc<Keys>) -> Self {
        Self {
            conn,
            keys,
            script: Arc::new(Script::new(include_str!("committer_lease.lua"))),
        }
    }

    /// Takes or renews the lease for `claim` when `take`, gives it up otherwise (if `claim`
    /// holds it); returns the holder's claim afterwards, if any.
    pub async fn hold_or_release(
        &self,
        claim: &str,
        take: bool,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn.clone();
        self.script
            .key(self.keys.committer())
            .arg(claim)
            .arg(if take { "1" } else { "0" })
            .arg(u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }
}
