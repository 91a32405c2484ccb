//! Conformance: the change feed and watch streams.

use std::collections::BTreeMap;

use meshlink_store::{ChangeType, Store};
use serde_json::json;

use super::{
    Harness, assert_feed_is_gap_free, collect_consecutive, create, is_create_of, key, labels,
    next_change,
};

pub async fn delete_appears_in_feed_with_last_body(h: &Harness) {
    let store = h.open().await;
    let k = key("default", "web");
    create(&*store, "default", "web").await;
    let last_labels = labels(&[("app", "web"), ("v", "2")]);
    store
        .update(&k, &last_labels, &json!({"v": 2}), None)
        .await
        .unwrap();
    store.delete(&k, None).await.unwrap();

    let feed = assert_feed_is_gap_free(&*store, 3).await;
    let types: Vec<ChangeType> = feed.iter().map(|c| c.change_type).collect();
    assert_eq!(
        types,
        [
            ChangeType::Created,
            ChangeType::Updated,
            ChangeType::Deleted
        ]
    );
    let deleted = &feed[2].object;
    assert_eq!(deleted.key, k);
    assert_eq!(
        deleted.body,
        json!({"v": 2}),
        "a delete carries the last body"
    );
    assert_eq!(deleted.labels, last_labels);
    assert_eq!((deleted.revision, deleted.create_revision), (3, 1));
    assert_eq!(feed[1].object.body, json!({"v": 2}));
    assert_eq!(feed[0].object.body, json!({"name": "web"}));
}

pub async fn changes_since_pages_in_order(h: &Harness) {
    let store = h.open().await;
    for i in 0..30 {
        create(&*store, "default", &format!("o{i}")).await;
    }
    let revs = |v: Vec<meshlink_store::Change>| v.iter().map(|c| c.revision).collect::<Vec<_>>();
    assert_eq!(
        revs(store.changes_since(0, 10).await.unwrap()),
        (1..=10).collect::<Vec<_>>()
    );
    assert_eq!(
        revs(store.changes_since(10, 10).await.unwrap()),
        (11..=20).collect::<Vec<_>>()
    );
    assert_eq!(
        revs(store.changes_since(25, 100).await.unwrap()),
        (26..=30).collect::<Vec<_>>()
    );
    assert!(store.changes_since(30, 10).await.unwrap().is_empty());
    let first = &store.changes_since(0, 1).await.unwrap()[0];
    assert!(is_create_of(first, "default", "o0"));
}

pub async fn watch_replays_then_follows_in_order(h: &Harness) {
    let store = h.open().await;
    for i in 0..20 {
        create(&*store, "default", &format!("pre{i}")).await;
    }
    let mut watch = store.watch(0);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { mixed_writes(&*store, 100).await })
    };
    let seen = collect_consecutive(&mut watch, 1, 120).await;
    writer.await.unwrap();
    assert_eq!(
        seen,
        store.changes_since(0, 1000).await.unwrap(),
        "watch agrees with the feed"
    );

    create(&*store, "default", "after").await;
    let next = next_change(&mut watch).await;
    assert_eq!(next.revision, 121, "no duplicate after the last change");
    assert!(is_create_of(&next, "default", "after"));
}

/// `n` writes mixing creates, updates and deletes.
async fn mixed_writes(store: &dyn Store, n: usize) {
    let mut i = 0;
    while i < n {
        let name = format!("live{i}");
        let k = key("default", &name);
        create(store, "default", &name).await;
        i += 1;
        if i < n {
            store
                .update(&k, &BTreeMap::new(), &json!({"i": i}), None)
                .await
                .unwrap();
            i += 1;
        }
        if i < n && i.is_multiple_of(3) {
            store.delete(&k, None).await.unwrap();
            i += 1;
        }
    }
}

pub async fn watch_resumes_after_restart(h: &Harness) {
    let store = h.open().await;
    for i in 0..10 {
        create(&*store, "default", &format!("o{i}")).await;
    }
    drop(store);

    let store = h.open().await;
    assert_eq!(store.current_revision().await.unwrap(), 10);
    let mut watch = store.watch(5);
    let replayed = collect_consecutive(&mut watch, 6, 5).await;
    assert!(is_create_of(&replayed[0], "default", "o5"));
    assert!(is_create_of(&replayed[4], "default", "o9"));
    let obj = create(&*store, "default", "after-restart").await;
    assert_eq!(obj.revision, 11);
    assert!(is_create_of(
        &next_change(&mut watch).await,
        "default",
        "after-restart"
    ));
}

pub async fn watcher_sees_writes_made_after_it_started(h: &Harness) {
    let store = h.open().await;
    create(&*store, "default", "before").await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watch = store.watch(store.current_revision().await.unwrap());
    let watcher = tokio::spawn(async move {
        loop {
            let change = next_change(&mut watch).await;
            if tx.send(change).is_err() {
                return;
            }
        }
    });
    // Each write lands while the watcher is idle, waiting for a wake-up.
    for i in 0..5 {
        let name = format!("after{i}");
        let written = create(&*store, "default", &name).await;
        let change = tokio::time::timeout(super::DEADLINE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("watcher did not see {name} within {:?}", super::DEADLINE))
            .unwrap();
        assert_eq!(change.revision, written.revision);
        assert!(is_create_of(&change, "default", &name));
    }
    watcher.abort();
}

pub async fn watch_replays_large_history_in_pages(h: &Harness) {
    const N: u64 = 1_200;
    let store = h.open().await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4 {
        let store = store.clone();
        tasks.spawn(async move {
            for i in 0..N / 4 {
                create(&*store, "default", &format!("t{t}-{i}")).await;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let all = collect_consecutive(&mut store.watch(0), 1, N).await;
    assert_eq!(all, store.changes_since(0, N as usize).await.unwrap());
    collect_consecutive(&mut store.watch(700), 701, N - 700).await;
}
