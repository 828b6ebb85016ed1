//! What a replica pays once per configuration version for `GET /api/client/features`:
//! serialising, gzipping and hashing the document (`snapshot::client_cache::build`), and
//! evaluating a filter over the toggles. Requests themselves only pick the built bytes.
//!
//! `cargo bench --bench client_features`

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use criterion::{criterion_group, criterion_main, Criterion};

use flagpole::domain::filter::FeatureFilter;
use flagpole::domain::state::ConfigState;
use flagpole::domain::tag::TagRef;
use flagpole::domain::toggle::{Constraint, Operator, Strategy, Toggle, Variant, WeightType};
use flagpole::snapshot::build_client_response;

/// `n` toggles shaped like the shared bench kit's: 2 strategies, some constraints and variants.
fn state_with(n: usize) -> ConfigState {
    let mut state = ConfigState::default();
    for i in 0..n {
        let name = format!("team-{}.feature-{i}", i % 8);
        let mut parameters = BTreeMap::new();
        parameters.insert("rollout".to_string(), format!("{}", i % 100));
        parameters.insert("stickiness".to_string(), "default".to_string());
        parameters.insert("groupId".to_string(), name.clone());
        let constraints = if i % 3 == 0 {
            vec![Constraint {
                context_name: "environment".into(),
                operator: Operator::In,
                values: vec!["production".into(), "staging".into()],
            }]
        } else {
            Vec::new()
        };
        let variants = if i % 3 == 1 {
            ["blue", "green"]
                .iter()
                .map(|v| Variant {
                    name: v.to_string(),
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
            name: name.clone(),
            description: "benchmark toggle".into(),
            kind: "release".into(),
            project: "default".into(),
            enabled: i % 5 != 0,
            stale: false,
            strategies: vec![
                Strategy {
                    name: "flexibleRollout".into(),
                    parameters,
                    constraints,
                },
                Strategy {
                    name: "default".into(),
                    parameters: BTreeMap::new(),
                    constraints: Vec::new(),
                },
            ],
            variants,
            created_at: Utc::now(),
            last_seen_at: None,
            tags: vec![TagRef {
                kind: "simple".into(),
                value: format!("team-{}", i % 8),
            }],
            archived_at: None,
        };
        state.features.insert(name, Arc::new(toggle));
    }
    state
}

fn build(c: &mut Criterion) {
    let all = FeatureFilter::default();
    let one_team =
        FeatureFilter::parse(&["simple:team-3".into()], &[], None).expect("valid filter");
    for n in [1_000, 10_000] {
        let state = state_with(n);
        c.bench_function(&format!("build client response, {n} toggles"), |b| {
            b.iter(|| build_client_response(&state, &all))
        });
        c.bench_function(&format!("build tag-filtered response, {n} toggles"), |b| {
            b.iter(|| build_client_response(&state, &one_team))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = build
}
criterion_main!(benches);
