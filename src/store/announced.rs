//! `AnnouncedChanges`: the change sets that recent version announcements carried, so that a
//! replica brings its snapshot up to an announced version without a round trip to the change
//! log (under writes from several replicas, that read came once per commit per replica).
//!
//! The commit script announces `<version> <head> <previous head>`, followed by ` <changes>`
//! (the change set's JSON, as logged) when it is at most `ANNOUNCED_CHANGES_MAX` bytes. Each
//! set names the position it applies to, so sets are only ever applied in an unbroken chain
//! from the snapshot's own position; a set missed (a reconnect, a large commit announced
//! without its changes) breaks the chain and the replica reads the change log as before.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{Change, ChangeSet, Position, StoreError};

/// Change sets larger than this are announced without their changes: every subscriber gets
/// each announcement, and a slow one must not be cut off by Redis's pub/sub output limit.
pub const ANNOUNCED_CHANGES_MAX: usize = 16 << 10;

/// The most sets kept. A replica applies them within milliseconds; the bound only matters
/// while nothing reads them (the replica's own commits, which it installs itself).
const KEPT: usize = 64;

/// One announced change set, its JSON not yet decoded (a replica's own commits never are).
struct Announced {
    previous: Position,
    at: Position,
    changes: Arc<str>,
}

/// The change sets of the latest announcements, in the order they came.
#[derive(Default)]
pub struct AnnouncedChanges(Mutex<VecDeque<Announced>>);

impl AnnouncedChanges {
    /// Keeps the change set an announcement's `payload` carries, if any.
    pub fn record(&self, payload: &str) {
        let mut fields = payload.splitn(4, ' ');
        let (Some(version), Some(head), Some(previous_head), Some(changes)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return;
        };
        let (Ok(version), Ok(head), Ok(previous_head)) = (
            version.parse::<u64>(),
            head.parse::<u64>(),
            previous_head.parse::<u64>(),
        ) else {
            return;
        };
        let Some(previous_version) = version.checked_sub(1) else {
            return;
        };
        let announced = Announced {
            previous: Position {
                head: previous_head,
                version: previous_version,
            },
            at: Position { head, version },
            changes: Arc::from(changes),
        };
        if let Ok(mut kept) = self.0.lock() {
            if kept.len() == KEPT {
                kept.pop_front();
            }
            kept.push_back(announced);
        }
    }

    /// Forgets every kept set (the subscription was interrupted: the chain is broken anyway,
    /// and the store may have failed over to another history).
    pub fn clear(&self) {
        if let Ok(mut kept) = self.0.lock() {
            kept.clear();
        }
    }

    /// The change sets leading from `from` exactly to `to`, oldest first, each naming the one
    /// before as its predecessor, when every one of them was announced with its changes and is
    /// still kept; `None` otherwise. Sets up to `from` are dropped: the caller's snapshot is
    /// past them.
    pub fn between(
        &self,
        from: Position,
        to: Position,
    ) -> Option<Result<Vec<ChangeSet>, StoreError>> {
        if to.version <= from.version {
            return None;
        }
        let chain: Vec<(Position, Arc<str>)> = {
            let mut kept = self.0.lock().ok()?;
            while kept
                .front()
                .is_some_and(|set| set.at.version <= from.version)
            {
                kept.pop_front();
            }
            let mut last = from;
            let mut chain = Vec::new();
            for set in kept.iter() {
                // Skipped: one of another history (a failover, with the subscription kept), or
                // past a gap (then the chain never reaches `to`).
                if set.previous != last {
                    continue;
                }
                chain.push((set.at, set.changes.clone()));
                last = set.at;
                if last.version >= to.version {
                    break;
                }
            }
            if last != to {
                return None;
            }
            chain
        };
        Some(
            chain
                .into_iter()
                .map(|(at, changes)| {
                    let changes: Vec<Change> = serde_json::from_str(&changes)
                        .map_err(|e| StoreError::Corrupt(format!("announced change set: {e}")))?;
                    Ok(ChangeSet {
                        version: at.version,
                        head: at.head,
                        changes,
                    })
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Collection;

    fn at(version: u64) -> Position {
        Position {
            head: 1000 + version,
            version,
        }
    }

    fn payload(version: u64, key: &str) -> String {
        let changes = serde_json::to_string(&[Change {
            collection: Collection::Features,
            key: key.to_string(),
            value: Some("{}".to_string()),
        }])
        .unwrap();
        format!(
            "{version} {} {} {changes}",
            1000 + version,
            1000 + version - 1
        )
    }

    fn versions(sets: Option<Result<Vec<ChangeSet>, StoreError>>) -> Option<Vec<u64>> {
        sets.map(|sets| sets.unwrap().iter().map(|set| set.version).collect())
    }

    #[test]
    fn an_unbroken_chain_is_given_and_what_is_behind_it_dropped() {
        let announced = AnnouncedChanges::default();
        for version in 5..=9 {
            announced.record(&payload(version, "t"));
        }
        assert_eq!(versions(announced.between(at(4), at(6))), Some(vec![5, 6]));
        assert_eq!(
            versions(announced.between(at(6), at(9))),
            Some(vec![7, 8, 9])
        );
        // The sets up to 6 went with the last call.
        assert!(announced.between(at(4), at(6)).is_none());
        let set = announced.between(at(8), at(9)).unwrap().unwrap();
        assert_eq!(set[0].head, 1009);
        assert_eq!(set[0].changes[0].key, "t");
    }

    #[test]
    fn a_gap_another_history_or_a_set_without_changes_gives_nothing() {
        let announced = AnnouncedChanges::default();
        announced.record(&payload(5, "t"));
        announced.record(&payload(7, "t"));
        assert!(announced.between(at(4), at(7)).is_none(), "6 is missing");
        // Announced without its changes (too large), or by an older release: not kept.
        announced.record("6 1006 1005");
        announced.record("6 1006");
        assert!(announced.between(at(5), at(6)).is_none());
        // The same version in another history (other head).
        let other = Position {
            head: 77,
            version: 7,
        };
        assert!(announced.between(at(6), other).is_none());
        announced.clear();
        assert!(announced.between(at(4), at(5)).is_none());
    }

    #[test]
    fn a_set_of_another_history_is_passed_over() {
        let announced = AnnouncedChanges::default();
        announced.record(&payload(5, "t"));
        // Version 6 of a history that lost version 5 (another predecessor), then ours.
        announced.record("6 77 66 []");
        announced.record(&payload(6, "t"));
        assert_eq!(versions(announced.between(at(4), at(6))), Some(vec![5, 6]));
    }

    #[test]
    fn at_most_kept_sets_are_held() {
        let announced = AnnouncedChanges::default();
        for version in 1..=(KEPT as u64 + 10) {
            announced.record(&payload(version, "t"));
        }
        assert!(announced.between(at(0), at(5)).is_none());
        assert_eq!(
            versions(announced.between(at(10), at(12))),
            Some(vec![11, 12])
        );
    }

    #[test]
    fn an_unreadable_set_is_an_error() {
        let announced = AnnouncedChanges::default();
        announced.record("3 1003 1002 [not json");
        assert!(matches!(
            announced.between(at(2), at(3)),
            Some(Err(StoreError::Corrupt(_)))
        ));
    }
}
