//! The store conformance suite: one set of async checks, run unchanged
//! against every backend (`tests/sqlite.rs`, `tests/postgres.rs`) through
//! [`conformance_suite!`].
//!
//! A backend test file supplies a [`Harness`]: a store URL that
//! `meshlink_store::open` accepts, so the suite can reopen the same store
//! ("restart") and hand it to a child process (the kill -9 test).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use meshlink_store::{Change, ChangeType, ObjectKey, Store, StoreError};

pub mod batch;
pub mod compaction;
pub mod durability;
pub mod feed;
pub mod objects;
pub mod paging;

/// How long a check waits for something a user would expect "promptly".
pub const DEADLINE: Duration = Duration::from_secs(30);

/// One fresh, empty store for one test.
pub struct Harness {
    /// The URL `meshlink_store::open` takes for this store.
    pub url: String,
    cleanup: Option<Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>>,
    _guard: Box<dyn std::any::Any + Send>,
}

impl Harness {
    /// A harness for `url`; `guard` lives as long as the test (e.g. a tempdir).
    pub fn new(url: String, guard: impl std::any::Any + Send) -> Self {
        Harness {
            url,
            cleanup: None,
            _guard: Box::new(guard),
        }
    }

    /// Runs `cleanup` after the test passed (e.g. drops its database).
    pub fn with_cleanup(
        mut self,
        cleanup: impl FnOnce() -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Self {
        self.cleanup = Some(Box::new(cleanup));
        self
    }

    /// Opens (or reopens) the store.
    pub async fn open(&self) -> Arc<dyn Store> {
        meshlink_store::open(&self.url)
            .await
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.url))
    }

    /// Called after a passing test.
    pub async fn finish(mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup().await;
        }
    }
}

/// Generates one `#[tokio::test]` per conformance check. `$harness` is an
/// expression evaluating to a future of [`Harness`]; `$child` names the
/// ignored test that the kill -9 check runs as a child process.
macro_rules! conformance_suite {
    ($harness:expr) => {
        conformance_suite!(@tests $harness;
            objects::crud_round_trip,
            objects::already_exists_and_not_found,
            objects::stale_expected_revision_conflicts,
            objects::bodies_round_trip_exactly,
            objects::lists_sort_by_mesh_then_name_and_filter,
            objects::large_lists_with_selectors,
            objects::concurrent_creates_take_every_revision_once,
            objects::same_revision_updates_have_one_winner,
            paging::paging_visits_every_object_once_in_order,
            paging::writes_between_pages_never_skip_or_repeat_untouched_objects,
            paging::paging_combines_with_mesh_and_label_filters,
            paging::limits_and_cursors_at_the_edges,
            feed::delete_appears_in_feed_with_last_body,
            feed::changes_since_pages_in_order,
            feed::watch_replays_then_follows_in_order,
            feed::watch_resumes_after_restart,
            feed::watcher_sees_writes_made_after_it_started,
            feed::watch_replays_large_history_in_pages,
            durability::acknowledged_writes_survive_kill9,
            batch::batch_items_take_consecutive_revisions_in_order,
            batch::batch_item_failures_do_not_lose_the_others,
            batch::batch_becomes_visible_all_at_once,
            batch::batch_deletes_go_with_the_other_items,
            batch::get_many_answers_each_key_in_order,
            durability::acknowledged_batches_survive_kill9,
            compaction::compaction_drops_history_and_keeps_objects,
            compaction::a_watcher_behind_the_window_is_told_and_resyncs,
            compaction::the_feed_stays_bounded_by_the_retention,
            compaction::only_a_compacting_tick_deletes,
        );

        /// The child half of `acknowledged_writes_survive_kill9`: writes
        /// until killed. Does nothing unless started by that test.
        #[tokio::test]
        #[ignore = "child process of acknowledged_writes_survive_kill9"]
        async fn kill9_writer_child() {
            conformance::durability::writer_child().await;
        }
    };
    (@tests $harness:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let harness = $harness.await;
                conformance::$module::$name(&harness).await;
                harness.finish().await;
            }
        )*
    };
}
pub(crate) use conformance_suite;

// === helpers shared by the checks ===

/// A key of kind `Thing`.
pub fn key(mesh: &str, name: &str) -> ObjectKey {
    ObjectKey::new("Thing", mesh, name)
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Creates `Thing/mesh/name` with a small body.
pub async fn create(store: &dyn Store, mesh: &str, name: &str) -> meshlink_store::Object {
    store
        .create(
            &key(mesh, name),
            &labels(&[("app", name)]),
            &serde_json::json!({ "name": name }),
        )
        .await
        .unwrap_or_else(|e| panic!("create {mesh}/{name}: {e}"))
}

/// The next item of a watch stream, failing the test after [`DEADLINE`].
pub async fn next_change(stream: &mut BoxStream<'static, Result<Change, StoreError>>) -> Change {
    match tokio::time::timeout(DEADLINE, stream.next()).await {
        Ok(Some(Ok(change))) => change,
        Ok(Some(Err(e))) => panic!("watch stream failed: {e}"),
        Ok(None) => panic!("watch stream ended"),
        Err(_) => panic!("no change arrived on the watch stream within {DEADLINE:?}"),
    }
}

/// Collects `n` changes and asserts they are exactly revisions
/// `first..first+n`, in order (no gap, no duplicate).
pub async fn collect_consecutive(
    stream: &mut BoxStream<'static, Result<Change, StoreError>>,
    first: u64,
    n: u64,
) -> Vec<Change> {
    let mut out = Vec::with_capacity(n as usize);
    for expected in first..first + n {
        let change = next_change(stream).await;
        assert_eq!(
            change.revision, expected,
            "watch delivered revision {} where {expected} was due",
            change.revision
        );
        assert_eq!(
            change.object.revision, change.revision,
            "change object revision"
        );
        out.push(change);
    }
    out
}

/// Asserts the whole feed is exactly revisions `1..=n` in order.
pub async fn assert_feed_is_gap_free(store: &dyn Store, n: u64) -> Vec<Change> {
    let feed = store.changes_since(0, n as usize + 10).await.unwrap();
    let revisions: Vec<u64> = feed.iter().map(|c| c.revision).collect();
    assert_eq!(
        revisions,
        (1..=n).collect::<Vec<_>>(),
        "change feed revisions"
    );
    assert_eq!(store.current_revision().await.unwrap(), n);
    feed
}

/// Whether a change created the given object.
pub fn is_create_of(change: &Change, mesh: &str, name: &str) -> bool {
    change.change_type == ChangeType::Created && change.object.key == key(mesh, name)
}
