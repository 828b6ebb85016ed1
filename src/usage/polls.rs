//! `PollLog`: which configuration each SDK instance holds, recorded on the client hot path.
//!
//! A poll costs one hash of the instance's headers, one shard lock and, for an instance already
//! seen since the last flush, no allocation; a repeat of the same poll within the same second
//! (same instance, same ETag) only touches a per-thread memo, so one busy instance cannot make
//! the threads fight over a lock. The log is emptied by every flush, so it holds at most the
//! instances that polled in one flush interval (and never more than `MAX_ENTRIES`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::lock;

use axum::http::HeaderValue;

/// Shards of the log; more than cores, so concurrent polls rarely meet.
const SHARDS: usize = 16;
/// Most instances remembered between two flushes; polls of further instances are not
/// recorded until the next flush (and counted as dropped).
pub const MAX_ENTRIES: usize = 200_000;

/// Hashes the log's keys, which are hashes already, by taking them as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Shard = Mutex<HashMap<u64, PollEntry, BuildHasherDefault<KeyHasher>>>;

/// Slots of the per-thread memo of recent polls.
const MEMO_SLOTS: usize = 64;

/// A poll recorded recently by this thread: (log, instance id, ETag, version, epoch second).
type Memo = [(usize, u64, usize, u64, i64); MEMO_SLOTS];

thread_local! {
    static RECENT: RefCell<Memo> = const { RefCell::new([(0, 0, 0, 0, 0); MEMO_SLOTS]) };
}

/// One instance's latest poll.
#[derive(Debug, Clone)]
pub struct PollEntry {
    pub app: Box<str>,
    pub instance: Box<str>,
    /// The query string of the poll (its filter).
    pub query: Box<str>,
    pub etag: HeaderValue,
    pub version: u64,
    /// Epoch milliseconds.
    pub at: i64,
}

/// The polls since the last flush, by instance.
pub struct PollLog {
    shards: [Shard; SHARDS],
    /// Keyed per log (a fast, seeded hash: instance ids come from clients).
    hasher: foldhash::fast::RandomState,
    entries: AtomicUsize,
    dropped: AtomicU64,
}

impl Default for PollLog {
    fn default() -> Self {
        Self::new()
    }
}

impl PollLog {
    /// An empty log.
    pub fn new() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::default())),
            hasher: foldhash::fast::RandomState::default(),
            entries: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Records that `instance` of `app` was just answered with `etag`, built from `version`,
    /// for the filter in `query`. Returns how many instances the log holds when this poll
    /// added one, else 0.
    pub fn record(
        &self,
        app: &str,
        instance: &str,
        query: &str,
        etag: &HeaderValue,
        version: u64,
        at: i64,
    ) -> usize {
        let mut hasher = self.hasher.build_hasher();
        app.hash(&mut hasher);
        instance.hash(&mut hasher);
        let id = hasher.finish();
        // The same poll again within the same second changes nothing worth a lock.
        let memo = (
            self as *const Self as usize,
            id,
            etag.as_bytes().as_ptr() as usize,
            version,
            at.div_euclid(1000),
        );
        let repeated = RECENT.with(|recent| {
            let mut recent = recent.borrow_mut();
            let slot = &mut recent[(id as usize) % MEMO_SLOTS];
            let repeated = *slot == memo;
            *slot = memo;
            repeated
        });
        if repeated {
            return 0;
        }
        let mut shard = lock(&self.shards[(id as usize) % SHARDS]);
        if let Some(entry) = shard.get_mut(&id) {
            // A 64-bit collision between two instances only costs the older one's record.
            if &*entry.app != app || &*entry.instance != instance {
                entry.app = app.into();
                entry.instance = instance.into();
            }
            if &*entry.query != query {
                entry.query = query.into();
            }
            entry.version = version;
            if entry.etag != etag {
                // A change of configuration is ordered against other replicas' records by its
                // time: take it precisely, not from the coarse clock.
                entry.etag = etag.clone();
                entry.at = super::now_ms().max(at);
            } else {
                entry.at = entry.at.max(at);
            }
            return 0;
        }
        if self.entries.load(Ordering::Relaxed) >= MAX_ENTRIES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        let held = self.entries.fetch_add(1, Ordering::Relaxed) + 1;
        shard.insert(
            id,
            PollEntry {
                app: app.into(),
                instance: instance.into(),
                query: query.into(),
                etag: etag.clone(),
                version,
                at: super::now_ms().max(at),
            },
        );
        held
    }

    /// Takes every entry recorded since the last call, and how many polls were not recorded
    /// because the log was full.
    pub fn take(&self) -> (Vec<PollEntry>, u64) {
        let mut out = Vec::with_capacity(self.entries.load(Ordering::Relaxed));
        for shard in &self.shards {
            let taken = std::mem::take(&mut *lock(shard));
            self.entries.fetch_sub(taken.len(), Ordering::Relaxed);
            out.extend(taken.into_values());
        }
        (out, self.dropped.swap(0, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_poll_of_each_instance_is_kept() {
        let log = PollLog::new();
        let (a, b) = (HeaderValue::from_static("a"), HeaderValue::from_static("b"));
        log.record("app", "i-1", "", &a, 1, 10);
        log.record("app", "i-1", "", &b, 2, 20);
        log.record("app", "i-2", "", &a, 1, 15);
        let (mut entries, dropped) = log.take();
        entries.sort_by(|x, y| x.instance.cmp(&y.instance));
        assert_eq!(dropped, 0);
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].etag.clone(), entries[0].version), (b, 2));
        assert!(
            entries[0].at >= 20,
            "a change of ETag takes the precise time"
        );
        assert!(log.take().0.is_empty());
    }
}
