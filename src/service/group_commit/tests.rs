//! Unit tests of the group commit's judgement of batches against the snapshot.

use super::*;
use crate::store::{Collection, REBASE_OWN_MAX};

fn put(collection: Collection, key: &str, value: &str) -> Change {
    Change {
        collection,
        key: key.to_string(),
        value: Some(value.to_string()),
    }
}

fn toggle(name: &str, description: &str) -> Change {
    put(
        Collection::Features,
        name,
        &format!(
            r#"{{"name":"{name}","description":"{description}","type":"release","project":"default","enabled":true,"stale":false,"strategies":[],"createdAt":"2026-01-01T00:00:00Z"}}"#
        ),
    )
}

/// `changes` applied to `state`, at `version`.
fn after(state: &ConfigState, version: u64, changes: &[Change]) -> Arc<ConfigState> {
    let mut next = state.clone();
    apply_changes(&mut next, changes).expect("changes apply");
    next.version = version;
    next.head = version * 10;
    Arc::new(next)
}

/// A batch of one writer, decided on `base`, writing `changes`.
fn batch(base: &ConfigState, changes: Vec<Change>) -> Batch {
    let (answer, _) = oneshot::channel();
    Batch {
        changes,
        writers: vec![Writer {
            answer,
            writes: true,
        }],
        base: Some(base.clone()),
        ..Batch::default()
    }
}

/// The chain starts at version 1 (toggles `a` and `b`), a batch decided there writes
/// `batch_changes`, and the snapshot is at version 3 after `others` (other replicas'
/// writes): where the batch is checked from, if not from its chain.
fn judged(others: &[Change], batch_changes: Vec<Change>) -> Option<Position> {
    let start = after(
        &ConfigState::default(),
        1,
        &[toggle("a", "0"), toggle("b", "0")],
    );
    let chain = Chain::at(position_of(&start));
    let snapshot = after(&start, 3, others);
    batch(&start, batch_changes)
        .snapshot_basis(&chain, snapshot)
        .map(|state| position_of(&state))
}

#[test]
fn a_batch_is_checked_from_the_snapshot_when_it_agrees_on_what_the_batch_read() {
    let at_three = Some(Position {
        version: 3,
        head: 30,
    });
    // Another replica wrote another toggle: the batch comes out the same on the snapshot.
    assert_eq!(
        judged(&[toggle("b", "1")], vec![toggle("a", "1")]),
        at_three
    );
    // ... or wrote the batch's toggle to what the batch read.
    assert_eq!(
        judged(&[toggle("a", "0")], vec![toggle("a", "1")]),
        at_three
    );
    // Another replica changed the batch's toggle: the chain's check (and the store) decide.
    assert_eq!(judged(&[toggle("a", "2")], vec![toggle("a", "1")]), None);
    // ... or archived it.
    let mut archived = toggle("a", "0");
    archived.collection = Collection::Archive;
    assert_eq!(judged(&[archived], vec![toggle("a", "1")]), None);
    // ... or changed a record outside the toggles, which any decision may have read.
    let project = put(
        Collection::Projects,
        "p",
        r#"{"id":"p","name":"P","createdAt":"2026-01-01T00:00:00Z"}"#,
    );
    assert_eq!(judged(&[project], vec![toggle("a", "1")]), None);
    // A batch that is not a toggle-only write is never rebased, so never judged apart.
    let counter = put(Collection::Counters, "tag", "1");
    assert_eq!(
        judged(&[toggle("b", "1")], vec![toggle("a", "1"), counter]),
        None
    );
}

#[test]
fn a_batch_of_several_writers_is_judged_on_every_toggle_it_wrote() {
    let start = after(
        &ConfigState::default(),
        1,
        &[toggle("a", "0"), toggle("b", "0")],
    );
    let chain = Chain::at(position_of(&start));
    let mut two = batch(&start, vec![toggle("a", "1"), toggle("b", "1")]);
    let (answer, _) = oneshot::channel();
    two.writers.push(Writer {
        answer,
        writes: true,
    });
    // Another replica wrote the second writer's toggle.
    let snapshot = after(&start, 2, &[toggle("b", "2")]);
    assert!(two.snapshot_basis(&chain, snapshot).is_none());
    // A writer whose decision read more than its toggles pins the batch to its chain.
    two.pinned = 1;
    let snapshot = after(&start, 2, &[toggle("c", "2")]);
    assert!(two.snapshot_basis(&chain, snapshot).is_none());
}

#[test]
fn a_batch_decided_on_top_of_a_lost_one_goes_on_when_the_snapshot_agrees() {
    let start = after(
        &ConfigState::default(),
        1,
        &[toggle("a", "0"), toggle("b", "0")],
    );
    // The lost batch wrote `a`; the open batch was decided on top of it.
    let on_top = after(&start, 1, &[toggle("a", "lost")]);
    // Meanwhile another replica wrote `a` (why the batch lost).
    let snapshot = after(&start, 2, &[toggle("a", "2")]);

    let mut open = batch(&on_top, vec![toggle("b", "1")]);
    let (answer, _) = oneshot::channel();
    open.writers.push(Writer {
        answer,
        writes: false,
    });
    let (state, readers) = open.move_onto(&snapshot).expect("goes on");
    assert_eq!(open.writers.len(), 1);
    assert!(open.writers[0].writes);
    // The one that wrote nothing may have read the lost write: it decides again.
    assert_eq!(readers.writers.len(), 1);
    assert_eq!(position_of(&state), position_of(&snapshot));
    assert_eq!(state.features["a"].description.as_str(), "2");
    assert_eq!(state.features["b"].description.as_str(), "1");

    // A batch that read the lost batch's toggle decides again, though no other replica wrote
    // it: what the batch read was never committed.
    let others_elsewhere = after(&start, 2, &[toggle("c", "2")]);
    let mut open = batch(&on_top, vec![toggle("a", "1")]);
    assert!(open.move_onto(&others_elsewhere).is_none());
    assert_eq!(open.writers.len(), 1);
    assert_eq!(open.changes.len(), 1);
    // So does one on top of a lost batch that wrote outside the toggles.
    let project = put(
        Collection::Projects,
        "p",
        r#"{"id":"p","name":"P","createdAt":"2026-01-01T00:00:00Z"}"#,
    );
    let on_top = after(&start, 1, &[project]);
    let mut open = batch(&on_top, vec![toggle("b", "1")]);
    assert!(open.move_onto(&snapshot).is_none());
}

#[test]
fn a_chain_committed_apart_forever_stays_bounded_and_unrebasable() {
    let start = after(&ConfigState::default(), 1, &[toggle("a", "0")]);
    let mut chain = Chain::at(position_of(&start));
    for version in 2..1_000 {
        chain.committed(
            Position {
                version,
                head: version,
            },
            true,
        );
    }
    assert_eq!(chain.own.len(), REBASE_OWN_MAX);
    let check = chain.check(&batch(&start, vec![toggle("a", "1")]));
    assert!(check.expected.is_none() && check.rebase.is_none());
}

#[test]
fn a_snapshot_no_newer_than_the_chain_start_leaves_the_chain_to_decide() {
    let start = after(&ConfigState::default(), 1, &[toggle("a", "0")]);
    let chain = Chain::at(position_of(&start));
    let same = batch(&start, vec![toggle("a", "1")]).snapshot_basis(&chain, start.clone());
    assert!(same.is_none());
    let mut older = (*start).clone();
    older.version = 0;
    let older = batch(&start, vec![toggle("a", "1")]).snapshot_basis(&chain, Arc::new(older));
    assert!(older.is_none());
}
