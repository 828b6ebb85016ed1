//! What a replica pays per configuration version for `GET /api/client/features`: the client
//! document built from scratch (every toggle serialised, every group compressed, as when a
//! replica starts) side by side with the rebuild after a one-toggle change (one piece
//! serialised, its group and the up to two after it recompressed, the rest reused), for the
//! unfiltered and a tag-filtered document, and after 100 changes at once (what one build sees
//! under a burst of writes), and the quick builds a writer waits for (a few toggles changed
//! per build, compressed only by a full build about once a second).
//! Requests themselves only pick the built bytes.
//!
//! `cargo bench --bench client_features`

use std::cell::RefCell;
use std::sync::Arc;

use chrono::Utc;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

use flagpole::domain::config_state::ConfigState;
use flagpole::domain::environment::{only_default, FeatureEnvironment};
use flagpole::domain::filter::FeatureFilter;
use flagpole::domain::tag::TagRef;
use flagpole::domain::toggle::{
    Constraint, Operator, Parameters, Strategy, Toggle, Variant, WeightType,
};
use flagpole::snapshot::client_document::{
    build_filtered, ClientDocuments, DocumentForm, Effort, PieceList,
};

/// `n` toggles shaped like the shared bench kit's: 2 strategies, some constraints and variants.
fn state_with(n: usize) -> ConfigState {
    let mut state = ConfigState::default();
    for i in 0..n {
        let name = format!("team-{}.feature-{i}", i % 8);
        let mut parameters = Parameters::new();
        parameters.insert("rollout".into(), format!("{}", i % 100).into());
        parameters.insert("stickiness".into(), "default".into());
        parameters.insert("groupId".into(), name.as_str().into());
        let constraints = if i % 3 == 0 {
            vec![Constraint {
                context_name: "environment".into(),
                operator: Operator::In,
                values: Some(vec!["production".into(), "staging".into()]),
                value: None,
                inverted: None,
                case_insensitive: None,
            }]
        } else {
            Vec::new()
        };
        let variants = if i % 3 == 1 {
            ["blue", "green"]
                .iter()
                .map(|v| Variant {
                    name: (*v).into(),
                    weight: 500,
                    weight_type: WeightType::Variable,
                    stickiness: "default".into(),
                    payload: None,
                    overrides: Vec::new(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let toggle = Toggle {
            name: name.as_str().into(),
            description: "benchmark toggle".into(),
            kind: "release".into(),
            project: "default".into(),
            stale: false,
            environments: only_default(FeatureEnvironment {
                enabled: i % 5 != 0,
                strategies: vec![
                    Strategy {
                        parameters,
                        constraints,
                        ..Strategy::named("flexibleRollout")
                    },
                    Strategy::named("default"),
                ],
                variants,
            }),
            dependencies: Vec::new(),
            impression_data: None,
            created_at: Utc::now(),
            last_seen_at: None,
            tags: vec![TagRef {
                kind: "simple".into(),
                value: format!("team-{}", i % 8).into(),
            }],
            archived_at: None,
        };
        state.features.insert(name, Arc::new(toggle));
    }
    state
}

/// `state` at the next version with `count` toggles switched, spread evenly over the names.
fn spread_changes(state: &ConfigState, count: usize) -> ConfigState {
    let mut next = state.clone();
    let step = (state.features.len() / count).max(1);
    for (name, toggle) in state.features.iter().step_by(step).take(count) {
        let mut changed = (**toggle).clone();
        let default = changed.environment_mut("default");
        default.enabled = !default.enabled;
        next.features.insert(name.clone(), Arc::new(changed));
    }
    next.version += 1;
    next
}

/// `state` at the next version with one toggle switched: the middle one (in name order) of
/// those `pick` accepts.
fn one_change(state: &ConfigState, pick: impl Fn(&Toggle) -> bool) -> ConfigState {
    let mut next = state.clone();
    let picked: Vec<_> = state.features.iter().filter(|(_, t)| pick(t)).collect();
    let (name, toggle) = picked[picked.len() / 2];
    let mut changed = (**toggle).clone();
    let default = changed.environment_mut("default");
    default.enabled = !default.enabled;
    next.features.insert(name.clone(), Arc::new(changed));
    next.version += 1;
    next
}

/// Builds alternating between two versions: every build is a rebuild after the changes
/// between them.
fn rebuilds(c: &mut Criterion, name: &str, versions: [ConfigState; 2]) {
    let documents = ClientDocuments::default();
    documents.build(&versions[0]);
    let mut next = 1;
    c.bench_function(name, |b| {
        b.iter(|| {
            documents.build(&versions[next]);
            next = 1 - next;
        })
    });
}

/// Quick builds as under thousands of writes a second: each version switches `per_build`
/// toggles at pseudo-random places, and a full build (untimed) compresses every
/// `FULL_EVERY` versions, as the builder does about once a second.
fn quick_builds(c: &mut Criterion, name: &str, state: &ConfigState, per_build: usize) {
    const FULL_EVERY: u64 = 500;
    let documents = ClientDocuments::default();
    documents.build(state);
    let names: Vec<String> = state.features.keys().cloned().collect();
    let current = RefCell::new(state.clone());
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    c.bench_function(name, |b| {
        b.iter_batched(
            || {
                let mut next = current.borrow().clone();
                for _ in 0..per_build {
                    // xorshift: the same sequence every run.
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let name = &names[(seed % names.len() as u64) as usize];
                    if let Some(toggle) = next.features.get(name) {
                        let mut changed = (**toggle).clone();
                        let default = changed.environment_mut("default");
                        default.enabled = !default.enabled;
                        next.features.insert(name.clone(), Arc::new(changed));
                    }
                }
                next.version += 1;
                if next.version.is_multiple_of(FULL_EVERY) {
                    documents.build(&current.borrow());
                }
                *current.borrow_mut() = next.clone();
                next
            },
            |next| documents.build_with(&next, Effort::Quick),
            BatchSize::SmallInput,
        )
    });
}

fn build(c: &mut Criterion) {
    let one_team =
        FeatureFilter::parse(&["simple:team-3".into()], &[], None).expect("valid filter");
    for n in [1_000, 10_000] {
        let mut state = state_with(n);
        state.version = 1;
        c.bench_function(
            &format!("from scratch: client document, {n} toggles"),
            |b| b.iter(|| ClientDocuments::default().build(&state)),
        );
        c.bench_function(
            &format!("from scratch: tag-filtered document, {n} toggles"),
            |b| {
                b.iter(|| {
                    let pieces =
                        PieceList::update(&PieceList::default(), &state, &DocumentForm::default());
                    build_filtered(&pieces, &one_team, None)
                })
            },
        );

        rebuilds(
            c,
            &format!("after one change: client document, {n} toggles"),
            [state.clone(), one_change(&state, |_| true)],
        );
        rebuilds(
            c,
            &format!("after 100 changes: client document, {n} toggles"),
            [state.clone(), spread_changes(&state, 100)],
        );
        quick_builds(
            c,
            &format!("quick build after 6 changes: client document, {n} toggles"),
            &state,
            6,
        );
        // The changed toggle is one the filter selects.
        let versions = [state.clone(), one_change(&state, |t| one_team.matches(t))];
        let pieces = versions
            .iter()
            .map(|v| PieceList::update(&PieceList::default(), v, &DocumentForm::default()))
            .collect::<Vec<_>>();
        let filtered = build_filtered(&pieces[0], &one_team, None);
        c.bench_function(
            &format!("after one change: tag-filtered document, {n} toggles"),
            |b| {
                b.iter(|| {
                    let fresh =
                        PieceList::update(&pieces[0], &versions[1], &DocumentForm::default());
                    build_filtered(&fresh, &one_team, Some(&filtered))
                })
            },
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = build
}
criterion_main!(benches);
