//! Every Redis key and channel Flagpole uses, built in one place.
//!
//! All keys of one installation share the hash tag `{<prefix>}`, so the commit script (which
//! touches them together) also works on Redis Cluster.

use super::Collection;

/// Builds the keys of one installation.
#[derive(Debug, Clone)]
pub struct Keys {
    tag: String,
}

impl Keys {
    /// Keys under `prefix` (the `--key-prefix` setting).
    pub fn new(prefix: &str) -> Self {
        Self {
            tag: format!("{{{prefix}}}"),
        }
    }

    /// Hash, record key → JSON document, one per collection; no TTL; written by the commit
    /// script only.
    pub fn collection(&self, collection: Collection) -> String {
        format!("{}:{}", self.tag, collection.as_str())
    }

    /// String, integer version of the configuration; no TTL; INCR by the commit script.
    pub fn version(&self) -> String {
        format!("{}:version", self.tag)
    }

    /// String, the random id of the latest commit (see `store::Position`); SET by the commit
    /// script; no TTL.
    pub fn head(&self) -> String {
        format!("{}:head", self.tag)
    }

    /// Stream, entry id `<version>-0`, fields `head` = the commit's id and `changes` = JSON array
    /// of changes; trimmed to about
    /// `CHANGE_LOG_LENGTH` entries; appended by the commit script.
    pub fn changes(&self) -> String {
        format!("{}:changes", self.tag)
    }

    /// Stream, entry id `<event id>-0`, field `event` = JSON event record; never trimmed (the
    /// audit log); appended by the commit script.
    pub fn events(&self) -> String {
        format!("{}:events", self.tag)
    }

    /// List, the ids of the events about toggle `name`, oldest first; no TTL; RPUSH by the
    /// commit script.
    pub fn toggle_events(&self, name: &str) -> String {
        format!("{}:toggle-events:{name}", self.tag)
    }

    /// String, last assigned event id; INCR by the commit script.
    pub fn event_seq(&self) -> String {
        format!("{}:event_seq", self.tag)
    }

    /// Pub/sub channel carrying each new version number; published by the commit script.
    pub fn notify_channel(&self) -> String {
        format!("{}:notify", self.tag)
    }
}
