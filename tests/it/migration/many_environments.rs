//! An Unleash with more environments than `GET /api/admin/events` lists events (its last
//! 100): reading it through the route set logs one `features-exported` per environment. It
//! moves, verified; and a change made early in a later read (a context field, which the client
//! document does not show), then buried under a hundred exports, is still seen: the read is
//! refused and nothing is committed.

use serde_json::{json, Value};

use super::faults::{assert_nothing_committed, export, named, run};
use super::proxy::{Fault, Proxy};
use super::{settle, sql, text, ADMIN_TOKEN};
use crate::common::Backend;

/// Environments added to the two a fresh 7.x has.
const ADDED: usize = 120;

/// Exports that pass before the change is made: fewer than `ADDED` - 100, so that more than
/// 100 exports follow it.
const EXPORTS_BEFORE_THE_CHANGE: usize = 9;

/// `POST route` with `body` (none when null) on the Unleash at `unleash`, as its admin: the
/// answer.
async fn admin(unleash: &str, route: &str, body: Value) -> Value {
    let mut request = reqwest::Client::new()
        .post(format!("{unleash}{route}"))
        .header("Authorization", ADMIN_TOKEN);
    if !body.is_null() {
        request = request.json(&body);
    }
    let answer = request.send().await.expect("Unleash answers");
    let status = answer.status();
    let text = answer.text().await.expect("its body");
    assert!(status.is_success(), "{route}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The whole sequence against the fresh 7.x Unleash at `unleash`, whose database `unleash`
/// is on PostgreSQL's port `pg_port`.
pub(super) async fn many_environments_move_and_a_buried_change_is_seen(
    unleash: &str,
    pg_port: u16,
) {
    // The open-source 7.x API cannot create environments (Enterprise's caps them at 50 by
    // default): they go into its database, as tests/unleash/fill.js puts `default` there.
    sql(
        pg_port,
        "unleash",
        &format!(
            "INSERT INTO environments (name, type, enabled, sort_order) \
             SELECT 'env-' || lpad(g::text, 3, '0'), 'development', true, 1000 + g \
             FROM generate_series(1, {ADDED}) AS g; \
             INSERT INTO project_environments (project_id, environment_name) \
             SELECT 'default', name FROM environments ON CONFLICT DO NOTHING"
        ),
    );
    let features = "/api/admin/projects/default/features";
    admin(unleash, features, json!({"name": "wide"})).await;
    for (environment, rollout) in [("env-001", "10"), ("env-060", "60"), ("env-120", "100")] {
        let at = format!("{features}/wide/environments/{environment}");
        let strategy = json!({"name": "flexibleRollout", "parameters":
            {"rollout": rollout, "stickiness": "default", "groupId": "wide"}});
        admin(unleash, &format!("{at}/strategies"), strategy).await;
        admin(unleash, &format!("{at}/on"), Value::Null).await;
    }
    let token = json!({"tokenName": "far", "type": "client", "projects": ["*"],
                       "environment": "env-120"});
    admin(unleash, "/api/admin/api-tokens", token).await;
    settle(&reqwest::Client::new(), unleash).await;

    let backend = Backend::embedded();
    let moved = run(unleash, &backend, &[]);
    let report = format!("{}\n{}", text(&moved.stdout), text(&moved.stderr));
    assert!(moved.status.success(), "{report}");
    assert!(
        report.contains(&format!("environments {}", ADDED + 2)),
        "{report}"
    );
    assert!(report.contains("Verified"), "{report}");
    let first = export(&backend).await;
    let wide = first["featureEnvironments"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["featureName"] == "wide" && c["environment"] == "env-120")
        })
        .expect("wide in env-120");
    assert_eq!(wide["enabled"], true, "{wide}");

    // The newest events are now that run's exports. The next read adds a context field after
    // its first exports; more than 100 exports follow.
    let (proxy, through_proxy) = Proxy::start(unleash).await;
    proxy.set_after(
        Fault::AddContextField("/api/admin/features-batch/export"),
        EXPORTS_BEFORE_THE_CHANGE,
    );
    let changed = run(&through_proxy, &backend, &[]);
    assert_nothing_committed(
        &changed,
        "Unleash changed while it was read",
        &backend,
        &first,
    )
    .await;

    let again = run(unleash, &backend, &[]);
    let report = format!("{}\n{}", text(&again.stdout), text(&again.stderr));
    assert!(again.status.success(), "{report}");
    assert!(report.contains("Verified"), "{report}");
    named(
        &export(&backend).await,
        "contextFields",
        "name",
        "made-during-the-read",
    );
}
