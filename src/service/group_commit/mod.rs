//! `GroupCommit`: the writes of one replica decided one after the other and committed in
//! batches.
//!
//! Writers decide against a *pending* state: the snapshot plus every change decided but not
//! yet committed, so a batch never holds two decisions that contradict each other (two
//! creates of one name, say). One committer task at a time commits everything decided so far
//! in one store commit (one round trip, one fsync), applies it to the snapshot and answers
//! all its writers, and goes on while decisions keep coming. Writers on one replica therefore
//! never race each other; races are left to replicas, and the store settles them. A batch
//! whose writes touch only toggles is committed on top of other replicas' writes when those
//! touched neither its toggles nor anything else (`store::Rebase`, checked inside the
//! store's commit); the batches decided on top of it then follow on the same terms. Such a
//! batch is checked from the snapshot's position instead of its chain's start when the
//! snapshot is newer and agrees with the state the batch was decided on about everything it
//! read (`Batch::snapshot_basis`): the chain's start falls behind with every commit while
//! other replicas write, the snapshot does not. A batch that loses a race is decided again by
//! its writers; the batch decided on top of it goes on from the refreshed snapshot when that
//! agrees with it the same way (`Batch::move_onto`), and is decided again otherwise.
//!
//! A decision that writes nothing (a no-op, or a refusal such as "not found") is answered
//! only once the state it saw is confirmed as well: with the batch it was decided on, or by
//! a position check of the store. A replica that has not seen another replica's write yet
//! therefore never answers from the older state.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::domain::config_state::ConfigState;
use crate::domain::event::NewEvent;
use crate::snapshot::{apply_changes, position_of, Snapshot};
use crate::store::delivery::NewDelivery;
use crate::store::{Change, CommitOutcome, Position, Store, StoreError};
use crate::telemetry::metrics::Metrics;

mod batch;

use batch::{Batch, Chain, Writer};

/// A replica whose last this many commits met no other replica's write writes alone.
const ALONE_AFTER: u32 = 16;

/// At most this many writes go into one commit (bounds one commit's size and time).
const MAX_BATCH: usize = 256;

/// What a writer decided: the records and events it writes (possibly none).
#[derive(Debug, Default)]
pub struct Decision {
    pub changes: Vec<Change>,
    pub events: Vec<NewEvent>,
    /// See `Plan::reads_only_its_toggles`.
    pub reads_only_its_toggles: bool,
}

/// What happened to a decided write.
#[derive(Debug)]
pub enum Outcome {
    /// Committed and applied to the snapshot.
    Committed,
    /// Its batch (or the one it was decided on top of, unless its batch could go on from the
    /// snapshot, see `Batch::move_onto`) lost the race with another replica: decide again.
    Lost,
    /// The store failed; the write may or may not have been written.
    Failed(StoreError),
}

/// The pending state and the batch being filled.
#[derive(Default)]
struct Pending {
    /// The state the next decision is made against, and what it holds of the store (its chain
    /// of uncommitted batches starts there). `None`: start again from the snapshot.
    state: Option<(Chain, ConfigState)>,
    /// Decided, not yet taken by a committer.
    open: Batch,
    /// A batch is being committed.
    committing: bool,
}

/// The replica's write pipeline (see the module documentation).
#[derive(Default)]
pub struct GroupCommit {
    pending: Mutex<Pending>,
    /// A committer task runs (or is about to): one store commit at a time per replica.
    committer: AtomicBool,
    /// Commits in a row that met no other replica's write (were neither rebased nor lost).
    alone_for: AtomicU32,
}

/// Where batches are committed, applied and timed.
#[derive(Clone)]
pub struct Target {
    pub store: Store,
    pub snapshot: Arc<Snapshot>,
    pub metrics: Arc<Metrics>,
}

/// Lowers the committer flag when the committer task ends, however it ends.
struct CommitterRunning<'a>(&'a AtomicBool);

impl Drop for CommitterRunning<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(false, Ordering::Release);
        }
    }
}

/// Starts afresh unless disarmed: a commit that never finished leaves nothing decided on top
/// of it (those writers decide again).
struct ResetOnDrop<'a>(Option<&'a GroupCommit>);

impl Drop for ResetOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            group.start_afresh();
        }
    }
}

/// A decision waiting for its commit (or, when it writes nothing, for the confirmation of
/// the state it was made against).
pub struct Decided {
    /// `None`: nothing to wait for (see `GroupCommit::decide`).
    receiver: Option<oneshot::Receiver<Outcome>>,
    /// Whether the decision writes anything.
    pub writes: bool,
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        match self.pending.lock() {
            Ok(pending) => pending,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Runs `decide` against the pending state and queues what it returns (changes and
    /// events, possibly none) for the next commit. With `snapshot_is_current` (the snapshot
    /// was refreshed from the store since the request began), a decision that writes nothing
    /// against a state with nothing pending needs no confirmation: it is answered at once.
    pub fn decide(
        &self,
        snapshot: &Snapshot,
        snapshot_is_current: bool,
        decide: impl FnOnce(&ConfigState) -> Decision,
    ) -> Result<Decided, DecideError> {
        let mut pending = self.lock();
        let idle = !pending.committing && pending.open.writers.is_empty();
        if idle || pending.state.is_none() {
            let state = snapshot.state();
            pending.state = Some((Chain::at(position_of(&state)), (*state).clone()));
        }
        if pending.open.writers.len() >= MAX_BATCH {
            return Err(DecideError::Busy);
        }
        let Pending {
            state,
            open,
            committing,
        } = &mut *pending;
        let Some((_, state)) = state.as_mut() else {
            return Err(DecideError::Busy);
        };
        let base = open.writers.is_empty().then(|| state.clone());
        let Decision {
            changes,
            events,
            reads_only_its_toggles,
        } = decide(state);
        let writes = !(changes.is_empty() && events.is_empty());
        let clean = !*committing && open.writers.is_empty();
        if !writes && clean && snapshot_is_current {
            return Ok(Decided {
                receiver: None,
                writes,
            });
        }
        if !changes.is_empty() {
            let mut next = state.clone();
            apply_changes(&mut next, &changes).map_err(DecideError::Store)?;
            *state = next;
        }
        // Each event goes to the addons subscribed to it in the state it leads to, its
        // delivery traced as part of this write.
        let mut traceparent = None;
        for (i, event) in events.iter().enumerate() {
            let kind = event.kind_name();
            for addon in state.addons_subscribed_to(&kind) {
                let traceparent = traceparent
                    .get_or_insert_with(crate::telemetry::traces::current_traceparent)
                    .clone();
                open.deliveries.push(NewDelivery {
                    event: open.events.len() + i,
                    addon,
                    traceparent,
                });
            }
        }
        let (sender, receiver) = oneshot::channel();
        if base.is_some() {
            open.base = base;
        }
        open.changes.extend(changes);
        open.events.extend(events);
        open.writers.push(Writer {
            answer: sender,
            writes,
        });
        open.pinned += usize::from(writes && !reads_only_its_toggles);
        Ok(Decided {
            receiver: Some(receiver),
            writes,
        })
    }

    /// Waits for `decided` to be committed. Commits run in a committer task, so a writer whose
    /// request is dropped cannot drop a batch that other writers wait on.
    pub async fn commit(self: &Arc<Self>, target: &Target, decided: Decided) -> Outcome {
        let Decided { receiver, .. } = decided;
        let Some(receiver) = receiver else {
            return Outcome::Committed;
        };
        self.start_committer(target);
        receiver.await.unwrap_or_else(|_| {
            Outcome::Failed(StoreError::Unavailable("the commit was interrupted".into()))
        })
    }

    /// Starts the committer task unless it runs: it commits the open batch, and again while
    /// decisions keep coming.
    pub fn start_committer(self: &Arc<Self>, target: &Target) {
        if self.committer.swap(true, Ordering::AcqRel) {
            return;
        }
        let group = self.clone();
        let target = target.clone();
        tokio::spawn(async move {
            // Should the task end half way (a panic), the next decision starts another.
            let _running = CommitterRunning(&group.committer);
            loop {
                // While other replicas write too, commits carry few writes each and every
                // commit costs each replica a refresh: let requests already in hand decide
                // first and join this batch. (Alone, a replica's batches are full enough, and
                // measured, the yield cost it throughput.)
                if group.alone_for.load(Ordering::Relaxed) < ALONE_AFTER {
                    tokio::task::yield_now().await;
                }
                group.commit_open_batch(&target).await;
                group.committer.store(false, Ordering::Release);
                // A decision queued after the batch was taken, before the flag fell, would
                // wait for nobody: take it on, unless its writer started a committer itself.
                let idle = group.lock().open.writers.is_empty();
                if idle || group.committer.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        });
    }

    /// Drops the pending state: the next decision starts from the snapshot, and whatever was
    /// decided on top of the old state is decided again.
    fn start_afresh(&self) {
        let stale = {
            let mut pending = self.lock();
            pending.committing = false;
            pending.state = None;
            std::mem::take(&mut pending.open)
        };
        stale.answer(|_| Outcome::Lost);
    }

    /// After a lost race: the open batch, decided on top of the lost one, goes on from the
    /// snapshot when it can (`Batch::move_onto`), so its writers need not decide again; otherwise
    /// as `start_afresh`. Returns whether a batch went on.
    fn start_again_from(&self, snapshot: &ConfigState) -> bool {
        let (carried, lost) = {
            let mut pending = self.lock();
            pending.committing = false;
            let mut open = std::mem::take(&mut pending.open);
            match open.move_onto(snapshot) {
                Some((state, readers)) => {
                    pending.state = Some((Chain::at(position_of(&state)), state));
                    pending.open = open;
                    (true, readers)
                }
                None => {
                    pending.state = None;
                    (false, open)
                }
            }
        };
        lost.answer(|_| Outcome::Lost);
        carried
    }

    /// Commits the open batch (only the committer task calls this).
    async fn commit_open_batch(&self, target: &Target) {
        let Target {
            store,
            snapshot,
            metrics,
        } = target;
        let (mut batch, chain, committed_state) = {
            let mut pending = self.lock();
            // The pending state now holds exactly the chain and this batch (O(1) to copy).
            let Some((chain, state)) = pending.state.clone() else {
                return;
            };
            pending.committing = true;
            (std::mem::take(&mut pending.open), chain, state)
        };
        if batch.writers.is_empty() {
            self.lock().committing = false;
            return;
        }
        // Should this commit stop half way (a panic), start the next decisions afresh.
        let mut reset = ResetOnDrop(Some(self));
        let basis = batch.snapshot_basis(&chain, snapshot.state());
        let check = match &basis {
            Some(state) => Chain::at(position_of(state)).check(&batch),
            None => chain.check(&batch),
        };
        let writes_nothing = batch.changes.is_empty() && batch.events.is_empty();
        // Shared with the store's commit rather than copied for it.
        let changes: Arc<[Change]> = std::mem::take(&mut batch.changes).into();
        let events: Arc<[NewEvent]> = std::mem::take(&mut batch.events).into();
        let committed = match &check.expected {
            // Decided on a state that lacks other replicas' writes, and not committable by a
            // rebase: lost without asking the store.
            None if check.rebase.is_none() => Ok(None),
            // Only decisions that write nothing (never rebased): confirm the state they saw.
            Some(expected) if writes_nothing => {
                let position = metrics.usage.timed("position", store.position()).await;
                position.map(|current| {
                    Some(match current == *expected {
                        true => CommitOutcome::Committed {
                            position: current,
                            previous: current,
                            rebased: false,
                        },
                        false => CommitOutcome::Conflict { current },
                    })
                })
            }
            _ => {
                let commit = store.commit(&check, &changes, &events, &batch.deliveries);
                metrics.usage.timed("commit", commit).await.map(Some)
            }
        };
        let outcome = match committed {
            Ok(Some(CommitOutcome::Committed {
                position,
                previous,
                rebased,
            })) => {
                if rebased {
                    metrics.writes.rebased();
                }
                if basis.is_some() {
                    metrics.writes.checked_from_snapshot();
                }
                // Checked from the snapshot: the pending state lacks writes the store has,
                // as after a rebase.
                let apart = rebased || basis.is_some();
                if apart {
                    self.alone_for.store(0, Ordering::Relaxed);
                } else if self.alone_for.load(Ordering::Relaxed) < ALONE_AFTER {
                    self.alone_for.fetch_add(1, Ordering::Relaxed);
                }
                // Where the commit started and the state it made, when this replica has that
                // state without asking the store.
                let known = match (rebased, &basis) {
                    (true, _) => None,
                    (false, Some(state)) => {
                        let mut next = (**state).clone();
                        apply_changes(&mut next, &changes)
                            .ok()
                            .map(|()| (position_of(state), next))
                    }
                    (false, None) => chain
                        .own
                        .is_empty()
                        .then_some((chain.seen, committed_state)),
                };
                match known {
                    // Confirmed, nothing written.
                    Some((from, _)) if position == from => {}
                    Some((from, state)) => {
                        if let Err(e) = snapshot.apply_commit(from, position, state).await {
                            // The write is durable; the snapshot catches up on its next refresh.
                            tracing::warn!(error = %e, "snapshot update after commit failed");
                        }
                    }
                    None => {
                        if !snapshot
                            .apply_rebased_commit(previous, position, &changes)
                            .await
                        {
                            catch_up_after_rebase(snapshot, position).await
                        }
                    }
                }
                let mut pending = self.lock();
                pending.committing = false;
                // What was decided meanwhile sits on top of this commit.
                if let Some((chain, _)) = pending.state.as_mut() {
                    chain.committed(position, apart);
                }
                Ok(apart)
            }
            Ok(lost) => {
                self.alone_for.store(0, Ordering::Relaxed);
                // Catch up before the writers decide again: to where the store said it was,
                // likely from the announcements already in hand, unless that is not ahead of
                // the snapshot (the store went back, or started another history). A failure
                // here shows in their next commit.
                let at = position_of(&snapshot.state());
                let caught_up = match lost {
                    Some(CommitOutcome::Conflict { current }) if current == at => Ok(()),
                    Some(CommitOutcome::Conflict { current }) if current.version > at.version => {
                        snapshot.refresh_to(current).await
                    }
                    _ => snapshot.refresh().await,
                };
                if let Err(e) = caught_up {
                    tracing::warn!(error = %e, "snapshot refresh after a lost race failed");
                }
                Err(None)
            }
            Err(e) => {
                // The commit may have been written (its reply was lost, or too few Redis
                // replicas confirmed it), and this replica skips its own announcements: look
                // at the store now rather than at the next periodic check.
                let snapshot = snapshot.clone();
                tokio::spawn(async move {
                    let _ = snapshot.check().await;
                });
                Err(Some(e))
            }
        };
        reset.0 = None;
        match outcome {
            Ok(apart) => batch.answer(|writes| match writes || !apart {
                true => Outcome::Committed,
                // Nothing written, and the state it read was not confirmed.
                false => Outcome::Lost,
            }),
            Err(None) => {
                if self.start_again_from(&snapshot.state()) {
                    metrics.writes.carried_over();
                }
                batch.answer(|_| Outcome::Lost);
            }
            Err(Some(e)) => {
                // Everything decided on top of the failed batch must be decided again: the
                // store may hold it or not.
                self.start_afresh();
                batch.answer(|_| Outcome::Failed(e.clone()));
            }
        }
    }
}

/// Brings the snapshot up to a commit made on top of other replicas' writes (the committed
/// state lacks those), or one whose state this replica could not make itself, at `position`,
/// so its writers read their write on this replica when answered. A few tries: the write is durable either way, and a snapshot still behind
/// catches up on its next refresh. (A snapshot past `position` counts as holding it, see
/// `Snapshot::holds`: after a failover that lost writes this replica already served, the
/// writers may be answered before it holds their write, until the periodic check.)
async fn catch_up_after_rebase(snapshot: &Snapshot, position: Position) {
    const TRIES: u32 = 3;
    for attempt in 1..=TRIES {
        match snapshot.refresh_to(position).await {
            Ok(()) => return,
            Err(e) if attempt == TRIES => {
                tracing::warn!(error = %e, "snapshot refresh after a rebased commit failed");
            }
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(10 * u64::from(attempt))).await
            }
        }
    }
}

/// Why a decision could not be queued.
#[derive(Debug)]
pub enum DecideError {
    /// The decided changes do not apply (a bug in the decision, or corrupt data).
    Store(StoreError),
    /// The batch is full; try again after the next commit.
    Busy,
}

#[cfg(test)]
mod tests;
