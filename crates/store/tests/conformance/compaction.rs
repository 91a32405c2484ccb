//! Conformance: change-feed compaction, the "too old" answer and the
//! resync a watcher does after it.

use std::time::{Duration, Instant};

use futures::StreamExt;
use meshlink_store::{
    BatchWrite, ChangeType, Compaction, Compactor, ListQuery, Retention, Store, StoreError,
};
use serde_json::json;

use super::{DEADLINE, Harness, collect_consecutive, create, key, labels, next_change};

/// Puts `n` objects `prefix0..prefix{n-1}` in batches (one revision each).
async fn put_many(store: &dyn Store, prefix: &str, n: usize) {
    let writes: Vec<BatchWrite> = (0..n)
        .map(|i| BatchWrite::Put {
            key: key("default", &format!("{prefix}{i}")),
            labels: labels(&[]),
            body: json!({ "i": i }),
        })
        .collect();
    for chunk in writes.chunks(500) {
        for r in store.write_batch(chunk).await.unwrap() {
            r.unwrap();
        }
    }
}

/// The rows the feed holds: every change above the compacted revision
/// (checking on the way that they are exactly the revisions up to the
/// current one, no gap).
async fn feed_rows(store: &dyn Store) -> u64 {
    let compacted = store.compacted_revision().await.unwrap();
    let current = store.current_revision().await.unwrap();
    let rows = store
        .changes_since(compacted, usize::MAX / 2)
        .await
        .unwrap();
    let revisions: Vec<u64> = rows.iter().map(|c| c.revision).collect();
    assert_eq!(
        revisions,
        (compacted + 1..=current).collect::<Vec<_>>(),
        "the feed above the compacted revision has a gap"
    );
    rows.len() as u64
}

fn all_things() -> ListQuery {
    ListQuery {
        kind: "Thing".into(),
        ..ListQuery::default()
    }
}

pub async fn compaction_drops_history_and_keeps_objects(h: &Harness) {
    let store = h.open().await;
    let a = key("default", "a");
    for name in ["a", "b", "c"] {
        create(&*store, "default", name).await; // revisions 1-3
    }
    for v in 0..5 {
        store
            .update(&a, &labels(&[]), &json!({ "v": v }), None)
            .await
            .unwrap(); // revisions 4-8
    }
    store.delete(&key("default", "b"), None).await.unwrap(); // 9
    create(&*store, "default", "d").await; // 10
    let before = store.list(&all_things()).await.unwrap();

    let done = store.compact(8).await.unwrap();
    assert_eq!(
        done,
        Compaction {
            revision: 8,
            deleted: 8
        }
    );
    assert_eq!(
        store.list(&all_things()).await.unwrap(),
        before,
        "compaction changed the objects"
    );
    let a_now = store.get(&a).await.unwrap().unwrap();
    assert_eq!((a_now.body, a_now.revision), (json!({ "v": 4 }), 8));
    assert_eq!(store.get(&a).await.unwrap().unwrap().create_revision, 1);

    let rest = store.changes_since(8, 100).await.unwrap();
    let kept: Vec<(u64, ChangeType)> = rest.iter().map(|c| (c.revision, c.change_type)).collect();
    assert_eq!(kept, [(9, ChangeType::Deleted), (10, ChangeType::Created)]);
    match store.changes_since(7, 100).await {
        Err(StoreError::Compacted { requested, oldest }) => {
            assert_eq!((requested, oldest), (7, 9));
        }
        other => panic!("changes after 7 should be compacted, got {other:?}"),
    }
    let text = store.changes_since(0, 1).await.unwrap_err().to_string();
    assert!(
        text.contains("keeps revisions from 9") && text.contains("list again"),
        "{text}"
    );

    // Idempotent, never lowered, and never past the committed revision.
    assert_eq!(
        store.compact(5).await.unwrap(),
        Compaction {
            revision: 8,
            deleted: 0
        }
    );
    assert_eq!(store.compact(1_000).await.unwrap().revision, 10);
    assert_eq!(store.compacted_revision().await.unwrap(), 10);
    assert!(store.changes_since(10, 10).await.unwrap().is_empty());
    assert_eq!(create(&*store, "default", "e").await.revision, 11);
    assert_eq!(feed_rows(&*store).await, 1);
    assert_eq!(store.list(&all_things()).await.unwrap().len(), 4);

    // The mark survives a restart.
    drop(store);
    let store = h.open().await;
    assert_eq!(store.compacted_revision().await.unwrap(), 10);
    assert!(matches!(
        store.changes_since(3, 10).await,
        Err(StoreError::Compacted { oldest: 11, .. })
    ));
}

pub async fn a_watcher_behind_the_window_is_told_and_resyncs(h: &Harness) {
    const N: u64 = 1_200;
    const COMPACT_TO: u64 = 1_000;
    let store = h.open().await;
    put_many(&*store, "o", N as usize).await;

    // A watcher from the start reads one change, then falls behind while
    // the feed is compacted under it.
    let mut lagging = store.watch(0);
    let mut last = next_change(&mut lagging).await.revision;
    assert_eq!(last, 1);
    store.compact(COMPACT_TO).await.unwrap();
    let error = loop {
        match tokio::time::timeout(DEADLINE, lagging.next()).await {
            Ok(Some(Ok(change))) => {
                assert_eq!(change.revision, last + 1, "a change was skipped");
                last = change.revision;
            }
            Ok(Some(Err(e))) => break e,
            Ok(None) => panic!("the stream ended without saying why"),
            Err(_) => panic!("no answer within {DEADLINE:?}"),
        }
    };
    match &error {
        StoreError::Compacted { requested, oldest } => {
            assert_eq!((*requested, *oldest), (last, COMPACT_TO + 1));
        }
        other => panic!("expected Compacted, got {other}"),
    }
    assert!(
        lagging.next().await.is_none(),
        "the stream goes on after an error"
    );

    // The resync: the revision first, then the full list, then the watch.
    let from = meshlink_store::resync_revision(&*store, &error)
        .await
        .expect("a compacted watcher resyncs");
    assert_eq!(from, N);
    assert_eq!(store.list(&all_things()).await.unwrap().len(), N as usize);
    let mut resumed = store.watch(from);
    let next = create(&*store, "default", "after-resync").await;
    assert_eq!(next_change(&mut resumed).await.revision, next.revision);

    // A watcher inside the window is not disturbed.
    collect_consecutive(&mut store.watch(COMPACT_TO), COMPACT_TO + 1, N - COMPACT_TO).await;
}

pub async fn the_feed_stays_bounded_by_the_retention(h: &Harness) {
    // Every simulated tick of 6 s writes 50 heartbeats to 10 objects; the
    // compactor keeps 200 revisions or one minute, whichever is more.
    const PER_TICK: u64 = 50;
    let retention = Retention {
        revisions: 200,
        age: Duration::from_secs(60),
    };
    let store = h.open().await;
    let mut compactor = Compactor::new(retention);
    let start = Instant::now();
    let mut deleted = 0;
    for tick in 0..40u32 {
        let writes: Vec<BatchWrite> = (0..PER_TICK)
            .map(|i| BatchWrite::Put {
                key: key("default", &format!("replica{}", i % 10)),
                labels: labels(&[]),
                body: json!({ "tick": tick, "i": i }),
            })
            .collect();
        store.write_batch(&writes).await.unwrap();
        let now = start + retention.interval() * tick;
        if let Some(c) = compactor.tick(&*store, now, true).await.unwrap() {
            deleted += c.deleted;
        }
        // The window: the revisions of one age plus one interval of ticks
        // (11 ticks), or the count if that is more.
        let bound = (11 * PER_TICK).max(retention.revisions);
        let rows = feed_rows(&*store).await;
        assert!(
            rows <= bound,
            "tick {tick}: the feed holds {rows} changes, more than the window's {bound}"
        );
    }
    assert_eq!(deleted, 40 * PER_TICK - feed_rows(&*store).await);
    assert_eq!(store.list(&all_things()).await.unwrap().len(), 10);

    // Count alone: exactly the last N stay.
    let mut by_count = Compactor::new(Retention {
        revisions: 300,
        age: Duration::ZERO,
    });
    put_many(&*store, "more", 2_000).await;
    by_count.tick(&*store, Instant::now(), true).await.unwrap();
    assert_eq!(feed_rows(&*store).await, 300);
}

pub async fn only_a_compacting_tick_deletes(h: &Harness) {
    let store = h.open().await;
    put_many(&*store, "o", 50).await;
    let mut follower = Compactor::new(Retention {
        revisions: 10,
        age: Duration::ZERO,
    });
    assert_eq!(
        follower.tick(&*store, Instant::now(), false).await.unwrap(),
        None
    );
    assert_eq!(store.compacted_revision().await.unwrap(), 0);
    assert_eq!(feed_rows(&*store).await, 50);
}
