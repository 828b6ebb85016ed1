//! Redis only: client usage metrics aggregated by several replicas, flushed on graceful
//! shutdown and through a store outage, and the configuration each instance holds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{eventually, send, Backend, Reply, TestApp};

/// A small deterministic PRNG (splitmix64): no extra dependency, same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Evaluations of one toggle: `variants` breaks `yes` down.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Counts {
    yes: u64,
    no: u64,
    variants: BTreeMap<String, u64>,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.yes += other.yes;
        self.no += other.no;
        for (variant, n) in &other.variants {
            *self.variants.entry(variant.clone()).or_default() += n;
        }
    }

    /// Whether the store has a counter for these counts (a 0/0 entry without variants
    /// writes none).
    fn stored(&self) -> bool {
        self.yes > 0 || self.no > 0 || !self.variants.is_empty()
    }

    fn from_json(value: &Value) -> Result<Counts, String> {
        let number = |v: &Value| v.as_u64().ok_or_else(|| format!("not a count: {value}"));
        let mut variants = BTreeMap::new();
        if let Some(map) = value["variants"].as_object() {
            for (name, n) in map {
                variants.insert(name.clone(), number(n)?);
            }
        }
        Ok(Counts {
            yes: number(&value["yes"])?,
            no: number(&value["no"])?,
            variants,
        })
    }
}

/// One request an SDK instance sends.
#[derive(Debug, Clone)]
enum Sent {
    Register {
        app: String,
        instance: String,
        strategies: Vec<String>,
    },
    Metrics {
        app: String,
        instance: String,
        toggles: Vec<(String, Counts)>,
    },
}

impl Sent {
    fn path(&self) -> &'static str {
        match self {
            Sent::Register { .. } => "/api/client/register",
            Sent::Metrics { .. } => "/api/client/metrics",
        }
    }

    fn body(&self) -> Value {
        match self {
            Sent::Register {
                app,
                instance,
                strategies,
            } => json!({
                "appName": app,
                "instanceId": instance,
                "sdkVersion": "unleash-client-test:1.0.0",
                "strategies": strategies,
                "started": "2024-01-01T00:00:00Z",
                "interval": 10000,
            }),
            Sent::Metrics {
                app,
                instance,
                toggles,
            } => {
                let toggles: serde_json::Map<String, Value> = toggles
                    .iter()
                    .map(|(name, c)| {
                        let mut entry = json!({"yes": c.yes, "no": c.no});
                        if !c.variants.is_empty() {
                            entry["variants"] = json!(c.variants);
                        }
                        (name.clone(), entry)
                    })
                    .collect();
                json!({
                    "appName": app,
                    "instanceId": instance,
                    "bucket": {
                        "start": "2024-01-01T00:00:00Z",
                        "stop": "2024-01-01T00:01:00Z",
                        "toggles": toggles,
                    },
                })
            }
        }
    }
}

/// What the views must show after a set of requests was flushed.
#[derive(Debug, Default, Clone)]
struct Expected {
    /// toggle → app → counts.
    counts: BTreeMap<String, BTreeMap<String, Counts>>,
    /// app → yes + no reported.
    metrics_count: BTreeMap<String, u64>,
    /// app → toggles reported.
    seen: BTreeMap<String, BTreeSet<String>>,
    /// app → instances that registered or reported.
    instances: BTreeMap<String, BTreeSet<String>>,
    /// app → strategies of its registrations.
    strategies: BTreeMap<String, Vec<String>>,
}

impl Expected {
    fn of<'a>(sent: impl IntoIterator<Item = &'a Sent>) -> Self {
        let mut expected = Expected::default();
        for s in sent {
            expected.add(s);
        }
        expected
    }

    fn add(&mut self, sent: &Sent) {
        match sent {
            Sent::Register {
                app,
                instance,
                strategies,
            } => {
                self.touch(app, instance);
                self.strategies.insert(app.clone(), strategies.clone());
            }
            Sent::Metrics {
                app,
                instance,
                toggles,
            } => {
                self.touch(app, instance);
                for (toggle, c) in toggles {
                    self.counts
                        .entry(toggle.clone())
                        .or_default()
                        .entry(app.clone())
                        .or_default()
                        .add(c);
                    *self.metrics_count.get_mut(app).expect("touched") += c.yes + c.no;
                    self.seen
                        .get_mut(app)
                        .expect("touched")
                        .insert(toggle.clone());
                }
            }
        }
    }

    fn touch(&mut self, app: &str, instance: &str) {
        self.metrics_count.entry(app.to_string()).or_default();
        self.seen.entry(app.to_string()).or_default();
        self.instances
            .entry(app.to_string())
            .or_default()
            .insert(instance.to_string());
    }

    /// toggle → app → counts, only where the store holds a counter.
    fn stored(&self, toggle: &str) -> BTreeMap<String, Counts> {
        self.counts
            .get(toggle)
            .map(|apps| {
                apps.iter()
                    .filter(|(_, c)| c.stored())
                    .map(|(app, c)| (app.clone(), c.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The yes/no totals `GET /api/admin/metrics/feature-toggles` lists: every existing toggle
    /// (zeros when unreported) and every reported toggle with a counter.
    fn last_hour(&self, existing: &[String]) -> BTreeMap<String, (u64, u64)> {
        let mut out: BTreeMap<String, (u64, u64)> =
            existing.iter().map(|t| (t.clone(), (0, 0))).collect();
        for toggle in self.counts.keys() {
            let apps = self.stored(toggle);
            if apps.is_empty() {
                continue;
            }
            let slot = out.entry(toggle.clone()).or_default();
            for c in apps.values() {
                slot.0 += c.yes;
                slot.1 += c.no;
            }
        }
        out
    }
}

/// A GET that must answer 200.
async fn get_ok(app: &TestApp, path: &str) -> Result<Value, String> {
    let reply = app.get(path).await;
    if reply.status.as_u16() != 200 {
        return Err(format!(
            "GET {path}: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.bytes)
        ));
    }
    Ok(reply.json)
}

fn differ<T: std::fmt::Debug + PartialEq>(
    what: &str,
    actual: T,
    expected: T,
) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!(
            "{what} differs\n  actual:   {actual:?}\n  expected: {expected:?}"
        ))
    }
}

fn names(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Compares every metrics view `app` serves with `expected`; `toggles` are all toggle names
/// involved (to read each one's detail), `existing` those that exist as toggles.
async fn check_views(
    app: &TestApp,
    expected: &Expected,
    existing: &[String],
    toggles: &[String],
) -> Result<(), String> {
    // The totals of the last hour.
    let listing = get_ok(app, "/api/admin/metrics/feature-toggles").await?;
    let mut last_hour = BTreeMap::new();
    for (name, c) in listing["lastHour"]
        .as_object()
        .ok_or_else(|| format!("no lastHour: {listing}"))?
    {
        let c = Counts::from_json(c)?;
        last_hour.insert(name.clone(), (c.yes, c.no));
    }
    differ(
        "feature-toggles lastHour",
        last_hour,
        expected.last_hour(existing),
    )?;

    // Each toggle in total and per application, with the variant breakdown.
    for toggle in toggles {
        let detail = get_ok(app, &format!("/api/admin/metrics/feature-toggles/{toggle}")).await?;
        let apps = expected.stored(toggle);
        let mut total = Counts::default();
        for c in apps.values() {
            total.add(c);
        }
        differ(
            &format!("{toggle} lastHour"),
            Counts::from_json(&detail["lastHour"])?,
            total,
        )?;
        let mut actual = BTreeMap::new();
        for item in detail["applications"].as_array().into_iter().flatten() {
            actual.insert(
                item["appName"].as_str().unwrap_or_default().to_string(),
                Counts::from_json(&item["lastHour"])?,
            );
        }
        differ(&format!("{toggle} applications"), actual, apps)?;
    }

    // The toggles each application reported and its evaluation count.
    let seen = get_ok(app, "/api/admin/metrics/seen-toggles").await?;
    let mut actual = BTreeMap::new();
    for item in seen.as_array().into_iter().flatten() {
        actual.insert(
            item["appName"].as_str().unwrap_or_default().to_string(),
            (
                names(&item["seenToggles"]),
                item["metricsCount"].as_u64().unwrap_or(u64::MAX),
            ),
        );
    }
    let wanted: BTreeMap<String, (BTreeSet<String>, u64)> = expected
        .seen
        .iter()
        .map(|(app, toggles)| (app.clone(), (toggles.clone(), expected.metrics_count[app])))
        .collect();
    differ("seen-toggles", actual, wanted)?;

    // The applications, their strategies and their instances.
    let listing = get_ok(app, "/api/admin/metrics/applications").await?;
    let mut actual = BTreeMap::new();
    for item in listing["applications"].as_array().into_iter().flatten() {
        actual.insert(
            item["appName"].as_str().unwrap_or_default().to_string(),
            names(&item["strategies"]),
        );
    }
    let wanted: BTreeMap<String, BTreeSet<String>> = expected
        .instances
        .keys()
        .map(|app| {
            let strategies = expected.strategies.get(app).cloned().unwrap_or_default();
            (app.clone(), strategies.into_iter().collect())
        })
        .collect();
    differ("applications", actual, wanted)?;
    for (name, instances) in &expected.instances {
        let details = get_ok(app, &format!("/api/admin/metrics/applications/{name}")).await?;
        let actual: BTreeSet<String> = details["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["instanceId"].as_str().map(str::to_string))
            .collect();
        differ(&format!("instances of {name}"), &actual, instances)?;
        differ(
            &format!("seenToggles of {name}"),
            &names(&details["seenToggles"]),
            &expected.seen[name],
        )?;
    }
    Ok(())
}

/// Retries `check_views` until it passes or `timeout` passes; panics with the last difference.
async fn eventually_views(
    app: &TestApp,
    expected: &Expected,
    existing: &[String],
    toggles: &[String],
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    loop {
        match check_views(app, expected, existing, toggles).await {
            Ok(()) => return,
            Err(e) if Instant::now() >= deadline => panic!("views never matched: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A random fleet's traffic: a registration per instance, then `reports` metrics reports from
/// random instances, each naming a few random toggles.
fn traffic(
    rng: &mut Rng,
    apps: &[String],
    instances: usize,
    reports: usize,
    toggles: &[String],
) -> Vec<Sent> {
    let instance = |i: usize| (apps[i % apps.len()].clone(), format!("inst-{i:04}"));
    let mut out: Vec<Sent> = (0..instances)
        .map(|i| {
            let (app, instance) = instance(i);
            Sent::Register {
                strategies: vec!["default".into(), format!("strategy-of-{app}")],
                app,
                instance,
            }
        })
        .collect();
    let variants = ["red", "green", "blue"];
    for _ in 0..reports {
        let (app, instance) = instance(rng.below(instances as u64) as usize);
        let mut chosen = BTreeSet::new();
        for _ in 0..1 + rng.below(4) {
            chosen.insert(toggles[rng.below(toggles.len() as u64) as usize].clone());
        }
        let toggles = chosen
            .into_iter()
            .map(|name| {
                let mut c = Counts {
                    yes: rng.below(40),
                    no: rng.below(40),
                    variants: BTreeMap::new(),
                };
                // About one in five carries a variant breakdown of its yes count.
                if c.yes > 0 && rng.below(5) == 0 {
                    let k = 2 + rng.below(2) as usize;
                    let mut left = c.yes;
                    for (i, v) in variants.iter().take(k).enumerate() {
                        let n = if i + 1 == k {
                            left
                        } else {
                            rng.below(left + 1)
                        };
                        left -= n;
                        c.variants.insert((*v).to_string(), n);
                    }
                }
                (name, c)
            })
            .collect();
        out.push(Sent::Metrics {
            app,
            instance,
            toggles,
        });
    }
    out
}

/// POSTs `sent`, 100 at a time, each through the replica `route` picks; every one must be
/// accepted.
async fn post_all(replicas: &[&TestApp], sent: &[(usize, Sent)]) {
    for chunk in sent.chunks(100) {
        let requests = chunk.iter().map(|(replica, s)| {
            let app = replicas[*replica];
            async move {
                let reply = send(app.anonymous(Method::POST, s.path()).json(&s.body())).await;
                assert_eq!(
                    reply.status.as_u16(),
                    202,
                    "{} refused: {}",
                    s.path(),
                    String::from_utf8_lossy(&reply.bytes)
                );
            }
        });
        futures_util::future::join_all(requests).await;
    }
}

fn toggle_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:02}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_sum_exactly_after_graceful_shutdown() {
    let backend = Backend::redis();
    let mut settings = backend.settings();
    // No periodic flush within the test: only the flush on graceful shutdown writes.
    settings.usage.metrics_flush_interval_ms = 600_000;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings.clone()).await;
    let c = TestApp::spawn_with(settings.clone()).await;

    // Ten toggles that exist (one never reported), ten names that do not.
    let mut existing = toggle_names("usage.known.", 10);
    existing.push("usage.unreported".into());
    for name in &existing {
        a.create_toggle(name).await;
    }
    let reported: Vec<String> = toggle_names("usage.known.", 10)
        .into_iter()
        .chain(toggle_names("usage.unknown.", 10))
        .collect();
    let all_toggles: Vec<String> = reported
        .iter()
        .cloned()
        .chain(["usage.unreported".to_string()])
        .collect();
    let apps: Vec<String> = (0..5).map(|i| format!("usage-app-{i}")).collect();

    let mut rng = Rng(0x5eed_1234);
    let sent: Vec<(usize, Sent)> = traffic(&mut rng, &apps, 300, 3000, &reported)
        .into_iter()
        .map(|s| (rng.below(3) as usize, s))
        .collect();
    post_all(&[&a, &b, &c], &sent).await;

    // Two replicas stop: their final flushes are in the store, the third's counts are not.
    a.stop().await;
    b.stop().await;
    let through_a_and_b = Expected::of(sent.iter().filter(|(r, _)| *r < 2).map(|(_, s)| s));
    if let Err(e) = check_views(&c, &through_a_and_b, &existing, &all_toggles).await {
        panic!("after two graceful stops: {e}");
    }

    // The third stops too; a fresh replica reads everything, exactly.
    c.stop().await;
    let reader = TestApp::spawn(&backend).await;
    let everything = Expected::of(sent.iter().map(|(_, s)| s));
    assert_eq!(everything.instances.len(), 5);
    assert_eq!(
        everything
            .instances
            .values()
            .map(BTreeSet::len)
            .sum::<usize>(),
        300
    );
    if let Err(e) = check_views(&reader, &everything, &existing, &all_toggles).await {
        panic!("after all replicas stopped: {e}");
    }
}

/// The value of the Prometheus sample `name{...}` whose labels include all of `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .filter(|line| labels.iter().all(|l| line.contains(l)))
        .find_map(|line| line.rsplit(' ').next()?.parse().ok())
}

async fn prometheus(app: &TestApp, accept: Option<&str>) -> Reply {
    let mut request = app.anonymous(Method::GET, "/internal-backstage/prometheus");
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    send(request).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_is_kept_and_retried() {
    let backend = Backend::redis();
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    let existing = vec!["outage.known".to_string()];
    app.create_toggle("outage.known").await;
    let toggles = vec!["outage.known".to_string(), "outage.unknown".to_string()];
    let mut rng = Rng(0x07a6e);

    let before: Vec<(usize, Sent)> = traffic(
        &mut rng,
        &["outage-app-a".to_string(), "outage-app-b".to_string()],
        20,
        300,
        &toggles,
    )
    .into_iter()
    .map(|s| (0, s))
    .collect();
    post_all(&[&app], &before).await;
    let mut expected = Expected::of(before.iter().map(|(_, s)| s));
    eventually_views(
        &app,
        &expected,
        &existing,
        &toggles,
        Duration::from_secs(10),
    )
    .await;

    backend.redis_server().stop();
    let failed_flushes = |text: &str| {
        sample(
            text,
            "flagpole_store_errors_total",
            &["operation=\"usage_flush\"", "kind=\"unavailable\""],
        )
        .unwrap_or(0.0)
    };
    let failed_before = failed_flushes(&String::from_utf8_lossy(
        &prometheus(&app, None).await.bytes,
    ));

    // Reports keep being accepted while Redis is down (a new application among them).
    let mut rng = Rng(99);
    let during: Vec<(usize, Sent)> = traffic(
        &mut rng,
        &["outage-app-a".to_string(), "outage-app-new".to_string()],
        20,
        300,
        &toggles,
    )
    .into_iter()
    .map(|s| (0, s))
    .collect();
    post_all(&[&app], &during).await;
    let failures_after = |baseline: f64| {
        let app = &app;
        async move {
            eventually(Duration::from_secs(10), || async {
                let text = String::from_utf8_lossy(&prometheus(app, None).await.bytes).to_string();
                failed_flushes(&text) > baseline
            })
            .await
        }
    };
    assert!(
        failures_after(failed_before).await,
        "no usage flush failed while Redis was down"
    );
    // More reports after a failed flush: they join the kept batch, and a flush of both fails.
    let mut rng = Rng(4242);
    let late: Vec<(usize, Sent)> =
        traffic(&mut rng, &["outage-app-b".to_string()], 5, 50, &toggles)
            .into_iter()
            .map(|s| (0, s))
            .collect();
    post_all(&[&app], &late).await;
    let failed_so_far = failed_flushes(&String::from_utf8_lossy(
        &prometheus(&app, None).await.bytes,
    ));
    assert!(
        failures_after(failed_so_far).await,
        "the kept batch was not retried while Redis was down"
    );

    backend.redis_server().restart();
    for (_, s) in during.iter().chain(&late) {
        expected.add(s);
    }
    eventually_views(
        &app,
        &expected,
        &existing,
        &toggles,
        Duration::from_secs(15),
    )
    .await;

    // Later flushes add only what is new: nothing was counted twice.
    let after: Vec<(usize, Sent)> =
        traffic(&mut rng, &["outage-app-a".to_string()], 3, 20, &toggles)
            .into_iter()
            .map(|s| (0, s))
            .collect();
    post_all(&[&app], &after).await;
    for (_, s) in &after {
        expected.add(s);
    }
    eventually_views(
        &app,
        &expected,
        &existing,
        &toggles,
        Duration::from_secs(10),
    )
    .await;
}

/// `GET /api/client/features` as instance `instance` of the app `poller`; returns the ETag.
async fn poll(app: &TestApp, instance: &str) -> String {
    app.settle().await;
    send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("UNLEASH-APPNAME", "poller")
            .header("UNLEASH-INSTANCEID", instance),
    )
    .await
    .expect(200)
    .header("etag")
    .expect("etag")
}

/// The ETag a replica serves now (a poll without SDK headers, so not recorded).
async fn served_etag(app: &TestApp) -> Option<String> {
    app.settle().await;
    send(app.anonymous(Method::GET, "/api/client/features"))
        .await
        .header("etag")
}

/// The `poller` entry of `/api/admin/metrics/config-versions`.
async fn poller_versions(app: &TestApp) -> Value {
    let all = app.get("/api/admin/metrics/config-versions").await;
    all.json["applications"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["appName"] == "poller")
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_polls_record_the_configuration_each_instance_holds() {
    let backend = Backend::redis();
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 200;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    a.create_toggle("config.flag").await;
    let old_etag = served_etag(&a).await.expect("etag");
    let converged = eventually(Duration::from_secs(5), || async {
        served_etag(&b).await.as_deref() == Some(old_etag.as_str())
    })
    .await;
    assert!(converged, "replica b did not catch up");
    let old_version = a
        .get("/api/admin/metrics/config-versions")
        .await
        .expect(200)
        .json["version"]
        .as_u64()
        .expect("version");
    assert_eq!(
        b.get("/api/admin/metrics/config-versions").await.json["version"],
        old_version
    );

    // Six instances poll, three through each replica.
    let instances: Vec<String> = (0..6).map(|i| format!("poller-{i}")).collect();
    let mut last_etag: BTreeMap<String, String> = BTreeMap::new();
    for (i, instance) in instances.iter().enumerate() {
        let via = if i < 3 { &a } else { &b };
        let etag = poll(via, instance).await;
        assert_eq!(etag, old_etag);
        last_etag.insert(instance.clone(), etag);
    }
    let all_current = eventually(Duration::from_secs(10), || async {
        let v = poller_versions(&b).await;
        v["instances"] == 6 && v["current"] == 6 && v["behind"] == 0
    })
    .await;
    assert!(all_current, "{}", poller_versions(&b).await);

    // The configuration changes; three instances poll again (one through the other replica).
    a.post_empty("/api/admin/features/config.flag/toggle/on")
        .await
        .expect(200);
    let new_etag = served_etag(&a).await.expect("etag");
    assert_ne!(new_etag, old_etag);
    let converged = eventually(Duration::from_secs(5), || async {
        served_etag(&b).await.as_deref() == Some(new_etag.as_str())
    })
    .await;
    assert!(converged, "replica b did not see the change");
    let repolled: BTreeSet<String> = ["poller-0", "poller-1", "poller-3"]
        .into_iter()
        .map(str::to_string)
        .collect();
    for (instance, via) in [("poller-0", &a), ("poller-1", &b), ("poller-3", &b)] {
        let etag = poll(via, instance).await;
        assert_eq!(etag, new_etag);
        last_etag.insert(instance.to_string(), etag);
    }

    let summarised = eventually(Duration::from_secs(10), || async {
        let v = poller_versions(&a).await;
        v["instances"] == 6 && v["current"] == 3 && v["behind"] == 3
    })
    .await;
    let summary = poller_versions(&a).await;
    assert!(summarised, "{summary}");
    assert_eq!(summary["notSeenRecently"], 0, "{summary}");
    assert_eq!(
        summary["oldestVersionInUse"]["version"], old_version,
        "{summary}"
    );
    assert_eq!(summary["oldestVersionInUse"]["etag"], old_etag, "{summary}");
    assert_eq!(summary["oldestVersionInUse"]["instances"], 3, "{summary}");
    assert!(
        a.get("/api/admin/metrics/config-versions").await.json["version"]
            .as_u64()
            .expect("version")
            > old_version
    );

    // Each instance's details: the ETag it last received, and whether it is current.
    for via in [&a, &b] {
        let details = via
            .get("/api/admin/metrics/applications/poller")
            .await
            .expect(200)
            .json;
        let mut seen = BTreeMap::new();
        for instance in details["instances"].as_array().expect("instances") {
            let id = instance["instanceId"].as_str().expect("id").to_string();
            let configuration = &instance["configuration"];
            seen.insert(
                id.clone(),
                (
                    configuration["etag"].as_str().map(str::to_string),
                    configuration["current"].as_bool(),
                ),
            );
            if !repolled.contains(&id) {
                assert_eq!(configuration["version"], old_version, "{instance}");
            }
        }
        let wanted: BTreeMap<String, (Option<String>, Option<bool>)> = last_etag
            .iter()
            .map(|(id, etag)| {
                (
                    id.clone(),
                    (Some(etag.clone()), Some(repolled.contains(id))),
                )
            })
            .collect();
        assert_eq!(seen, wanted);
    }

    // The Prometheus gauges: text format 0.0.4 by default, OpenMetrics on request.
    let text = prometheus(&b, None).await;
    let content_type = text.header("content-type").expect("content type");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let body = String::from_utf8_lossy(&text.bytes).to_string();
    assert!(body.contains("flagpole_client_instances{"), "{body}");
    let gauge = |state: &str| {
        sample(
            &body,
            "flagpole_client_instances",
            &["app_name=\"poller\"", &format!("state=\"{state}\"")],
        )
    };
    assert_eq!(gauge("current"), Some(3.0), "{body}");
    assert_eq!(gauge("behind"), Some(3.0), "{body}");
    assert!(!body.contains("# EOF"));
    let open = prometheus(&b, Some("application/openmetrics-text; version=1.0.0")).await;
    let content_type = open.header("content-type").expect("content type");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let body = String::from_utf8_lossy(&open.bytes).to_string();
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    assert!(body.contains("flagpole_client_instances{"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_that_times_out_is_counted_exactly_once() {
    // A frozen Redis (SIGSTOP) receives the flush, answers nothing until it thaws, then runs
    // it: the replica must neither drop the part nor add it a second time.
    let backend = Backend::redis();
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    app.create_toggle("frozen.known").await;
    let existing = vec!["frozen.known".to_string()];
    let toggles = vec!["frozen.known".to_string(), "frozen.unknown".to_string()];
    let apps = ["frozen-app".to_string()];
    let mut rng = Rng(0xf1022);
    let before: Vec<(usize, Sent)> = traffic(&mut rng, &apps, 10, 100, &toggles)
        .into_iter()
        .map(|s| (0, s))
        .collect();
    post_all(&[&app], &before).await;
    let mut expected = Expected::of(before.iter().map(|(_, s)| s));
    eventually_views(
        &app,
        &expected,
        &existing,
        &toggles,
        Duration::from_secs(10),
    )
    .await;

    backend.redis_server().signal("STOP");
    let during: Vec<(usize, Sent)> = traffic(&mut rng, &apps, 10, 100, &toggles)
        .into_iter()
        .map(|s| (0, s))
        .collect();
    post_all(&[&app], &during).await;
    for (_, s) in &during {
        expected.add(s);
    }
    // Long enough for a flush to time out (2 s) and for its settling to fail too.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    backend.redis_server().signal("CONT");
    eventually_views(
        &app,
        &expected,
        &existing,
        &toggles,
        Duration::from_secs(15),
    )
    .await;
    // And it stays exact once everything has settled.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    eventually_views(&app, &expected, &existing, &toggles, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_poll_flushed_late_does_not_hide_a_newer_one() {
    let backend = Backend::redis();
    let mut slow = backend.settings();
    slow.usage.metrics_flush_interval_ms = 60_000;
    let mut fast = backend.settings();
    fast.usage.metrics_flush_interval_ms = 100;
    let a = TestApp::spawn_with(slow).await;
    let b = TestApp::spawn_with(fast).await;
    a.create_toggle("late.flag").await;
    let old = poll(&a, "i-late").await;
    a.post_empty("/api/admin/features/late.flag/toggle/on")
        .await
        .expect(200);
    let fresh = served_etag(&a).await.expect("etag");
    let converged = eventually(Duration::from_secs(5), || async {
        served_etag(&b).await.as_deref() == Some(fresh.as_str())
    })
    .await;
    assert!(converged, "replica b never served the change");
    assert_eq!(poll(&b, "i-late").await, fresh);
    assert_ne!(old, fresh);
    let flushed = eventually(Duration::from_secs(5), || async {
        poller_versions(&b).await["current"] == 1
    })
    .await;
    assert!(flushed, "b never flushed the newer poll");
    // Replica a flushes its older record of the same instance last.
    a.stop().await;
    let details = b
        .get("/api/admin/metrics/applications/poller")
        .await
        .expect(200);
    let instance = &details.json["instances"][0];
    assert_eq!(
        instance["configuration"]["etag"],
        fresh.as_str(),
        "{instance}"
    );
    assert_eq!(instance["configuration"]["current"], true);
}
