//! Conformance: object CRUD, conflicts, lists and concurrent writers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use meshlink_store::{LabelSelector, ListQuery, ObjectKey, StoreError};
use serde_json::json;

use super::{Harness, assert_feed_is_gap_free, create, key, labels};

pub async fn crud_round_trip(h: &Harness) {
    let store = h.open().await;
    assert_eq!(store.current_revision().await.unwrap(), 0);
    let k = key("default", "web");
    let created = store
        .create(&k, &labels(&[("app", "web")]), &json!({"port": 80}))
        .await
        .unwrap();
    assert_eq!((created.revision, created.create_revision), (1, 1));
    assert_eq!(created.key, k);
    assert_eq!(store.get(&k).await.unwrap(), Some(created.clone()));

    // Same name under another mesh, kind, or as a global kind: distinct objects.
    let other_mesh = store
        .create(&key("other", "web"), &BTreeMap::new(), &json!(1))
        .await
        .unwrap();
    let global = ObjectKey::new("Mesh", "", "web");
    let global_obj = store
        .create(&global, &BTreeMap::new(), &json!({"g": true}))
        .await
        .unwrap();
    assert_eq!((other_mesh.revision, global_obj.revision), (2, 3));
    assert_eq!(
        store.get(&global).await.unwrap().unwrap().body,
        json!({"g": true})
    );

    let updated = store
        .update(
            &k,
            &labels(&[("app", "web"), ("v", "2")]),
            &json!({"port": 81}),
            None,
        )
        .await
        .unwrap();
    assert_eq!((updated.revision, updated.create_revision), (4, 1));
    assert_eq!(updated.labels, labels(&[("app", "web"), ("v", "2")]));
    assert_eq!(store.get(&k).await.unwrap(), Some(updated.clone()));

    let deleted = store.delete(&k, Some(4)).await.unwrap();
    assert_eq!(deleted, updated, "delete returns the object as it was");
    assert_eq!(store.get(&k).await.unwrap(), None);
    assert_eq!(
        store.get(&key("other", "web")).await.unwrap(),
        Some(other_mesh)
    );
    assert_eq!(store.current_revision().await.unwrap(), 5);
    assert_eq!(store.backend(), store.backend().to_lowercase());
}

pub async fn already_exists_and_not_found(h: &Harness) {
    let store = h.open().await;
    let k = key("default", "web");
    create(&*store, "default", "web").await;
    let err = store
        .create(&k, &BTreeMap::new(), &json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists(ref s) if s == "Thing/default/web"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "Thing/default/web already exists");

    let missing = key("default", "nope");
    let err = store
        .update(&missing, &BTreeMap::new(), &json!({}), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NotFound(ref s) if s == "Thing/default/nope"),
        "{err:?}"
    );
    let err = store
        .update(&missing, &BTreeMap::new(), &json!({}), Some(1))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    let err = store.delete(&missing, None).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");

    // Failed writes take no revision: the next write gets 2.
    assert_eq!(store.current_revision().await.unwrap(), 1);
    assert_eq!(create(&*store, "default", "api").await.revision, 2);
    assert_feed_is_gap_free(&*store, 2).await;
}

pub async fn stale_expected_revision_conflicts(h: &Harness) {
    let store = h.open().await;
    let k = key("default", "web");
    create(&*store, "default", "web").await;
    store
        .update(&k, &BTreeMap::new(), &json!({"v": 2}), Some(1))
        .await
        .unwrap();

    let err = store
        .update(&k, &BTreeMap::new(), &json!({"v": 3}), Some(1))
        .await
        .unwrap_err();
    match &err {
        StoreError::Conflict {
            key,
            expected,
            actual,
        } => {
            assert_eq!(
                (key.as_str(), *expected, *actual),
                ("Thing/default/web", 1, 2)
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(err.to_string().contains("read it again and retry"), "{err}");
    let err = store.delete(&k, Some(1)).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.get(&k).await.unwrap().unwrap().body, json!({"v": 2}));

    assert_eq!(store.delete(&k, Some(2)).await.unwrap().revision, 2);
    assert_feed_is_gap_free(&*store, 3).await;
}

pub async fn bodies_round_trip_exactly(h: &Harness) {
    let store = h.open().await;
    let body = json!({
        "unicode": "grüße ✓ 日本",
        "nul": "a\u{0}b",
        "quotes": "it's \"quoted\" \\ back",
        "big": u64::MAX,
        "neg": i64::MIN,
        "float": 0.1,
        "nested": {"list": [1, null, true, {"z": [], "a": {}}]},
    });
    let lbl = labels(&[("kuma.io/service", "web_80"), ("empty", "")]);
    let k = key("default", "odd");
    store.create(&k, &lbl, &body).await.unwrap();
    drop(store);
    let store = h.open().await;
    let got = store.get(&k).await.unwrap().unwrap();
    assert_eq!(got.body, body);
    assert_eq!(got.labels, lbl);
    let feed = store.changes_since(0, 10).await.unwrap();
    assert_eq!(feed[0].object.body, body);
}

pub async fn lists_sort_by_mesh_then_name_and_filter(h: &Harness) {
    let store = h.open().await;
    // Byte order, not locale order: uppercase before lowercase, '-' < '.' < '_'.
    let names = ["a_1", "B", "a.1", "a-1", "Z", "a", "b"];
    for (i, name) in names.iter().enumerate() {
        let mesh = if i.is_multiple_of(2) { "m2" } else { "m1" };
        let lbl = labels(&[(
            "tier",
            if i.is_multiple_of(3) {
                "gold"
            } else {
                "silver"
            },
        )]);
        store
            .create(&key(mesh, name), &lbl, &json!(i))
            .await
            .unwrap();
    }
    store
        .create(
            &ObjectKey::new("Other", "m1", "x"),
            &BTreeMap::new(),
            &json!(0),
        )
        .await
        .unwrap();

    let all = store.list(&query(None, None)).await.unwrap();
    let got: Vec<(String, String)> = all
        .iter()
        .map(|o| (o.key.mesh.clone(), o.key.name.clone()))
        .collect();
    let mut want = got.clone();
    want.sort();
    assert_eq!(got, want, "list order");
    assert_eq!(got.len(), names.len(), "only kind Thing is listed");
    assert_eq!(got[0], ("m1".to_string(), "B".to_string()));

    let m2 = store.list(&query(Some("m2"), None)).await.unwrap();
    let m2_names: Vec<&str> = m2.iter().map(|o| o.key.name.as_str()).collect();
    assert_eq!(m2_names, ["Z", "a.1", "a_1", "b"]);

    let gold = store
        .list(&query(Some("m2"), Some("tier=gold")))
        .await
        .unwrap();
    let gold_names: Vec<&str> = gold.iter().map(|o| o.key.name.as_str()).collect();
    assert_eq!(gold_names, ["a_1", "b"]);
    let not_gold = store.list(&query(None, Some("tier!=gold"))).await.unwrap();
    assert_eq!(not_gold.len(), 4);
    assert!(
        store
            .list(&query(None, Some("!tier")))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list(&query(Some("nope"), None))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn large_lists_with_selectors(h: &Harness) {
    const N: usize = 5_000;
    let store = h.open().await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4 {
        let store = store.clone();
        tasks.spawn(async move {
            for i in (t..N).step_by(4) {
                let (mesh, lbl) = large_item(i);
                store
                    .create(&key(&mesh, &format!("obj-{i:05}")), &lbl, &json!({"i": i}))
                    .await
                    .unwrap();
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }

    let all = store.list(&query(None, None)).await.unwrap();
    assert_eq!(all.len(), N);
    let keys: Vec<(String, String)> = all
        .iter()
        .map(|o| (o.key.mesh.clone(), o.key.name.clone()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "5,000 objects listed in (mesh, name) order");

    for (mesh, sel) in [
        (None, "tier=gold"),
        (Some("m3"), "tier!=gold,canary"),
        (Some("m0"), "!canary"),
    ] {
        let selector = LabelSelector::parse(sel).unwrap();
        let want: BTreeSet<usize> = (0..N)
            .filter(|i| {
                let (m, lbl) = large_item(*i);
                mesh.is_none_or(|mesh| mesh == m) && selector.matches(&lbl)
            })
            .collect();
        let got: BTreeSet<usize> = store
            .list(&query(mesh, Some(sel)))
            .await
            .unwrap()
            .iter()
            .map(|o| o.body["i"].as_u64().unwrap() as usize)
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want, "list mesh={mesh:?} selector={sel}");
    }
    assert_feed_is_gap_free(&*store, N as u64).await;
}

fn large_item(i: usize) -> (String, BTreeMap<String, String>) {
    let tier = if i.is_multiple_of(3) {
        "gold"
    } else {
        "silver"
    };
    let mut lbl = labels(&[("tier", tier)]);
    if i.is_multiple_of(7) {
        lbl.insert("canary".into(), "true".into());
    }
    (format!("m{}", i % 5), lbl)
}

pub async fn concurrent_creates_take_every_revision_once(h: &Harness) {
    let store = h.open().await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8 {
        let store = store.clone();
        tasks.spawn(async move {
            let mut revisions = Vec::new();
            for i in 0..50 {
                revisions.push(
                    create(&*store, "default", &format!("t{t}-{i}"))
                        .await
                        .revision,
                );
            }
            revisions
        });
    }
    let mut acknowledged = Vec::new();
    while let Some(r) = tasks.join_next().await {
        acknowledged.extend(r.unwrap());
    }
    acknowledged.sort();
    assert_eq!(
        acknowledged,
        (1..=400).collect::<Vec<u64>>(),
        "each create got its own revision"
    );
    let feed = assert_feed_is_gap_free(&*store, 400).await;
    for change in &feed {
        let stored = store.get(&change.object.key).await.unwrap().unwrap();
        assert_eq!(stored.revision, change.revision, "{}", change.object.key);
    }
}

pub async fn same_revision_updates_have_one_winner(h: &Harness) {
    let store = h.open().await;
    let k = key("default", "contended");
    let mut revision = create(&*store, "default", "contended").await.revision;
    for round in 0..10 {
        let mut tasks = tokio::task::JoinSet::new();
        for writer in 0..8 {
            let (store, k) = (Arc::clone(&store), k.clone());
            tasks.spawn(async move {
                let body = json!({"round": round, "writer": writer});
                store
                    .update(&k, &BTreeMap::new(), &body, Some(revision))
                    .await
            });
        }
        let mut winners = Vec::new();
        let mut conflicts = Vec::new();
        while let Some(r) = tasks.join_next().await {
            match r.unwrap() {
                Ok(obj) => winners.push(obj),
                Err(StoreError::Conflict {
                    expected, actual, ..
                }) => conflicts.push((expected, actual)),
                Err(e) => panic!("round {round}: unexpected error {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one update wins");
        let winner = &winners[0];
        assert_eq!(
            conflicts,
            vec![(revision, winner.revision); 7],
            "round {round}"
        );
        assert_eq!(store.get(&k).await.unwrap().as_ref(), Some(winner));
        revision = winner.revision;
    }
    assert_feed_is_gap_free(&*store, 11).await;
}

fn query(mesh: Option<&str>, selector: Option<&str>) -> ListQuery {
    ListQuery {
        kind: "Thing".into(),
        mesh: mesh.map(str::to_string),
        selector: selector.map(|s| LabelSelector::parse(s).unwrap()),
        ..ListQuery::default()
    }
}
