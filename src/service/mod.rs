//! Use-cases: the only writers. Each decides, from the current snapshot, which records change
//! and which events are recorded, then commits both in one atomic store step; on a version
//! conflict it refreshes and decides again.

pub mod addons;
pub mod api_tokens;
pub mod client_import;
pub mod context_fields;
mod deliveries;
pub mod dependencies;
pub mod environments;
pub mod feature_environments;
mod group_commit;
pub mod import;
pub mod projects;
mod seed;
pub mod segments;
pub use seed::is_seeded;
pub mod startup;
pub mod strategies;
pub mod tags;
pub mod toggles;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use crate::domain::config_state::ConfigState;
use crate::domain::event::{Event, EventKind, NewEvent};
use crate::domain::segment::SegmentLimits;
use crate::domain::tag::TagRef;
use crate::domain::{DomainError, ValidationErrors};
use crate::snapshot::Snapshot;
use crate::store::{Change, Collection, Store, StoreError};
use crate::telemetry::metrics::Metrics;

use group_commit::{DecideError, Decision, GroupCommit, Outcome, Target};

/// How often a write is decided again after its batch lost a race with another replica.
pub const COMMIT_ATTEMPTS: usize = 12;

/// Why a use-case failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Other writers kept winning the race for every attempt.
    #[error("too many concurrent writes; try again")]
    Contention,
    /// The replica has not loaded the configuration yet.
    #[error("configuration not loaded yet")]
    NotReady,
    /// A fault of ours (a task that panicked).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Who is acting (the `createdBy` of events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

/// The writes and events one decision produces, plus what the use-case returns.
pub struct Plan<T> {
    changes: Vec<Change>,
    events: Vec<NewEvent>,
    now: DateTime<Utc>,
    output: T,
    reads_only_its_toggles: bool,
}

impl<T> Plan<T> {
    /// An empty plan returning `output`.
    pub fn new(now: DateTime<Utc>, output: T) -> Self {
        Self {
            changes: Vec::new(),
            events: Vec::new(),
            now,
            output,
            reads_only_its_toggles: false,
        }
    }

    /// Declares that the decision read, of the toggle records, only those of the toggles it
    /// writes (records of other collections it may read freely). Its batch may then be
    /// committed on top of other replicas' writes to other toggles without deciding again
    /// (`store::Rebase`); undeclared decisions are always committed at the position they were
    /// made at.
    pub fn reads_only_its_toggles(&mut self) {
        self.reads_only_its_toggles = true;
    }

    fn into_parts(self) -> (Decision, T) {
        let decision = Decision {
            changes: self.changes,
            events: self.events,
            reads_only_its_toggles: self.reads_only_its_toggles,
        };
        (decision, self.output)
    }

    /// The same plan returning `output` instead.
    pub fn with_output<U>(self, output: U) -> Plan<U> {
        Plan {
            changes: self.changes,
            events: self.events,
            now: self.now,
            output,
            reads_only_its_toggles: self.reads_only_its_toggles,
        }
    }

    /// Writes `record` under `key`.
    pub fn put(
        &mut self,
        collection: Collection,
        key: &str,
        record: &impl Serialize,
    ) -> Result<(), DomainError> {
        // Only a map with non-string keys fails to serialise; our records have none.
        let mut value = serde_json::to_string(record)
            .map_err(|e| ValidationErrors::single("", format!("unserialisable record: {e}")))?;
        // Serialising doubles the buffer as it grows: an import holds ten thousand records
        // until its commit, so only their bytes are kept.
        value.shrink_to_fit();
        self.changes.push(Change {
            collection,
            key: key.to_string(),
            value: Some(value),
        });
        Ok(())
    }

    /// Deletes the record `key`.
    pub fn delete(&mut self, collection: Collection, key: &str) {
        self.changes.push(Change {
            collection,
            key: key.to_string(),
            value: None,
        });
    }

    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.events.is_empty()
    }

    /// Records an event in the same commit.
    pub fn event(&mut self, kind: EventKind, actor: &Actor, data: Value, tags: Vec<TagRef>) {
        self.events
            .push(NewEvent::new(kind, actor.0.clone(), self.now, &data, tags));
    }
}

/// The use-cases over one store and this replica's snapshot. One pointer: handlers take a
/// clone per request.
#[derive(Clone)]
pub struct Service(Arc<ServiceParts>);

/// What a `Service` works with.
pub struct ServiceParts {
    store: Store,
    snapshot: Arc<Snapshot>,
    metrics: Arc<Metrics>,
    writes: Arc<GroupCommit>,
    segment_limits: SegmentLimits,
}

impl std::ops::Deref for Service {
    type Target = ServiceParts;

    fn deref(&self) -> &ServiceParts {
        &self.0
    }
}

impl Service {
    /// Use-cases writing to `store` and reading `snapshot`; commits are timed in `metrics`.
    pub fn new(store: Store, snapshot: Arc<Snapshot>, metrics: Arc<Metrics>) -> Self {
        Self(Arc::new(ServiceParts {
            store,
            snapshot,
            metrics,
            writes: Arc::new(GroupCommit::default()),
            segment_limits: SegmentLimits::default(),
        }))
    }

    /// The same use-cases enforcing `limits` on segments (the settings' rather than Unleash's
    /// defaults).
    pub fn with_segment_limits(self, limits: SegmentLimits) -> Self {
        Self(Arc::new(ServiceParts {
            store: self.store.clone(),
            snapshot: self.snapshot.clone(),
            metrics: self.metrics.clone(),
            writes: self.writes.clone(),
            segment_limits: limits,
        }))
    }

    /// The limits on segments this service enforces (for `segment::check_strategy_segments`).
    pub fn segment_limits(&self) -> &SegmentLimits {
        &self.segment_limits
    }

    /// The current configuration, or `NotReady` before the first load and seeding.
    pub fn state(&self) -> Result<Arc<ConfigState>, ServiceError> {
        if self.snapshot.is_ready() {
            Ok(self.snapshot.state())
        } else {
            Err(ServiceError::NotReady)
        }
    }

    /// Decides with `decide` against the current state and commits the plan atomically,
    /// re-deciding after a conflict. Returns the plan's output once this replica's snapshot
    /// holds the write.
    pub async fn write<T>(
        &self,
        decide: impl Fn(&ConfigState, DateTime<Utc>) -> Result<Plan<T>, DomainError>,
    ) -> Result<T, ServiceError> {
        self.state()?;
        self.write_loaded(decide).await
    }

    /// `write` without the readiness check, for seeding a freshly loaded snapshot.
    async fn write_loaded<T>(
        &self,
        decide: impl Fn(&ConfigState, DateTime<Utc>) -> Result<Plan<T>, DomainError>,
    ) -> Result<T, ServiceError> {
        let target = Target {
            store: self.store.clone(),
            snapshot: self.snapshot.clone(),
            metrics: self.metrics.clone(),
        };
        // After a lost race, the snapshot was refreshed from the store during this request.
        let mut refreshed = false;
        for attempt in 0..COMMIT_ATTEMPTS {
            if !self.snapshot.is_loaded() {
                return Err(ServiceError::NotReady);
            }
            let now = Utc::now();
            let mut result = None;
            let decided = self.writes.decide(&self.snapshot, refreshed, |state| {
                match decide(state, now) {
                    Ok(plan) => {
                        let (decision, output) = plan.into_parts();
                        result = Some(Ok(output));
                        decision
                    }
                    Err(e) => {
                        result = Some(Err(ServiceError::Domain(e)));
                        Decision::default()
                    }
                }
            });
            let decided = match decided {
                Ok(decided) => decided,
                Err(DecideError::Store(e)) => return Err(ServiceError::Store(e)),
                Err(DecideError::Busy) => {
                    // The batch is full: let the committer take it out, then decide again.
                    self.writes.start_committer(&target);
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    continue;
                }
            };
            let writes = decided.writes;
            // The request's view of its commit: it waits for the batch that carries it.
            let span = tracing::debug_span!(
                "store.commit",
                attempt = attempt + 1,
                writes,
                outcome = tracing::field::Empty
            );
            let outcome = self
                .writes
                .commit(&target, decided)
                .instrument(span.clone())
                .await;
            span.record(
                "outcome",
                match &outcome {
                    Outcome::Committed => "committed",
                    Outcome::Lost => "lost",
                    Outcome::Failed(_) => "failed",
                },
            );
            match outcome {
                Outcome::Committed => {
                    if writes {
                        self.metrics.writes.committed(attempt + 1);
                    }
                    let result = result.unwrap_or(Err(ServiceError::Contention));
                    // Acknowledged only once the client API serves it (and what this writer
                    // saw: a no-op answers for the state it found).
                    if result.is_ok() {
                        self.snapshot.client_documents_current().await;
                    }
                    return result;
                }
                Outcome::Lost => {
                    refreshed = true;
                    self.metrics.writes.conflict();
                    // Back off a little (growing, jittered) so racing replicas spread out.
                    if attempt > 0 {
                        tokio::time::sleep(conflict_backoff(attempt)).await;
                    }
                }
                Outcome::Failed(e) => return Err(ServiceError::Store(e)),
            }
        }
        self.metrics.writes.gave_up();
        Err(ServiceError::Contention)
    }

    /// Recorded events, newest first.
    pub async fn events(
        &self,
        limit: usize,
        toggle: Option<&str>,
    ) -> Result<Vec<Event>, ServiceError> {
        Ok(self.store.events(limit, toggle).await?)
    }

    /// Writes the built-in strategies and tag type into a store that has never had them
    /// (new, or emptied).
    pub async fn seed_if_needed(&self) -> Result<(), ServiceError> {
        seed::seed_if_needed(self).await
    }
}

/// Up to 2^attempt milliseconds, jittered, capped at 100 ms.
fn conflict_backoff(attempt: usize) -> std::time::Duration {
    let ceiling = (1u64 << attempt.min(6)).min(100);
    let jitter = crate::store::random_id() % (ceiling + 1);
    std::time::Duration::from_millis(jitter)
}

/// Serialises a domain value into event data (plain data, cannot fail in practice).
pub(crate) fn event_data(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The data of an event about a write to a toggle through the 3.x API: the toggle as it is in
/// `default`, in the record shape events have always had (addon templates read it).
pub(crate) fn toggle_event_data(toggle: &crate::domain::toggle::Toggle) -> Value {
    event_data(&crate::domain::views::ToggleRecord::new(
        toggle,
        crate::domain::environment::DEFAULT_ENVIRONMENT,
    ))
}
