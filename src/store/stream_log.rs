//! The stream log: for every committed version, which client-visible records it touched
//! (toggles by name, segments by id, environments by name). Streaming clients resume from it
//! on any replica (`Last-Event-ID` is a version): what changed since their id is read here and
//! served from the replica's snapshot.
//!
//! Every commit appends one entry, in the same atomic step as the change itself (the Redis
//! commit script, the embedded store's write transaction), so the log has no gaps: entries run
//! without a hole from the oldest kept to the store's version. It holds names only, so it can
//! be kept far longer than the change log (which holds whole records): by default 100,000
//! versions or seven days, whichever is less.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Change, Collection, StoreError};

/// How much of the stream log the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLogRetention {
    /// Versions kept (about: Redis trims whole stream nodes).
    pub max_entries: u64,
    /// Age after which an entry is dropped.
    pub max_age: Duration,
}

impl Default for StreamLogRetention {
    fn default() -> Self {
        Self {
            max_entries: 100_000,
            max_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl StreamLogRetention {
    /// The retention the settings ask for.
    pub fn from_settings(settings: &crate::config::StreamingSettings) -> Self {
        Self {
            max_entries: settings.stream_log_max_entries,
            max_age: Duration::from_secs(settings.stream_log_max_age_secs),
        }
    }
}

/// A commit touching more toggles than this is logged as touching everything (resuming past
/// it is a hydration): a large import would otherwise make one entry as large as its names.
pub const TOUCHED_NAMES_MAX: usize = 1000;

/// What one version touched of what streaming clients receive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Touched {
    /// Toggles written or deleted (active ones: archiving deletes the active record).
    #[serde(rename = "f", default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Segments written or deleted, by id.
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<String>,
    /// Environments created, changed or deleted (their clients get a hydration).
    #[serde(rename = "e", default, skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<String>,
    /// Too much to list: every client resuming past this version gets a hydration.
    #[serde(rename = "all", default, skip_serializing_if = "std::ops::Not::not")]
    pub everything: bool,
}

impl Touched {
    /// What `changes` touch.
    pub fn of(changes: &[Change]) -> Self {
        let mut touched = Touched::default();
        for change in changes {
            let list = match change.collection {
                Collection::Features => &mut touched.features,
                Collection::Segments => &mut touched.segments,
                Collection::Environments => &mut touched.environments,
                _ => continue,
            };
            if !list.contains(&change.key) {
                list.push(change.key.clone());
            }
            if list.len() > TOUCHED_NAMES_MAX {
                return Touched {
                    everything: true,
                    ..Touched::default()
                };
            }
        }
        touched
    }

    /// The entry's JSON (stored as it is).
    pub fn encode(&self) -> Result<String, StoreError> {
        serde_json::to_string(self).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    /// Reads a stored entry.
    pub fn decode(raw: &str) -> Result<Self, StoreError> {
        serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("stream log: {e}")))
    }
}

/// One stream-log entry: a version and what it touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLogEntry {
    pub version: u64,
    pub touched: Touched,
}

/// Checks that `entries` (read from the first version after `after` on, oldest first) cover
/// every version from `after + 1` to `upto` without a hole, and keeps those; `None` when
/// the log does not reach back to `after + 1` (trimmed, or not kept yet).
pub(super) fn covering(
    after: u64,
    upto: u64,
    entries: impl IntoIterator<Item = Result<StreamLogEntry, StoreError>>,
) -> Result<Option<Vec<StreamLogEntry>>, StoreError> {
    let mut out = Vec::new();
    let mut expected = after + 1;
    for entry in entries {
        let entry = entry?;
        if entry.version > upto {
            break;
        }
        if entry.version != expected {
            return Ok(None);
        }
        expected += 1;
        out.push(entry);
    }
    Ok((expected > upto).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(collection: Collection, key: &str) -> Change {
        Change {
            collection,
            key: key.into(),
            value: None,
        }
    }

    #[test]
    fn touches_name_toggles_segments_and_environments_once() {
        let touched = Touched::of(&[
            change(Collection::Features, "a"),
            change(Collection::Archive, "a"),
            change(Collection::Features, "a"),
            change(Collection::Segments, "3"),
            change(Collection::Environments, "prod"),
            change(Collection::ApiTokens, "x"),
        ]);
        assert_eq!(touched.features, ["a"]);
        assert_eq!(touched.segments, ["3"]);
        assert_eq!(touched.environments, ["prod"]);
        assert!(!touched.everything);
        let raw = touched.encode().expect("encodes");
        assert_eq!(raw, r#"{"f":["a"],"s":["3"],"e":["prod"]}"#);
        assert_eq!(Touched::decode(&raw).expect("decodes"), touched);
        assert_eq!(Touched::decode("{}").expect("empty"), Touched::default());
    }

    #[test]
    fn too_many_toggles_touch_everything() {
        let changes: Vec<Change> = (0..=TOUCHED_NAMES_MAX)
            .map(|i| change(Collection::Features, &format!("t{i}")))
            .collect();
        let touched = Touched::of(&changes);
        assert!(touched.everything && touched.features.is_empty());
    }

    #[test]
    fn coverage_needs_every_version_after_the_id() {
        let entry = |version| {
            Ok(StreamLogEntry {
                version,
                touched: Touched::default(),
            })
        };
        let versions = |r: Option<Vec<StreamLogEntry>>| {
            r.map(|v| v.iter().map(|e| e.version).collect::<Vec<_>>())
        };
        let got = covering(3, 5, [entry(4), entry(5), entry(6)]).expect("reads");
        assert_eq!(versions(got), Some(vec![4, 5]));
        // Nothing to cover.
        assert_eq!(versions(covering(5, 5, []).expect("reads")), Some(vec![]));
        // Trimmed: the log starts after the id's successor.
        assert_eq!(versions(covering(3, 5, [entry(5)]).expect("reads")), None);
        // A hole, or a log that stops short.
        assert_eq!(
            versions(covering(3, 6, [entry(4), entry(6)]).expect("reads")),
            None
        );
        assert_eq!(versions(covering(3, 6, [entry(4)]).expect("reads")), None);
    }
}
