//! Convergence and write contention: replicas that follow the change log end where a replica
//! that loads everything starts, and many concurrent writers all get an answer (committed, or
//! a clear 503 when they lost every race), with the write metrics accounting for each.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{feature_names, prometheus_sample, send, Backend, Reply, TestApp};
use crate::conformance;
use crate::forwarding::{committer, forwarded, wait_for_forwarding};

conformance!(sixteen_writers_on_one_replica_all_finish);

/// xorshift64: a reproducible stream of numbers without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// The values of the `simple` tags the operations add and remove.
const TAG_VALUES: [&str; 3] = ["blue", "green", "red"];

/// 40 toggle names: some under `team.x` (`team.xy.*` shares the prefix too), some not.
fn name_pool() -> Vec<String> {
    let mut names = Vec::new();
    names.extend((0..12).map(|i| format!("team.x.{i}")));
    names.extend((0..4).map(|i| format!("team.xy.{i}")));
    names.extend((0..8).map(|i| format!("team.y.{i}")));
    names.extend((0..16).map(|i| format!("misc-{i}")));
    names
}

/// A random set of strategies (with parameters and constraints now and then).
fn random_strategies(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 | 1 => json!([{"name": "default"}]),
        2 => json!([{"name": "userWithId",
                     "parameters": {"userIds": format!("{},{}", rng.below(100), rng.below(100))}}]),
        _ => json!([
            {"name": "flexibleRollout",
             "parameters": {"rollout": rng.below(101), "stickiness": "default", "groupId": "g"}},
            {"name": "default",
             "constraints": [{"contextName": "environment", "operator": "IN", "values": ["prod"]},
                             {"contextName": "plan", "operator": "STR_STARTS_WITH",
                              "values": ["pro"], "caseInsensitive": true}]}
        ]),
    }
}

/// A random toggle document for a create (`name` given) or a PUT.
fn random_toggle(rng: &mut Rng, name: Option<&str>) -> Value {
    let mut body = json!({
        "description": format!("d{}", rng.below(1000)),
        "enabled": rng.chance(50),
        "strategies": random_strategies(rng),
    });
    if rng.chance(25) {
        body["project"] = json!("beta");
    }
    if rng.chance(20) {
        body["variants"] = json!([
            {"name": "v1", "weight": 500, "payload": {"type": "string", "value": "one"}},
            {"name": "v2", "weight": 500}
        ]);
    }
    if let Some(name) = name {
        body["name"] = json!(name);
    }
    body
}

/// What the operations did, as far as their replies tell: used to aim most operations at
/// toggles they apply to (a uniform pick from the pool would mostly hit 404s).
#[derive(Default)]
struct Aim {
    active: BTreeMap<String, BTreeSet<&'static str>>,
    archived: BTreeMap<String, BTreeSet<&'static str>>,
}

impl Aim {
    /// An active toggle most of the time, any name of the pool otherwise.
    fn active_name(&self, rng: &mut Rng, names: &[String]) -> String {
        let active: Vec<&String> = self.active.keys().collect();
        if active.is_empty() || rng.chance(10) {
            rng.pick(names).clone()
        } else {
            (*rng.pick(&active)).clone()
        }
    }

    fn archived_name(&self, rng: &mut Rng, names: &[String]) -> String {
        let archived: Vec<&String> = self.archived.keys().collect();
        if archived.is_empty() || rng.chance(10) {
            rng.pick(names).clone()
        } else {
            (*rng.pick(&archived)).clone()
        }
    }
}

/// One random admin operation on `app`; returns its kind and reply, and notes its effect.
async fn random_operation(
    app: &TestApp,
    rng: &mut Rng,
    names: &[String],
    aim: &mut Aim,
) -> (&'static str, Reply) {
    if rng.chance(4) {
        // Now and then a project or a context field changes: other collections in the same
        // change sets.
        let description = format!("d{}", rng.below(1000));
        return if rng.chance(50) {
            let body = json!({"name": "Beta", "description": description});
            ("project", app.put("/api/admin/projects/beta", body).await)
        } else {
            let body = json!({"description": description});
            ("context", app.put("/api/admin/context/plan", body).await)
        };
    }
    let roll = rng.below(100);
    let name = match roll {
        0..=19 => rng.pick(names).clone(),
        74..=80 => aim.archived_name(rng, names),
        _ => aim.active_name(rng, names),
    };
    let path = format!("/api/admin/features/{name}");
    let mut tag = *rng.pick(&TAG_VALUES);
    if roll >= 92 && rng.chance(80) {
        // Mostly a tag the toggle has.
        if let Some(&has) = aim.active.get(&name).and_then(|tags| tags.iter().next()) {
            tag = has;
        }
    }
    let (kind, reply) = match roll {
        0..=19 => {
            let body = random_toggle(rng, Some(&name));
            ("create", app.post("/api/admin/features", body).await)
        }
        20..=37 => {
            let body = random_toggle(rng, None);
            ("update", app.put(&path, body).await)
        }
        38..=48 => ("on", app.post_empty(&format!("{path}/toggle/on")).await),
        49..=58 => ("off", app.post_empty(&format!("{path}/toggle/off")).await),
        59..=62 => ("stale", app.post_empty(&format!("{path}/stale/on")).await),
        63..=73 => ("archive", app.delete(&path).await),
        74..=80 => (
            "revive",
            app.post("/api/admin/archive/revive", json!({"name": name}))
                .await,
        ),
        81..=91 => (
            "tag",
            app.post(
                &format!("{path}/tags"),
                json!({"type": "simple", "value": tag}),
            )
            .await,
        ),
        _ => (
            "untag",
            app.delete(&format!("{path}/tags/simple/{tag}")).await,
        ),
    };
    if reply.status.is_success() {
        match kind {
            "create" | "revive" => {
                let tags = aim.archived.remove(&name).unwrap_or_default();
                aim.active.insert(name, tags);
            }
            "archive" => {
                let tags = aim.active.remove(&name).unwrap_or_default();
                aim.archived.insert(name, tags);
            }
            "tag" => {
                aim.active.entry(name).or_default().insert(tag);
            }
            "untag" => {
                aim.active.entry(name).or_default().remove(tag);
            }
            _ => {}
        }
    }
    (kind, reply)
}

/// `/health` of a replica: (version, clientVersion).
async fn versions(app: &TestApp) -> (u64, u64) {
    let health = app.get("/health").await.expect(200).json;
    (
        health["version"].as_u64().expect("version"),
        health["clientVersion"].as_u64().expect("clientVersion"),
    )
}

/// Waits until every replica holds the same version and serves it to clients. The replica
/// that made the last commit holds the store's newest version, so equal means newest.
pub(crate) async fn converge(apps: &[&TestApp]) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut seen = Vec::new();
        for app in apps {
            seen.push(versions(app).await);
        }
        if seen.iter().all(|&(v, c)| v == seen[0].0 && c == v) {
            return seen[0].0;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replicas did not converge: (version, clientVersion) {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The names of the toggles of an admin or client listing, as a set.
fn name_set(listing: &Value) -> BTreeSet<String> {
    feature_names(listing.clone()).into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_applying_change_sets_ends_like_one_that_reloads_everything() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    a.post("/api/admin/projects", json!({"id": "beta", "name": "Beta"}))
        .await
        .expect(201);
    a.post("/api/admin/context", json!({"name": "plan"}))
        .await
        .expect(201);
    let names = name_pool();
    let queries: Vec<String> = vec![
        String::new(),
        format!("?tag=simple:{}", TAG_VALUES[0]),
        format!("?tag=simple:{}", TAG_VALUES[2]),
        "?namePrefix=team.x".into(),
        "?project=default".into(),
    ];
    let mut rng = Rng::new(0x5eed_c0ff_ee15_2024);
    let mut statuses: BTreeMap<(&str, u16), usize> = BTreeMap::new();
    let mut aim = Aim::default();
    for step in 0..150 {
        let through_b = rng.chance(30);
        let app = if through_b { &b } else { &a };
        let (label, reply) = random_operation(app, &mut rng, &names, &mut aim).await;
        let status = reply.status.as_u16();
        assert!(
            status < 500,
            "step {step} ({label} through {}): {status} {}",
            if through_b { "b" } else { "a" },
            String::from_utf8_lossy(&reply.bytes)
        );
        *statuses.entry((label, status)).or_default() += 1;
        // Clients poll along the way, so the replicas keep filtered documents to bring up to
        // date with every version (not only build them once at the end).
        if step % 25 == 5 {
            for app in [&a, &b] {
                for query in &queries {
                    let reply =
                        send(app.anonymous(Method::GET, &format!("/api/client/features{query}")))
                            .await;
                    assert_eq!(reply.status.as_u16(), 200, "poll of {query:?}");
                }
            }
        }
    }
    eprintln!("operations (kind, status) → count: {statuses:?}");
    // Most operations must have done something, or the test exercises nothing.
    let applied: usize = statuses
        .iter()
        .filter(|((_, status), _)| *status < 300)
        .map(|(_, n)| n)
        .sum();
    assert!(applied >= 60, "only {applied} operations applied");

    let c = TestApp::spawn(&backend).await;
    let version = converge(&[&a, &b, &c]).await;
    eprintln!("converged at version {version}");

    for path in [
        "/api/admin/features",
        "/api/admin/archive/features",
        "/api/admin/tags",
        "/api/admin/projects",
        "/api/admin/context",
    ] {
        let reference = c.get(path).await.expect(200).json;
        for (label, app) in [("a", &a), ("b", &b)] {
            let json = app.get(path).await.expect(200).json;
            assert_eq!(json, reference, "{path} on replica {label} differs from c");
        }
    }
    let admin = c.get("/api/admin/features").await.json;
    assert!(
        !admin["features"].as_array().expect("features").is_empty(),
        "nothing active at the end"
    );
    assert!(
        !c.get("/api/admin/archive/features").await.json["features"]
            .as_array()
            .expect("archive")
            .is_empty(),
        "nothing archived at the end"
    );

    for query in &queries {
        let reference = c.client_features(query, None).await.expect(200);
        let etag = reference.header("etag").expect("etag");
        for (label, app) in [("a", &a), ("b", &b)] {
            let reply = app.client_features(query, None).await.expect(200);
            assert_eq!(
                reply.header("etag").as_deref(),
                Some(etag.as_str()),
                "ETag of {query:?} on replica {label} differs from c"
            );
            assert_eq!(
                String::from_utf8_lossy(&reply.bytes),
                String::from_utf8_lossy(&reference.bytes),
                "body of {query:?} on replica {label} differs from c"
            );
            app.client_features(query, Some(&etag)).await.expect(304);
        }
        // The client filter selects what the admin filter selects.
        let admin_filtered = c
            .get(&format!("/api/admin/features{query}"))
            .await
            .expect(200)
            .json;
        assert_eq!(
            name_set(&reference.json),
            name_set(&admin_filtered),
            "client and admin disagree on {query:?}"
        );
        if !query.is_empty() {
            assert!(
                !name_set(&reference.json).is_empty(),
                "{query:?} selects nothing; the comparison would be vacuous"
            );
        }
    }
    let client = c.client_features("", None).await.json;
    assert_eq!(feature_names(client), feature_names(admin));
}

/// One scrape's write metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct WriteTotals {
    /// Committed writes (`flagpole_write_attempts_count`).
    committed: f64,
    /// Attempts those writes took (`flagpole_write_attempts_sum`).
    attempts: f64,
    conflicts: f64,
    gave_up: f64,
}

impl WriteTotals {
    fn plus(self, other: Self) -> Self {
        Self {
            committed: self.committed + other.committed,
            attempts: self.attempts + other.attempts,
            conflicts: self.conflicts + other.conflicts,
            gave_up: self.gave_up + other.gave_up,
        }
    }

    fn minus(self, other: Self) -> Self {
        Self {
            committed: self.committed - other.committed,
            attempts: self.attempts - other.attempts,
            conflicts: self.conflicts - other.conflicts,
            gave_up: self.gave_up - other.gave_up,
        }
    }
}

async fn write_totals(app: &TestApp) -> WriteTotals {
    let text = app.metrics_text().await;
    let sample = |text: &str, name: &str| {
        prometheus_sample(text, name).unwrap_or_else(|| panic!("no sample {name} in\n{text}"))
    };
    WriteTotals {
        committed: sample(&text, "flagpole_write_attempts_count"),
        attempts: sample(&text, "flagpole_write_attempts_sum"),
        conflicts: sample(&text, "flagpole_write_conflicts_total"),
        gave_up: sample(&text, "flagpole_write_contention_failures_total"),
    }
}

async fn summed_write_totals(apps: &[&TestApp]) -> WriteTotals {
    let mut total = WriteTotals::default();
    for app in apps {
        total = total.plus(write_totals(app).await);
    }
    total
}

/// The writes of `apps` forwarded to the lease holder.
async fn summed_forwarded(apps: &[&TestApp]) -> f64 {
    let mut sum = 0.0;
    for app in apps {
        sum += forwarded(app, "forwarded").await;
    }
    sum
}

const TOGGLES: usize = 20;
const WRITERS: usize = 16;
const PUTS_PER_WRITER: usize = 25;

/// One PUT of a writer.
struct Put {
    toggle: usize,
    description: String,
    status: u16,
    message: Option<String>,
}

/// What the writers saw.
struct Contention {
    puts: Vec<Put>,
    /// Writes committed by this test (creates and successful PUTs).
    committed: usize,
    unavailable: usize,
}

/// Creates the toggles through the first replica, then runs the writers, writer `i` through
/// replica `i % apps.len()`, and checks every reply.
async fn run_writers(apps: &[&TestApp]) -> Contention {
    for i in 0..TOGGLES {
        apps[0]
            .post(
                "/api/admin/features",
                json!({"name": format!("w.{i}"), "description": "initial",
                       "strategies": [{"name": "default"}]}),
            )
            .await
            .expect(200);
    }
    // Every replica knows the toggles before the writers start, so the writes race each other
    // rather than the creates' propagation.
    converge(apps).await;
    let writers = (0..WRITERS).map(|task| {
        let app = apps[task % apps.len()];
        let (http, base) = (app.http.clone(), app.base.clone());
        tokio::spawn(async move {
            let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (task as u64 + 1));
            let mut puts = Vec::with_capacity(PUTS_PER_WRITER);
            for n in 0..PUTS_PER_WRITER {
                let toggle = rng.below(TOGGLES);
                let description = format!("w{task}-{n}");
                let body = json!({
                    "description": description,
                    "enabled": rng.chance(50),
                    "strategies": [{"name": "default"}],
                });
                let reply = send(
                    http.put(format!("{base}/api/admin/features/w.{toggle}"))
                        .basic_auth("admin", Some(""))
                        .json(&body),
                )
                .await;
                let status = reply.status.as_u16();
                let message = match status {
                    200 => {
                        assert_eq!(reply.json["description"], description.as_str());
                        None
                    }
                    503 => Some(reply.error_message()),
                    other => panic!(
                        "PUT by writer {task}: {other} {}",
                        String::from_utf8_lossy(&reply.bytes)
                    ),
                };
                puts.push(Put {
                    toggle,
                    description,
                    status,
                    message,
                });
            }
            puts
        })
    });
    let all = tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::join_all(writers),
    )
    .await
    .expect("the writers did not finish within 120 s");
    let mut puts = Vec::new();
    for joined in all {
        puts.extend(joined.expect("writer task"));
    }
    assert_eq!(puts.len(), WRITERS * PUTS_PER_WRITER);
    let succeeded = puts.iter().filter(|p| p.status == 200).count();
    let unavailable = puts.len() - succeeded;
    let messages: BTreeSet<&str> = puts.iter().filter_map(|p| p.message.as_deref()).collect();
    eprintln!(
        "{} PUTs over {} replica(s): {succeeded} committed, {unavailable} answered 503 {messages:?}",
        puts.len(),
        apps.len()
    );
    Contention {
        puts,
        committed: TOGGLES + succeeded,
        unavailable,
    }
}

/// Every toggle ends with one of the descriptions written to it successfully (the initial one
/// when none was).
async fn check_descriptions(app: &TestApp, puts: &[Put]) {
    for i in 0..TOGGLES {
        let written: BTreeSet<&str> = puts
            .iter()
            .filter(|p| p.toggle == i && p.status == 200)
            .map(|p| p.description.as_str())
            .collect();
        let toggle = app
            .get(&format!("/api/admin/features/w.{i}"))
            .await
            .expect(200)
            .json;
        let description = toggle["description"].as_str().expect("description");
        if written.is_empty() {
            assert_eq!(description, "initial", "w.{i} changed without a write");
        } else {
            assert!(
                written.contains(description),
                "w.{i} ends with {description:?}, not one of {written:?}"
            );
        }
    }
}

/// The metrics account for every write: each committed write once, each 503 once, and each
/// lost race once (a committed write lost `attempts - 1`, a write given up lost all 8).
fn check_metrics(delta: WriteTotals, contention: &Contention) {
    eprintln!("write metrics over the test: {delta:?}");
    assert_eq!(delta.committed, contention.committed as f64, "{delta:?}");
    assert_eq!(delta.gave_up, contention.unavailable as f64, "{delta:?}");
    assert_eq!(
        delta.conflicts,
        delta.attempts - delta.committed
            + flagpole::service::COMMIT_ATTEMPTS as f64 * delta.gave_up,
        "{delta:?}"
    );
}

async fn sixteen_writers_on_one_replica_all_finish(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let before = write_totals(&app).await;
    let contention = run_writers(&[&app]).await;
    check_descriptions(&app, &contention.puts).await;
    let delta = write_totals(&app).await.minus(before);
    check_metrics(delta, &contention);
    // The client API serves the final state.
    let served = app.client_features("", None).await.expect(200).json;
    assert_eq!(served["features"].as_array().map(Vec::len), Some(TOGGLES));
}

/// Every replica commits its own writes (the default): the store settles their races.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_over_three_replicas_all_finish() {
    sixteen_writers_over_three_replicas(false).await;
}

/// The same with `--forward-writes`: the lease holder commits every replica's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_over_three_forwarding_replicas_all_finish() {
    sixteen_writers_over_three_replicas(true).await;
}

async fn sixteen_writers_over_three_replicas(forward_writes: bool) {
    let backend = Backend::redis();
    let mut settings = backend.settings();
    settings.replication.forward_writes = forward_writes;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings.clone()).await;
    let c = TestApp::spawn_with(settings).await;
    let apps = [&a, &b, &c];
    let holder = if forward_writes {
        Some(wait_for_forwarding(&backend, &apps).await)
    } else {
        None
    };
    let forwarded_before = summed_forwarded(&apps).await;
    let before = summed_write_totals(&apps).await;
    let contention = run_writers(&apps).await;
    converge(&apps).await;
    for app in apps {
        check_descriptions(app, &contention.puts).await;
    }
    let reference = a.get("/api/admin/features").await.expect(200).json;
    for app in [&b, &c] {
        assert_eq!(app.get("/api/admin/features").await.json, reference);
    }
    let delta = summed_write_totals(&apps).await.minus(before);
    check_metrics(delta, &contention);
    let forwarded = summed_forwarded(&apps).await - forwarded_before;
    if let Some(holder) = holder {
        assert!(forwarded > 0.0, "no write was forwarded");
        // The writes (and the creates) sent to the replicas that do not hold the lease.
        let sent_to_followers: usize = apps
            .iter()
            .enumerate()
            .filter(|(_, app)| app.base != holder)
            .map(|(index, _)| {
                let writers = (0..WRITERS).filter(|w| w % apps.len() == index).count();
                writers * PUTS_PER_WRITER + if index == 0 { TOGGLES } else { 0 }
            })
            .sum();
        // Every one of them went to the same holder, so every write was decided there and
        // none raced another in the store. (Under a loaded machine the lease may lapse, or a
        // forward time out, and some writes be committed where they arrived: no check then.)
        if forwarded == sent_to_followers as f64 && committer(&backend).await == Some(holder) {
            assert_eq!(delta.conflicts, 0.0, "{delta:?}");
        }
    } else {
        assert_eq!(forwarded, 0.0);
    }
    let etag = a
        .client_features("", None)
        .await
        .expect(200)
        .header("etag")
        .expect("etag");
    for app in [&b, &c] {
        assert_eq!(
            app.client_features("", None).await.header("etag"),
            Some(etag.clone())
        );
    }
}
