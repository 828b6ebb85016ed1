//! A batch of decided writes waiting for their commit, and the chain of uncommitted batches
//! it is committed under: what the store must check for a batch, and when the snapshot may
//! stand in for the state the batch was decided on.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::Outcome;
use crate::domain::config_state::ConfigState;
use crate::domain::event::NewEvent;
use crate::snapshot::apply_changes;
use crate::store::delivery::NewDelivery;
use crate::store::{Change, Collection, CommitCheck, Position, Rebase, REBASE_OWN_MAX};

/// Decided writes waiting for their commit.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) changes: Vec<Change>,
    pub(super) events: Vec<NewEvent>,
    /// The addon deliveries of `events` (indexes into them).
    pub(super) deliveries: Vec<NewDelivery>,
    pub(super) writers: Vec<Writer>,
    /// Writers whose decision holds the batch to the position it was made at: it writes
    /// something and may have read toggles it does not write.
    pub(super) pinned: usize,
    /// The pending state its first decision was made against (O(1) to clone), to judge
    /// whether the snapshot agrees with it (`snapshot_basis`).
    pub(super) base: Option<ConfigState>,
}

/// A writer waiting in a batch.
pub(super) struct Writer {
    pub(super) answer: oneshot::Sender<Outcome>,
    /// Whether its decision writes anything. One that does not waits for the confirmation of
    /// the state it read: a commit at the position it was decided at, or a position check.
    pub(super) writes: bool,
}

impl Batch {
    /// The toggles of a batch that may be committed by a rebase: it writes toggle records only,
    /// and every writer in it that wrote something read, of the toggle records, only those of
    /// the toggles it writes. `None` otherwise. (Writers that wrote nothing are then answered
    /// `Lost`: a rebase does not confirm what they read.)
    pub(super) fn rebase_toggles(&self) -> Option<Vec<String>> {
        if self.pinned > 0 || self.changes.is_empty() || !self.changes.iter().all(is_toggle_record)
        {
            return None;
        }
        let names: BTreeSet<&str> = self.changes.iter().map(|c| c.key.as_str()).collect();
        Some(names.into_iter().map(str::to_string).collect())
    }

    /// The snapshot's state, when the batch may be checked from there rather than from its
    /// chain's start: the snapshot is newer than that start, and agrees with the state the
    /// batch was decided on about everything the batch read (it may be committed by a rebase,
    /// so it read only its toggles and records outside the toggles). Its decisions come out
    /// the same on the snapshot's state, so other replicas' writes that its chain lacks but
    /// the snapshot holds no longer count against it: under steady writes from other
    /// replicas a chain's start falls further behind with every commit, while announcements
    /// keep the snapshot close to the store. ("Newer" compares versions only; a snapshot of
    /// another history fails the store's checks.) Writers in the batch that wrote nothing,
    /// and may have read anything, are answered `Lost` as after a rebase.
    pub(super) fn snapshot_basis(
        &self,
        chain: &Chain,
        snapshot: Arc<ConfigState>,
    ) -> Option<Arc<ConfigState>> {
        // The cheap test first: alone, a replica's snapshot is where its chain starts.
        if snapshot.version <= chain.seen.version {
            return None;
        }
        let base = self.base.as_ref()?;
        let toggles = self.rebase_toggles()?;
        base.agrees_on(&snapshot, toggles.iter().map(String::as_str))
            .then_some(snapshot)
    }

    /// The batch moved onto `snapshot` after the batch it was decided on top of lost its race:
    /// possible when it may be rebased and `snapshot` agrees with the state it was decided on
    /// about everything it read (as in `snapshot_basis`), since its decisions then come out
    /// the same there. Returns the pending state it leaves (the snapshot's state with its
    /// changes) and, taken out of it, its writers that wrote nothing (they may have read
    /// anything, the lost batch's writes too: they decide again). `None`, and the batch
    /// unchanged, otherwise.
    pub(super) fn move_onto(&mut self, snapshot: &ConfigState) -> Option<(ConfigState, Batch)> {
        let agrees = match (self.rebase_toggles(), &self.base) {
            (Some(toggles), Some(base)) => {
                base.agrees_on(snapshot, toggles.iter().map(String::as_str))
            }
            _ => false,
        };
        if !agrees {
            return None;
        }
        let mut state = snapshot.clone();
        apply_changes(&mut state, &self.changes).ok()?;
        let (writers, readers) = std::mem::take(&mut self.writers)
            .into_iter()
            .partition(|writer| writer.writes);
        self.writers = writers;
        self.base = Some(snapshot.clone());
        let readers = Batch {
            writers: readers,
            ..Batch::default()
        };
        Some((state, readers))
    }

    /// Answers every writer with `outcome(writes)`.
    pub(super) fn answer(self, outcome: impl Fn(bool) -> Outcome) {
        for writer in self.writers {
            // A writer that went away (its request was dropped) needs no answer.
            let _ = writer.answer.send(outcome(writer.writes));
        }
    }
}

/// What the pending state holds of the store: every write up to `seen`, and this replica's
/// commits since (`own`, non-empty only after a commit the state does not fully hold: rebased,
/// or checked from the snapshot; the state lacks the other replicas' writes between them).
/// `own` stops growing at `REBASE_OWN_MAX`: the chain can then neither be committed exactly
/// nor rebased, and only a check from the snapshot lets its batches through.
#[derive(Clone)]
pub(super) struct Chain {
    pub(super) seen: Position,
    pub(super) own: Vec<Position>,
}

impl Chain {
    pub(super) fn at(position: Position) -> Self {
        Self {
            seen: position,
            own: Vec::new(),
        }
    }

    /// The check a batch decided on this chain's state is committed under.
    pub(super) fn check(&self, batch: &Batch) -> CommitCheck {
        let exact = self.own.is_empty();
        let rebase = batch
            .rebase_toggles()
            .filter(|_| self.own.len() < REBASE_OWN_MAX)
            .map(|toggles| Rebase {
                seen: self.seen,
                own: self.own.clone(),
                toggles,
            });
        CommitCheck {
            expected: exact.then_some(self.seen),
            rebase,
        }
    }

    /// The chain after its batch committed at `position` (`apart`: see `Chain`).
    pub(super) fn committed(&mut self, position: Position, apart: bool) {
        if apart || !self.own.is_empty() {
            // Past the limit the list is never read (see `check`): it must not grow while
            // the committer never idles.
            if self.own.len() < REBASE_OWN_MAX {
                self.own.push(position);
            }
        } else {
            self.seen = position;
        }
    }
}

/// Whether a record belongs to a toggle (active or archived).
fn is_toggle_record(change: &Change) -> bool {
    matches!(
        change.collection,
        Collection::Features | Collection::Archive
    )
}
