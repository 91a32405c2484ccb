//! Conformance: batch writes (`Store::write_batch`) and multi-gets
//! (`Store::get_many`). A batch is one transaction whose items are decided
//! in order, each with its own revision and change; a failed precondition
//! fails only its own item. Durability of batches is checked with the
//! kill -9 writer in `durability.rs`.

use std::collections::BTreeMap;

use meshlink_store::{BatchWrite, ChangeType, ObjectKey, Store, StoreError};
use serde_json::json;

use super::{Harness, assert_feed_is_gap_free, collect_consecutive, create, key, labels};

fn update(k: ObjectKey, v: i64, expected_revision: Option<u64>) -> BatchWrite {
    BatchWrite::Update {
        key: k,
        labels: labels(&[("v", &v.to_string())]),
        body: json!({ "v": v }),
        expected_revision,
    }
}

fn create_item(k: ObjectKey) -> BatchWrite {
    BatchWrite::Create {
        key: k,
        labels: BTreeMap::new(),
        body: json!({ "new": true }),
    }
}

fn put(k: ObjectKey, v: i64) -> BatchWrite {
    BatchWrite::Put {
        key: k,
        labels: BTreeMap::new(),
        body: json!({ "put": v }),
    }
}

/// Every item takes the next revision in item order and appears in the
/// feed (and to a watcher) as its own change, with its own type.
pub async fn batch_items_take_consecutive_revisions_in_order(h: &Harness) {
    let store = h.open().await;
    let a = create(&*store, "default", "a").await;
    let mut watch = store.watch(1);
    let results = store
        .write_batch(&[
            update(key("default", "a"), 1, Some(a.revision)),
            create_item(key("other", "b")),
            put(key("default", "c"), 1),
            put(key("default", "c"), 2),
            update(key("default", "a"), 2, Some(2)),
        ])
        .await
        .expect("batch");
    let revisions: Vec<u64> = results
        .iter()
        .map(|r| r.as_ref().expect("every item applies").revision)
        .collect();
    assert_eq!(revisions, [2, 3, 4, 5, 6]);
    let c = results[3].as_ref().unwrap();
    assert_eq!(
        (c.create_revision, &c.body),
        (4, &json!({ "put": 2 })),
        "a Put of an existing object updates it"
    );

    let seen = collect_consecutive(&mut watch, 2, 5).await;
    let what: Vec<(ChangeType, String)> = seen
        .iter()
        .map(|c| (c.change_type, c.object.key.to_string()))
        .collect();
    assert_eq!(
        what,
        [
            (ChangeType::Updated, "Thing/default/a".into()),
            (ChangeType::Created, "Thing/other/b".into()),
            (ChangeType::Created, "Thing/default/c".into()),
            (ChangeType::Updated, "Thing/default/c".into()),
            (ChangeType::Updated, "Thing/default/a".into()),
        ]
    );
    assert_eq!(seen[0].object.body, json!({ "v": 1 }));
    assert_feed_is_gap_free(&*store, 6).await;
    let stored = store.get(&key("default", "a")).await.unwrap().unwrap();
    assert_eq!((stored.revision, stored.body), (6, json!({ "v": 2 })));
    assert_eq!(stored.labels, labels(&[("v", "2")]));
}

/// A conflict, a duplicate create and an update of a missing object fail
/// only their own items, take no revision and change nothing.
pub async fn batch_item_failures_do_not_lose_the_others(h: &Harness) {
    let store = h.open().await;
    create(&*store, "default", "a").await;
    create(&*store, "default", "b").await;
    let results = store
        .write_batch(&[
            update(key("default", "a"), 1, Some(99)),
            create_item(key("default", "b")),
            update(key("default", "missing"), 1, None),
            update(key("default", "b"), 1, Some(2)),
            create_item(key("default", "d")),
        ])
        .await
        .expect("a batch with failing items still commits the others");
    match &results[0] {
        Err(StoreError::Conflict {
            expected, actual, ..
        }) => assert_eq!((*expected, *actual), (99, 1)),
        other => panic!("stale expected revision: want Conflict, got {other:?}"),
    }
    assert!(
        matches!(results[1], Err(StoreError::AlreadyExists(_))),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(results[2], Err(StoreError::NotFound(_))),
        "{:?}",
        results[2]
    );
    assert_eq!(results[3].as_ref().unwrap().revision, 3);
    assert_eq!(results[4].as_ref().unwrap().revision, 4);
    assert_feed_is_gap_free(&*store, 4).await;
    let a = store.get(&key("default", "a")).await.unwrap().unwrap();
    assert_eq!(
        (a.revision, a.body),
        (1, json!({ "name": "a" })),
        "conflicted item unchanged"
    );
    assert!(
        store
            .get(&key("default", "missing"))
            .await
            .unwrap()
            .is_none()
    );

    // A batch whose every item fails writes nothing and keeps working.
    let results = store
        .write_batch(&[update(key("default", "a"), 5, Some(42))])
        .await
        .unwrap();
    assert!(matches!(results[0], Err(StoreError::Conflict { .. })));
    assert_eq!(store.current_revision().await.unwrap(), 4);
    assert!(store.write_batch(&[]).await.unwrap().is_empty());
    assert_eq!(create(&*store, "default", "e").await.revision, 5);
}

/// A reader polling the feed while a large batch (more rows than one
/// statement holds) commits sees none of it or all of it, never a part.
pub async fn batch_becomes_visible_all_at_once(h: &Harness) {
    const ITEMS: u64 = 1_200;
    let store = h.open().await;
    create(&*store, "default", "before").await;
    let writes: Vec<BatchWrite> = (0..ITEMS)
        .map(|i| put(key("bulk", &format!("o{i:05}")), i as i64))
        .collect();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { store.write_batch(&writes).await })
    };
    let mut observed = Vec::new();
    while !writer.is_finished() {
        let n = store.changes_since(1, 10_000).await.unwrap().len() as u64;
        observed.push(n);
        tokio::task::yield_now().await;
    }
    let results = writer.await.unwrap().expect("batch");
    assert!(results.iter().all(Result::is_ok));
    assert!(
        observed.iter().all(|&n| n == 0 || n == ITEMS),
        "a reader saw part of a batch: {:?}",
        observed
            .iter()
            .filter(|&&n| n != 0 && n != ITEMS)
            .collect::<Vec<_>>()
    );
    let feed = assert_feed_is_gap_free(&*store, ITEMS + 1).await;
    assert_eq!(feed[1].object.key, key("bulk", "o00000"));
    assert_eq!(
        feed[ITEMS as usize].object.body,
        json!({ "put": ITEMS - 1 })
    );
}

/// Deletes in a batch remove their objects in the same commit as the
/// other items, each with its own `Deleted` change carrying the object as
/// it was; a delete at a stale revision or of a missing object fails
/// alone; an object created and deleted in one batch is not stored.
pub async fn batch_deletes_go_with_the_other_items(h: &Harness) {
    let store = h.open().await;
    let a = create(&*store, "default", "a").await;
    create(&*store, "default", "b").await;
    let del = |k, expected_revision| BatchWrite::Delete {
        key: k,
        expected_revision,
    };
    let results = store
        .write_batch(&[
            del(key("default", "a"), Some(a.revision)),
            del(key("default", "b"), Some(99)),
            del(key("default", "missing"), None),
            create_item(key("default", "c")),
            del(key("default", "c"), None),
            put(key("default", "d"), 1),
        ])
        .await
        .expect("batch");
    assert_eq!(results[0].as_ref().unwrap().body, json!({ "name": "a" }));
    assert!(matches!(results[1], Err(StoreError::Conflict { .. })));
    assert!(matches!(results[2], Err(StoreError::NotFound(_))));
    let feed = assert_feed_is_gap_free(&*store, 6).await;
    let what: Vec<(ChangeType, String)> = feed[2..]
        .iter()
        .map(|c| (c.change_type, c.object.key.to_string()))
        .collect();
    assert_eq!(
        what,
        [
            (ChangeType::Deleted, "Thing/default/a".into()),
            (ChangeType::Created, "Thing/default/c".into()),
            (ChangeType::Deleted, "Thing/default/c".into()),
            (ChangeType::Created, "Thing/default/d".into()),
        ]
    );
    assert_eq!(feed[2].object.body, json!({ "name": "a" }));
    for (name, kept) in [("a", false), ("b", true), ("c", false), ("d", true)] {
        let got = store.get(&key("default", name)).await.unwrap();
        assert_eq!(got.is_some(), kept, "{name}");
    }
    // A deleted key can be created again afterwards.
    assert_eq!(create(&*store, "default", "a").await.create_revision, 7);
}

/// `get_many` answers every key in the order asked, across kinds, meshes
/// and more keys than one statement holds; missing keys are `None`.
pub async fn get_many_answers_each_key_in_order(h: &Harness) {
    let store = h.open().await;
    let writes: Vec<BatchWrite> = (0..700)
        .map(|i| put(key("m1", &format!("n{i}")), i))
        .chain([put(ObjectKey::new("Other", "", "g"), 1)])
        .collect();
    store.write_batch(&writes).await.unwrap();
    let mut keys: Vec<ObjectKey> = (0..700)
        .rev()
        .map(|i| key("m1", &format!("n{i}")))
        .collect();
    keys.insert(3, key("m2", "n1"));
    keys.insert(5, ObjectKey::new("Other", "", "g"));
    keys.push(key("m1", "n5"));
    let got = store.get_many(&keys).await.expect("get_many");
    assert_eq!(got.len(), keys.len());
    for (k, o) in keys.iter().zip(&got) {
        match o {
            Some(o) => assert_eq!(&o.key, k),
            None => assert_eq!(k, &key("m2", "n1"), "{k} should exist"),
        }
    }
    assert!(got[3].is_none());
    assert_eq!(got[0].as_ref().unwrap().body, json!({ "put": 699 }));
    assert_eq!(
        got.last().unwrap().as_ref().unwrap().body,
        json!({ "put": 5 })
    );
    assert!(store.get_many(&[]).await.unwrap().is_empty());
}

/// Writes one batch of `size` creates named `b{batch}-{i}`, all applied.
pub async fn write_batch_of_creates(store: &dyn Store, batch: u64, size: u64) {
    let writes: Vec<BatchWrite> = (0..size)
        .map(|i| create_item(key("default", &format!("b{batch}-{i}"))))
        .collect();
    for r in store.write_batch(&writes).await.expect("batch") {
        r.expect("batch item");
    }
}
