//! The store conformance suite against a real PostgreSQL server, plus the
//! HA checks: several control planes (`PostgresStore` instances) sharing one
//! database.
//!
//! Needs `MESHLINK_TEST_POSTGRES_URL`, a server where the test may
//! `CREATE DATABASE`; each test creates its own database, so tests run in
//! parallel. Start a throwaway server with:
//!
//! ```sh
//! export MESHLINK_TEST_POSTGRES_URL=$(scripts/pg-test-server start)
//! ```

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use meshlink_store::{PostgresOptions, PostgresStore, Store};
use sqlx::Connection;

use conformance::{Harness, collect_consecutive, conformance_suite, create};

const URL_ENV: &str = "MESHLINK_TEST_POSTGRES_URL";

/// A fresh database on the test server, dropped after a passing test.
async fn harness() -> Harness {
    let Ok(server) = std::env::var(URL_ENV) else {
        panic!(
            "{URL_ENV} is not set: the PostgreSQL store tests need a server. Run \
             `export {URL_ENV}=$(scripts/pg-test-server start)` from the repository root \
             (it starts a throwaway local server) and run the tests again."
        );
    };
    let name = format!("meshlink_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&server)
        .await
        .unwrap_or_else(|e| {
            panic!("cannot connect to {URL_ENV}={server}: {e}; is scripts/pg-test-server running?")
        });
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name} on {server}: {e}"));
    let url = with_database(&server, &name);
    Harness::new(url, ()).with_cleanup(move || {
        Box::pin(async move {
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            sqlx::query(&drop).execute(&mut admin).await.unwrap();
        })
    })
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

conformance_suite!(harness());

/// A control-plane instance whose watchers never poll: only a wake-up
/// (local write or `LISTEN`) can deliver a change.
async fn instance(url: &str) -> Arc<dyn Store> {
    let options = PostgresOptions {
        fallback_poll: Duration::from_secs(3600),
        ..PostgresOptions::default()
    };
    Arc::new(PostgresStore::connect_with(url, options).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn control_planes_sharing_a_database_see_each_others_writes() {
    let h = harness().await;
    let (a, b) = (instance(&h.url).await, instance(&h.url).await);
    assert_eq!(a.backend(), "postgres");
    let (mut watch_a, mut watch_b) = (a.watch(0), b.watch(0));
    let mut revision = 0;
    for (i, writer) in [&b, &a, &b, &a, &b].into_iter().enumerate() {
        revision += 1;
        let name = format!("o{i}");
        assert_eq!(create(&**writer, "default", &name).await.revision, revision);
        for watch in [&mut watch_a, &mut watch_b] {
            let seen = collect_consecutive(watch, revision, 1).await;
            assert!(conformance::is_create_of(&seen[0], "default", &name));
        }
    }
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_through_two_control_planes_stay_ordered() {
    const PER_TASK: u64 = 50;
    let h = harness().await;
    let (a, b) = (instance(&h.url).await, instance(&h.url).await);
    let watchers = [a.watch(0), b.watch(0)].map(|mut w| {
        tokio::spawn(async move { collect_consecutive(&mut w, 1, 8 * PER_TASK).await })
    });
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8u32 {
        let store = if t.is_multiple_of(2) {
            a.clone()
        } else {
            b.clone()
        };
        tasks.spawn(async move {
            for i in 0..PER_TASK {
                create(&*store, "default", &format!("t{t}-{i}")).await;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let feed = conformance::assert_feed_is_gap_free(&*b, 8 * PER_TASK).await;
    for watcher in watchers {
        assert_eq!(
            watcher.await.unwrap(),
            feed,
            "each instance's watcher saw the whole feed in order"
        );
    }
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_revision_updates_through_two_control_planes_have_one_winner() {
    let h = harness().await;
    let (a, b) = (instance(&h.url).await, instance(&h.url).await);
    let k = conformance::key("default", "leader");
    let base = create(&*a, "default", "leader").await.revision;
    let body = serde_json::json!({});
    let labels = Default::default();
    let (ra, rb) = tokio::join!(
        a.update(&k, &labels, &body, Some(base)),
        b.update(&k, &labels, &body, Some(base))
    );
    let winners = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
    assert_eq!(winners, 1, "a: {ra:?}, b: {rb:?}");
    let loser = if ra.is_ok() { rb } else { ra };
    assert!(
        matches!(loser, Err(meshlink_store::StoreError::Conflict { expected, actual, .. })
        if expected == base && actual == base + 1)
    );
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn control_planes_starting_together_migrate_once() {
    let h = harness().await;
    let (a, b, c) = tokio::join!(
        PostgresStore::connect(&h.url),
        PostgresStore::connect(&h.url),
        PostgresStore::connect(&h.url)
    );
    let stores = [a.unwrap(), b.unwrap(), c.unwrap()];
    for (i, store) in stores.iter().enumerate() {
        let name = format!("o{i}");
        assert_eq!(create(store, "default", &name).await.revision, i as u64 + 1);
    }
    h.finish().await;
}

#[test]
fn database_urls_are_rewritten_for_the_test_database() {
    assert_eq!(
        with_database("postgres://u@h:1/postgres", "x"),
        "postgres://u@h:1/x"
    );
    assert_eq!(with_database("postgres://u@h:1", "x"), "postgres://u@h:1/x");
    assert_eq!(
        with_database("postgres://u@h/p?sslmode=disable", "x"),
        "postgres://u@h/x?sslmode=disable"
    );
}

/// Two control planes compact the same feed at once while both write and
/// a watcher follows: the mark only rises, no change is lost from the
/// objects, and the watcher sees every change in order until it is told
/// "compacted", never a silent gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_compactors_on_two_control_planes_never_open_a_silent_gap() {
    const PER_TASK: u64 = 150;
    let h = harness().await;
    let (a, b) = (instance(&h.url).await, instance(&h.url).await);
    let mut watch = b.watch(0);
    let mut writers = tokio::task::JoinSet::new();
    for (t, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        writers.spawn(async move {
            for i in 0..PER_TASK {
                create(&*store, "default", &format!("w{t}-{i}")).await;
            }
        });
    }
    let mut compactors = tokio::task::JoinSet::new();
    for store in [a.clone(), b.clone()] {
        compactors.spawn(async move {
            let mut marks = Vec::new();
            for _ in 0..20 {
                let current = store.current_revision().await.unwrap();
                let done = store.compact(current.saturating_sub(20)).await.unwrap();
                marks.push(done.revision);
                tokio::task::yield_now().await;
            }
            marks
        });
    }
    let mut last = 0;
    let told = loop {
        match tokio::time::timeout(conformance::DEADLINE, futures::StreamExt::next(&mut watch))
            .await
            .expect("the watcher got no answer")
        {
            Some(Ok(change)) => {
                assert_eq!(change.revision, last + 1, "a change was skipped");
                last = change.revision;
                if last == 2 * PER_TASK {
                    break None;
                }
            }
            Some(Err(e)) => break Some(e),
            None => panic!("the watch ended without an error"),
        }
    };
    if let Some(e) = told {
        assert!(
            matches!(e, meshlink_store::StoreError::Compacted { requested, .. } if requested == last),
            "{e}"
        );
    }
    while let Some(r) = writers.join_next().await {
        r.unwrap();
    }
    while let Some(marks) = compactors.join_next().await {
        let marks = marks.unwrap();
        assert!(
            marks.windows(2).all(|w| w[0] <= w[1]),
            "the mark fell: {marks:?}"
        );
    }
    let all = meshlink_store::ListQuery {
        kind: "Thing".into(),
        ..Default::default()
    };
    assert_eq!(a.list(&all).await.unwrap().len(), 2 * PER_TASK as usize);
    let compacted = a.compacted_revision().await.unwrap();
    let rest = a.changes_since(compacted, 10_000).await.unwrap();
    assert_eq!(
        rest.iter().map(|c| c.revision).collect::<Vec<_>>(),
        (compacted + 1..=2 * PER_TASK).collect::<Vec<_>>()
    );
    h.finish().await;
}
