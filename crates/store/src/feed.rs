//! The watch stream both backends return from [`Store::watch`](crate::Store::watch).
//!
//! Owns turning "read a page of changes after revision N" plus "something
//! was written" wake-ups into one ordered, gap-free, exactly-once stream. It
//! must never decide revision order itself: the backends guarantee that a
//! revision becomes visible only after every smaller one (see
//! `postgres.rs`), so reading `revision > last` in order never skips one.
//!
//! Wake-ups come from a [`Wakeups`] channel (local writes, and for
//! PostgreSQL `LISTEN meshlink_changes`). A slow fallback poll runs as a
//! safety net in case a wake-up is ever lost (e.g. a notification sent while
//! the listener was reconnecting); correctness never depends on its timing,
//! only latency does.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio::sync::watch;

use crate::{Change, StoreError};

/// How many changes a watcher reads per query while replaying history.
pub(crate) const PAGE_SIZE: usize = 500;

/// How often an idle watcher re-reads the feed even without a wake-up.
pub(crate) const DEFAULT_FALLBACK_POLL: Duration = Duration::from_secs(5);

/// Reads one page: changes with revision greater than the argument.
pub(crate) type FetchPage =
    Arc<dyn Fn(u64) -> BoxFuture<'static, Result<Vec<Change>, StoreError>> + Send + Sync>;

/// Tells watchers that new changes may be visible. The value is the highest
/// revision known to be committed; watchers only use it as a signal.
#[derive(Debug)]
pub(crate) struct Wakeups {
    tx: watch::Sender<u64>,
}

// === impl Wakeups ===

impl Wakeups {
    pub(crate) fn new() -> Self {
        Wakeups {
            tx: watch::Sender::new(0),
        }
    }

    /// Wakes every watcher; call after a write commits.
    pub(crate) fn notify(&self, revision: u64) {
        self.tx.send_modify(|v| *v = (*v).max(revision));
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

struct Follower {
    last: u64,
    buffered: VecDeque<Change>,
    fetch: FetchPage,
    wake: watch::Receiver<u64>,
    wake_open: bool,
    fallback_poll: Duration,
    failed: bool,
}

/// The stream of every change after `after`. `fetch` must keep the store
/// alive (it is what the `'static` stream holds on to).
pub(crate) fn follow(
    after: u64,
    fetch: FetchPage,
    wakeups: &Wakeups,
    fallback_poll: Duration,
) -> BoxStream<'static, Result<Change, StoreError>> {
    let state = Follower {
        last: after,
        buffered: VecDeque::new(),
        fetch,
        wake: wakeups.subscribe(),
        wake_open: true,
        fallback_poll,
        failed: false,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        let item = s.next().await?;
        Some((item, s))
    }))
}

// === impl Follower ===

impl Follower {
    async fn next(&mut self) -> Option<Result<Change, StoreError>> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(change) = self.buffered.pop_front() {
                self.last = change.revision;
                return Some(Ok(change));
            }
            // Mark the current wake-up as seen *before* reading, so a write
            // that commits after the read below still wakes us.
            self.wake.borrow_and_update();
            match (self.fetch)(self.last).await {
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
                Ok(page) if page.is_empty() => self.wait().await,
                Ok(page) => {
                    let last = self.last;
                    self.buffered
                        .extend(page.into_iter().filter(|c| c.revision > last));
                }
            }
        }
    }

    async fn wait(&mut self) {
        let poll = tokio::time::sleep(self.fallback_poll);
        if !self.wake_open {
            return poll.await;
        }
        tokio::select! {
            changed = self.wake.changed() => {
                if changed.is_err() {
                    self.wake_open = false;
                }
            }
            () = poll => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::StreamExt;
    use tokio::sync::Notify;
    use tokio::time::Instant;

    use super::*;
    use crate::{ChangeType, Object, ObjectKey};

    const NEVER: Duration = Duration::from_secs(3600);

    fn change(revision: u64) -> Change {
        let object = Object {
            key: ObjectKey::new("Thing", "m", format!("o{revision}")),
            labels: Default::default(),
            body: serde_json::Value::Null,
            revision,
            create_revision: revision,
        };
        Change {
            revision,
            change_type: ChangeType::Created,
            object,
        }
    }

    /// A fake feed; `on_fetch` runs inside every read, after the rows are
    /// taken (like a write committing just after the query's snapshot).
    #[derive(Clone, Default)]
    struct FakeFeed {
        rows: Arc<Mutex<Vec<Change>>>,
        fetched_empty: Arc<Notify>,
    }

    impl FakeFeed {
        fn fetch(&self, on_fetch: impl Fn(&FakeFeed) + Send + Sync + 'static) -> FetchPage {
            let feed = self.clone();
            Arc::new(move |after| {
                let page: Vec<Change> = feed
                    .rows
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|c| c.revision > after)
                    .cloned()
                    .collect();
                on_fetch(&feed);
                if page.is_empty() {
                    feed.fetched_empty.notify_one();
                }
                Box::pin(async move { Ok(page) })
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_wakes_an_idle_watcher_without_the_fallback_poll() {
        let (feed, wakeups) = (FakeFeed::default(), Wakeups::new());
        let start = Instant::now();
        let mut stream = follow(0, feed.fetch(|_| {}), &wakeups, NEVER);
        let waiter = tokio::spawn(async move { stream.next().await });
        feed.fetched_empty.notified().await;
        feed.rows.lock().unwrap().push(change(1));
        wakeups.notify(1);
        let got = waiter.await.unwrap().unwrap().unwrap();
        assert_eq!(got.revision, 1);
        assert!(
            start.elapsed() < NEVER,
            "delivered by the fallback poll, not the wake-up"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_committed_during_the_read_is_not_missed() {
        let (feed, wakeups) = (FakeFeed::default(), Arc::new(Wakeups::new()));
        let w = wakeups.clone();
        // The first read sees nothing; a write commits and notifies before
        // the watcher starts waiting.
        let fetch = feed.fetch(move |feed| {
            let mut rows = feed.rows.lock().unwrap();
            if rows.is_empty() {
                rows.push(change(1));
                w.notify(1);
            }
        });
        let start = Instant::now();
        let mut stream = follow(0, fetch, &wakeups, NEVER);
        assert_eq!(stream.next().await.unwrap().unwrap().revision, 1);
        assert!(start.elapsed() < NEVER, "the wake-up was lost");
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_ends_the_stream() {
        let wakeups = Wakeups::new();
        let fetch: FetchPage =
            Arc::new(|_| Box::pin(async { Err(StoreError::Config("boom".into())) }));
        let mut stream = follow(0, fetch, &wakeups, NEVER);
        assert!(matches!(
            stream.next().await,
            Some(Err(StoreError::Config(_)))
        ));
        assert!(stream.next().await.is_none());
    }
}
