//! Commits on top of other replicas' writes (`store::Rebase`): the Redis commit script lets a
//! batch through when nobody else wrote its toggles or any record outside the toggles since
//! it was decided, and refuses otherwise; replicas racing on the same toggles lose no update.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{prometheus_sample, send, Backend, Reply, TestApp, TestRedis};
use flagpole::snapshot::{position_of, Snapshot};
use flagpole::store::embedded::EmbeddedStore;
use flagpole::store::redis::RedisStore;
use flagpole::store::redis_conn::RedisOptions;
use flagpole::store::{
    Announcement, Change, Collection, CommitCheck, CommitOutcome, Position, Rebase, Store,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const PREFIX: &str = "rebase-test";

async fn redis_store(redis: &TestRedis) -> Store {
    let options = RedisOptions::standalone(&redis.url());
    Store::Redis(
        RedisStore::connect(&options, PREFIX)
            .await
            .expect("connect"),
    )
}

fn put(collection: Collection, key: &str) -> Change {
    Change {
        collection,
        key: key.to_string(),
        value: Some(format!("{{\"name\":\"{key}\"}}")),
    }
}

/// No events, as `Store::commit` takes them.
fn no_events() -> std::sync::Arc<[flagpole::domain::event::NewEvent]> {
    std::sync::Arc::new([])
}

/// Commits `changes` at the store's current position, as a replica with an exact state does.
async fn commit_exact(store: &Store, changes: &[Change]) -> Position {
    let check = CommitCheck {
        expected: Some(store.position().await.expect("position")),
        rebase: None,
    };
    match store
        .commit(&check, &changes.into(), &no_events(), &[])
        .await
        .expect("commit")
    {
        CommitOutcome::Committed {
            position, rebased, ..
        } => {
            assert!(!rebased);
            position
        }
        conflict => panic!("exact commit refused: {conflict:?}"),
    }
}

/// Commits `changes` to `toggles` by a rebase only, as a replica whose state holds the store up
/// to `seen` and its own commits `own`.
async fn commit_rebased(
    store: &Store,
    seen: Position,
    own: &[Position],
    toggles: &[&str],
) -> CommitOutcome {
    let check = CommitCheck {
        expected: None,
        rebase: Some(Rebase {
            seen,
            own: own.to_vec(),
            toggles: toggles.iter().map(|t| t.to_string()).collect(),
        }),
    };
    let changes: Vec<Change> = toggles
        .iter()
        .map(|t| put(Collection::Features, t))
        .collect();
    store
        .commit(&check, &changes.into(), &no_events(), &[])
        .await
        .expect("commit")
}

fn rebased_position(outcome: CommitOutcome) -> Position {
    match outcome {
        CommitOutcome::Committed {
            position,
            rebased: true,
            ..
        } => position,
        other => panic!("expected a rebased commit, got {other:?}"),
    }
}

fn assert_refused(outcome: CommitOutcome, why: &str) {
    assert!(
        matches!(outcome, CommitOutcome::Conflict { .. }),
        "{why}: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_script_rebases_only_over_writes_to_other_toggles() {
    let redis = TestRedis::start();
    let store = redis_store(&redis).await;
    let seen = commit_exact(&store, &[put(Collection::Features, "a")]).await;

    // Another replica writes toggle b: a batch about a goes through on top of it.
    commit_exact(&store, &[put(Collection::Features, "b")]).await;
    let own = rebased_position(commit_rebased(&store, seen, &[], &["a"]).await);
    assert_eq!(own.version, seen.version + 2);

    // A batch decided on top of the rebased one (its own write of a is not someone else's).
    let own2 = rebased_position(commit_rebased(&store, seen, &[own], &["a"]).await);
    // Without knowing its own commit, the replica's write of a looks like somebody else's.
    assert_refused(
        commit_rebased(&store, seen, &[], &["a"]).await,
        "a write to a since seen that the batch did not see",
    );

    // Another replica writes a, then archives c: a batch about a, or about c, is refused.
    commit_exact(&store, &[put(Collection::Features, "a")]).await;
    assert_refused(
        commit_rebased(&store, seen, &[own, own2], &["a"]).await,
        "another replica wrote a",
    );
    commit_exact(
        &store,
        &[
            Change {
                collection: Collection::Features,
                key: "c".into(),
                value: None,
            },
            put(Collection::Archive, "c"),
        ],
    )
    .await;
    let now = store.position().await.expect("position");
    assert_refused(
        commit_rebased(&store, own2, &[], &["c"]).await,
        "another replica archived c",
    );
    rebased_position(commit_rebased(&store, own2, &[], &["d"]).await);

    // Any record outside the toggles (here a project) written since refuses every rebase.
    commit_exact(&store, &[put(Collection::Projects, "p")]).await;
    assert_refused(
        commit_rebased(&store, now, &[], &["e"]).await,
        "a project was written",
    );
    let after_project = store.position().await.expect("position");
    commit_exact(&store, &[put(Collection::Features, "f")]).await;
    rebased_position(commit_rebased(&store, after_project, &[], &["e"]).await);

    // Positions that are not part of this store's history are refused.
    let forged = Position {
        head: after_project.head ^ 1,
        ..after_project
    };
    assert_refused(
        commit_rebased(&store, forged, &[], &["g"]).await,
        "seen is not in the history",
    );
    let current = store.position().await.expect("position");
    let ahead = Position {
        version: current.version + 5,
        ..current
    };
    assert_refused(
        commit_rebased(&store, ahead, &[], &["g"]).await,
        "seen is ahead of the store",
    );
    assert_refused(
        commit_rebased(&store, after_project, &[forged], &["g"]).await,
        "an own commit is not in the history",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_kept_no_marks_refuses_rebases_until_the_marks_run_again() {
    let redis = TestRedis::start();
    let store = redis_store(&redis).await;
    commit_exact(&store, &[put(Collection::Features, "a")]).await;
    let seen = commit_exact(&store, &[put(Collection::Features, "b")]).await;
    // A replica of an older version commits (its script keeps no marks): its writes are
    // unknown, so no rebase may pass over them.
    let version = redis.cli_output(&["INCR", &format!("{{{PREFIX}}}:version")]);
    let version = version.trim();
    redis.cli(&["SET", &format!("{{{PREFIX}}}:head"), "77"]);
    redis.cli(&[
        "XADD",
        &format!("{{{PREFIX}}}:changes"),
        &format!("{version}-0"),
        "head",
        "77",
        "changes",
        "[]",
    ]);
    assert_refused(
        commit_rebased(&store, seen, &[], &["c"]).await,
        "an untracked commit since seen",
    );
    // Later commits start a new run of marks; rebases from inside it pass.
    let fresh = commit_exact(&store, &[put(Collection::Features, "d")]).await;
    assert_refused(
        commit_rebased(&store, seen, &[], &["c"]).await,
        "the untracked commit is still after seen",
    );
    commit_exact(&store, &[put(Collection::Features, "e")]).await;
    rebased_position(commit_rebased(&store, fresh, &[], &["c"]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_never_rebases() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::Embedded(EmbeddedStore::open(dir.path()).await.expect("open"));
    let seen = commit_exact(&store, &[put(Collection::Features, "a")]).await;
    commit_exact(&store, &[put(Collection::Features, "b")]).await;
    assert_refused(
        commit_rebased(&store, seen, &[], &["a"]).await,
        "one process writes an embedded store",
    );
}

/// A full toggle record, as the admin API writes one.
fn toggle_record(name: &str) -> Change {
    Change {
        collection: Collection::Features,
        key: name.to_string(),
        value: Some(format!(
            r#"{{"name":"{name}","description":"","type":"release","project":"default","enabled":true,"stale":false,"strategies":[],"createdAt":"2026-01-01T00:00:00Z"}}"#
        )),
    }
}

/// Waits up to 5 s for the listener's next announcement.
async fn next_announcement(announcements: &mut watch::Receiver<Announcement>, what: &str) {
    tokio::time::timeout(Duration::from_secs(5), announcements.changed())
        .await
        .unwrap_or_else(|_| panic!("no {what} within 5 s"))
        .expect("listener running");
}

/// A replica installs its own commit rebased over another replica's write from that write's
/// announcement and its own changes: it needs neither the change log nor its own
/// commit's announcement. Without the other write's change set in hand it declines (the
/// committer then refreshes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebased_commit_is_installed_from_announcements_and_its_own_changes() {
    let redis = TestRedis::start();
    let store = redis_store(&redis).await;
    let other_replica = redis_store(&redis).await;
    let Store::Redis(listener) = store.clone() else {
        unreachable!("a Redis store")
    };
    let (announce, mut announcements) = watch::channel(Announcement::Unknown);
    let shutdown = CancellationToken::new();
    let listening = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { listener.listen_for_versions(announce, shutdown).await }
    });
    next_announcement(&mut announcements, "subscription").await;

    let seen = commit_exact(&store, &[toggle_record("a")]).await;
    let snapshot = Snapshot::new(store.clone());
    snapshot.refresh().await.expect("load");
    // A replica that does not listen has no announcement of the next write in hand.
    let deaf = Snapshot::new(redis_store(&redis).await);
    deaf.refresh().await.expect("load");

    // The listener passes on other replicas' commits only: this is b's.
    let b = commit_exact(&other_replica, &[toggle_record("b")]).await;
    next_announcement(&mut announcements, "announcement of b").await;
    let mine = [toggle_record("c")];
    let check = CommitCheck {
        expected: None,
        rebase: Some(Rebase {
            seen,
            own: Vec::new(),
            toggles: vec!["c".to_string()],
        }),
    };
    let CommitOutcome::Committed {
        position,
        previous,
        rebased: true,
    } = store
        .commit(&check, &mine.clone().into(), &no_events(), &[])
        .await
        .expect("commit")
    else {
        panic!("expected a rebased commit")
    };
    assert_eq!(previous, b, "b came between");

    assert!(!deaf.apply_rebased_commit(previous, position, &mine).await);
    assert_eq!(deaf.state().version, seen.version, "declined, untouched");

    assert!(
        snapshot
            .apply_rebased_commit(previous, position, &mine)
            .await
    );
    let state = snapshot.state();
    assert_eq!(position_of(&state), position);
    let names: Vec<&str> = state.features.keys().map(String::as_str).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let counts = snapshot.update_counts();
    assert_eq!((counts.announced, counts.change_log), (1, 0));

    shutdown.cancel();
    listening.await.expect("listener ends");
}

/// Three replicas on one Redis, with the toggles `names` and the simple tags `tags` created,
/// all of them holding the same version.
struct ThreeReplicas {
    apps: [TestApp; 3],
    _backend: Backend,
}

async fn three_replicas(names: &[String], tags: &[String]) -> ThreeReplicas {
    let backend = Backend::redis();
    // Each replica commits its own writes (the default): the races are what these tests are
    // about.
    let settings = backend.settings();
    let apps = [
        TestApp::spawn_with(settings.clone()).await,
        TestApp::spawn_with(settings.clone()).await,
        TestApp::spawn_with(settings).await,
    ];
    for name in names {
        apps[0].create_toggle(name).await;
    }
    for value in tags {
        apps[0]
            .post("/api/admin/tags", json!({"type": "simple", "value": value}))
            .await
            .expect(201);
    }
    let replicas = ThreeReplicas {
        apps,
        _backend: backend,
    };
    crate::convergence::converge(&replicas.refs()).await;
    replicas
}

impl ThreeReplicas {
    fn refs(&self) -> [&TestApp; 3] {
        [&self.apps[0], &self.apps[1], &self.apps[2]]
    }
}

/// Adds the simple tag `value` to `toggle` through the replica at `base`.
async fn add_tag(http: &reqwest::Client, base: &str, toggle: &str, value: &str) -> Reply {
    send(
        http.post(format!("{base}/api/admin/features/{toggle}/tags"))
            .basic_auth("admin", Some(""))
            .json(&json!({"type": "simple", "value": value})),
    )
    .await
}

/// The values of the tags in a `{"tags": [...]}` listing.
fn tag_values(listing: &Value) -> BTreeSet<String> {
    listing["tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|tag| tag["value"].as_str().expect("value").to_string())
        .collect()
}

const SHARED_TOGGLES: usize = 4;
const TAGGERS: usize = 12;
const TAGS_PER_TAGGER: usize = 10;

/// Writers on three replicas add tags to a few shared toggles. An addition reads the toggle's
/// tags and writes them all back, so a batch committed over another replica's write to the
/// same toggle would drop that write's tag: every tag added with a 201 must be on its toggle
/// at the end, on every replica, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_additions_racing_over_three_replicas_lose_none() {
    let names: Vec<String> = (0..SHARED_TOGGLES).map(|t| format!("r.{t}")).collect();
    // Existing tags: an addition then writes the toggle record only (rebasable).
    let tags: Vec<String> = (0..TAGGERS)
        .flat_map(|w| (0..TAGS_PER_TAGGER).map(move |n| format!("w{w}-{n}")))
        .collect();
    let replicas = three_replicas(&names, &tags).await;
    let apps = replicas.refs();
    let taggers = (0..TAGGERS).map(|w| {
        let app = apps[w % apps.len()];
        let (http, base) = (app.http.clone(), app.base.clone());
        tokio::spawn(async move {
            let mut added = Vec::new();
            for n in 0..TAGS_PER_TAGGER {
                let toggle = (w + n) % SHARED_TOGGLES;
                let value = format!("w{w}-{n}");
                let reply = add_tag(&http, &base, &format!("r.{toggle}"), &value).await;
                match reply.status.as_u16() {
                    201 => added.push((toggle, value)),
                    // Gave up after every attempt: nothing was written.
                    503 => {}
                    other => panic!(
                        "tagging r.{toggle}: {other} {}",
                        String::from_utf8_lossy(&reply.bytes)
                    ),
                }
            }
            added
        })
    });
    let joined = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(taggers),
    )
    .await
    .expect("the taggers did not finish within 60 s");
    let mut expected = vec![BTreeSet::new(); SHARED_TOGGLES];
    for tagger in joined {
        for (toggle, value) in tagger.expect("tagger task") {
            expected[toggle].insert(value);
        }
    }
    let added: usize = expected.iter().map(BTreeSet::len).sum();
    assert!(
        added >= TAGGERS * TAGS_PER_TAGGER / 2,
        "only {added} additions succeeded"
    );
    crate::convergence::converge(&apps).await;
    for app in apps {
        for (t, expected) in expected.iter().enumerate() {
            let tags = app
                .get(&format!("/api/admin/features/r.{t}/tags"))
                .await
                .expect(200)
                .json;
            assert_eq!(&tag_values(&tags), expected, "tags of r.{t}");
        }
    }
    let (mut rebased, mut from_snapshot, mut carried) = (0.0, 0.0, 0.0);
    for app in apps {
        let text = app.metrics_text().await;
        let counter =
            |name: &str| prometheus_sample(&text, name).unwrap_or_else(|| panic!("{name} missing"));
        rebased += counter("flagpole_write_rebased_commits_total");
        from_snapshot += counter("flagpole_write_snapshot_checked_commits_total");
        carried += counter("flagpole_write_carried_over_batches_total");
    }
    eprintln!(
        "{added} tags added over 3 replicas; {rebased} batches committed by a rebase, \
         {from_snapshot} checked from the snapshot, {carried} carried over a lost race"
    );
    // The race this test is about happened (each run sees dozens).
    assert!(rebased > 0.0, "no batch was committed by a rebase");
}

/// Taggers on two replicas add existing tags to their own toggles while a third replica
/// deletes tags. An addition checks that its tag exists, a record outside the toggles: one
/// decided before a deletion must not be committed after it by a rebase, or its toggle would
/// carry a tag that no longer exists. Each tagger also reads its write back from its replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_deleted_meanwhile_is_never_added_by_a_rebase() {
    const TOGGLES: usize = 8;
    const TAGS: usize = 24;
    const DELETE_EVERY: usize = 3;
    let names: Vec<String> = (0..TOGGLES).map(|t| format!("d.{t}")).collect();
    let tags: Vec<String> = (0..TAGS).map(|n| format!("v{n}")).collect();
    let replicas = three_replicas(&names, &tags).await;
    let apps = replicas.refs();
    let [a, _, c] = apps;
    let taggers = (0..TOGGLES).map(|t| {
        let app = apps[t % 2];
        let (http, base) = (app.http.clone(), app.base.clone());
        tokio::spawn(async move {
            for n in 0..TAGS {
                let value = format!("v{n}");
                let reply = add_tag(&http, &base, &format!("d.{t}"), &value).await;
                match reply.status.as_u16() {
                    // Tags the deleter leaves alone must show at once on the adding replica.
                    201 if n % DELETE_EVERY != 0 => {
                        let tags = send(
                            http.get(format!("{base}/api/admin/features/d.{t}/tags"))
                                .basic_auth("admin", Some("")),
                        )
                        .await
                        .expect(200)
                        .json;
                        assert!(
                            tag_values(&tags).contains(&value),
                            "d.{t}: the replica that added {value} does not show it"
                        );
                    }
                    // Added before its deletion (201), deleted first (404), or every attempt
                    // lost (503).
                    201 | 404 | 503 => {}
                    other => panic!(
                        "tagging d.{t}: {other} {}",
                        String::from_utf8_lossy(&reply.bytes)
                    ),
                }
            }
        })
    });
    let deleter = {
        let (http, base) = (c.http.clone(), c.base.clone());
        tokio::spawn(async move {
            for n in (0..TAGS).step_by(DELETE_EVERY) {
                tokio::time::sleep(Duration::from_millis(15)).await;
                let reply = send(
                    http.delete(format!("{base}/api/admin/tags/simple/v{n}"))
                        .basic_auth("admin", Some("")),
                )
                .await;
                assert!(
                    matches!(reply.status.as_u16(), 200 | 204 | 503),
                    "deleting v{n}: {}",
                    reply.status
                );
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        for tagger in futures_util::future::join_all(taggers).await {
            tagger.expect("tagger task");
        }
        deleter.await.expect("deleter task");
    })
    .await
    .expect("the writers did not finish within 60 s");
    crate::convergence::converge(&apps).await;
    let existing = tag_values(&a.get("/api/admin/tags").await.expect(200).json);
    assert!(existing.len() < TAGS, "no tag was deleted");
    for t in 0..TOGGLES {
        let tags = a
            .get(&format!("/api/admin/features/d.{t}/tags"))
            .await
            .expect(200)
            .json;
        for value in tag_values(&tags) {
            assert!(
                existing.contains(&value),
                "d.{t} carries the deleted tag {value}"
            );
        }
    }
}
