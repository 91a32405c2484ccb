//! The change-feed compactor: keeps the store's feed to the configured
//! window (`--feed-retain-revisions`, `--feed-retain-for`; see
//! [`meshlink_store::Retention`]) so that heartbeats, lease renewals and
//! reconnect storms do not fill the disk over months.
//!
//! Every replica samples the store's revision each
//! [`Retention::interval`](meshlink_store::Retention::interval) (the age
//! bound is "the revision sampled that long ago"), but only the leader
//! deletes: concurrent compactions would be safe (idempotent deletes, a
//! mark that only rises), only wasted work. A new leader has sampled all
//! along, so it compacts at once. Watchers that fall behind the window get
//! `StoreError::Compacted` and resync from a full list (each feed
//! follower in this crate; the REST watch answers 410 Gone).
//!
//! Metrics: `meshlink_store_feed_compacted_revision` (changes up to it are
//! gone; the oldest a watcher can resume from is one more) and
//! `meshlink_store_feed_compacted_changes_total` (rows this replica
//! deleted).

use std::sync::Arc;
use std::time::Instant;

use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::{Compactor, Retention, Store};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::replicas::Leadership;

/// The compactor's metrics.
struct FeedMetrics {
    compacted_revision: Gauge,
    compacted_changes: Counter,
}

impl FeedMetrics {
    fn new(registry: &MetricsRegistry) -> Self {
        let m = FeedMetrics {
            compacted_revision: Gauge::default(),
            compacted_changes: Counter::default(),
        };
        registry.register_with("store", |r| {
            r.register(
                "feed_compacted_revision",
                "Change-feed revision up to which history was compacted; a watcher resuming from an older revision gets 410 Gone and lists again",
                m.compacted_revision.clone(),
            );
            r.register(
                "feed_compacted_changes",
                "Change-feed rows this replica deleted by compaction",
                m.compacted_changes.clone(),
            );
        });
        m
    }
}

/// Runs the compactor until `shutdown`.
pub(crate) async fn run(
    store: Arc<dyn Store>,
    retention: Retention,
    leadership: Leadership,
    registry: &MetricsRegistry,
    shutdown: Shutdown,
) {
    let metrics = FeedMetrics::new(registry);
    let mut compactor = Compactor::new(retention);
    let mut tick = tokio::time::interval(retention.interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            _ = tick.tick() => {}
        }
        match compactor
            .tick(store.as_ref(), Instant::now(), leadership.is_leader())
            .await
        {
            Ok(Some(done)) => {
                metrics.compacted_changes.inc_by(done.deleted);
                if done.deleted > 0 {
                    tracing::debug!(
                        revision = done.revision,
                        deleted = done.deleted,
                        "change feed compacted"
                    );
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot compact the change feed; retrying next round");
            }
        }
        if let Ok(r) = store.compacted_revision().await {
            metrics
                .compacted_revision
                .set(i64::try_from(r).unwrap_or(i64::MAX));
        }
    }
}
