//! How much change-feed history to keep ([`Retention`]), when it may go
//! ([`Compactor`]), and how a watcher that fell behind gets back on the
//! feed ([`resync_revision`]).
//!
//! The window is "the last N revisions **and** the last T of time,
//! whichever keeps more" (etcd's revision and periodic compaction modes
//! together). The revision count bounds the rows during a quiet spell and
//! lets a burst (a reconnect storm writes thousands of statuses in
//! seconds) not push a watcher that is a moment behind out of the window;
//! the age keeps every change a slow but live watcher (a REST long poll, a
//! replica that lost its database for a few minutes) can still ask for.
//!
//! Time is the caller's: [`Compactor::target`] takes `now`, so a test or a
//! benchmark can run a simulated day in seconds. Like etcd's periodic
//! compactor, it samples the store's revision at each call and compacts to
//! the revision it sampled `age` ago, so the store needs no timestamp per
//! change. Samples live in memory: after a restart nothing is compacted by
//! age until `age` has passed again (it errs on keeping more).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::{Compaction, Store, StoreError};

/// How much change-feed history to keep: at least the last `revisions`
/// changes and at least the changes of the last `age`, whichever is more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Changes kept whatever their age (0: only the age counts).
    pub revisions: u64,
    /// Changes this recent are kept whatever their count (zero: only the
    /// count counts).
    pub age: Duration,
}

impl Retention {
    /// Default [`Retention::revisions`]: ten storms of 1,000 proxies'
    /// status writes (two each), or a day of one replica's 5 s heartbeats
    /// divided by two.
    pub const DEFAULT_REVISIONS: u64 = 10_000;

    /// Default [`Retention::age`]: twice the REST watch's longest poll
    /// (5 min), so a client that polls, stalls and polls again resumes.
    pub const DEFAULT_AGE: Duration = Duration::from_secs(600);

    /// How often to run [`Compactor::target`]: a tenth of `age`, between
    /// 1 s and 1 min. The age actually kept is between `age` and `age`
    /// plus this.
    pub fn interval(&self) -> Duration {
        (self.age / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            revisions: Self::DEFAULT_REVISIONS,
            age: Self::DEFAULT_AGE,
        }
    }
}

/// Decides, from revisions sampled over time, how far the feed may be
/// compacted under a [`Retention`].
#[derive(Debug, Clone)]
pub struct Compactor {
    retention: Retention,
    /// `(when, revision)`, oldest first; at most one older than `age`.
    samples: VecDeque<(Instant, u64)>,
}

// === impl Compactor ===

impl Compactor {
    /// A compactor that has sampled nothing yet.
    pub fn new(retention: Retention) -> Self {
        Compactor {
            retention,
            samples: VecDeque::new(),
        }
    }

    /// Its retention.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Notes that the store's revision was `current` at `now`, and returns
    /// the revision the feed may be compacted to: the older of
    /// "`revisions` before `current`" and "the revision sampled `age`
    /// ago". 0 (nothing) until a sample is `age` old.
    pub fn target(&mut self, now: Instant, current: u64) -> u64 {
        let by_count = current.saturating_sub(self.retention.revisions);
        let age = self.retention.age;
        if age.is_zero() {
            return by_count;
        }
        self.samples.push_back((now, current));
        let old_enough = self
            .samples
            .iter()
            .take_while(|(t, _)| now.saturating_duration_since(*t) >= age)
            .count();
        if old_enough == 0 {
            return 0;
        }
        // Keep the newest sample that is old enough: it is the bound until
        // a newer one ages past it.
        self.samples.drain(..old_enough - 1);
        by_count.min(self.samples[0].1)
    }

    /// One round at `now`: samples the store's revision and, when
    /// `compact` is true (e.g. only on the leader), compacts to the target.
    /// Returns what was compacted, or `None` when nothing was due.
    pub async fn tick(
        &mut self,
        store: &dyn Store,
        now: Instant,
        compact: bool,
    ) -> Result<Option<Compaction>, StoreError> {
        let current = store.current_revision().await?;
        let target = self.target(now, current);
        if !compact || target == 0 {
            return Ok(None);
        }
        store.compact(target).await.map(Some)
    }
}

/// Where a watcher whose feed failed with `error` goes on from. After
/// [`StoreError::Compacted`] it is `Some(revision)`: the watcher must read
/// the whole state again (a list) and then watch after `revision`. This
/// reads `revision` first, so a change made while the watcher lists is
/// both listed and replayed, never lost. After any other error (or if the
/// revision cannot be read now) it is `None`: resume where it stopped,
/// which, if the feed was compacted meanwhile, comes back here.
pub async fn resync_revision(store: &dyn Store, error: &StoreError) -> Option<u64> {
    match error {
        StoreError::Compacted { .. } => store.current_revision().await.ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn the_window_is_whichever_keeps_more() {
        let start = Instant::now();
        let mut c = Compactor::new(Retention {
            revisions: 100,
            age: 10 * MIN,
        });
        // Nothing is old enough yet: nothing may go, however many writes.
        assert_eq!(c.target(start, 50_000), 0);
        assert_eq!(c.target(start + 5 * MIN, 60_000), 0);
        // Ten minutes on, the sample from `start` bounds it (the count
        // alone would allow 69,900).
        assert_eq!(c.target(start + 10 * MIN, 70_000), 50_000);
        assert_eq!(c.target(start + 15 * MIN, 70_010), 60_000);
        // A quiet spell: the count keeps the last 100 although they are old.
        assert_eq!(c.target(start + 60 * MIN, 70_020), 69_920);
    }

    #[test]
    fn zero_turns_one_bound_off() {
        let now = Instant::now();
        let mut by_count = Compactor::new(Retention {
            revisions: 10,
            age: Duration::ZERO,
        });
        assert_eq!(by_count.target(now, 25), 15);
        let mut by_age = Compactor::new(Retention {
            revisions: 0,
            age: MIN,
        });
        assert_eq!(by_age.target(now, 25), 0);
        assert_eq!(by_age.target(now + MIN, 40), 25);
    }

    #[test]
    fn samples_stay_few() {
        let start = Instant::now();
        let r = Retention::default();
        let mut c = Compactor::new(r);
        for i in 0..10_000u32 {
            c.target(start + r.interval() * i, u64::from(i) * 1_000);
        }
        let per_window = (r.age.as_secs() / r.interval().as_secs()) as usize;
        assert!(c.samples.len() <= per_window + 1, "{}", c.samples.len());
        assert_eq!(r.interval(), MIN);
    }
}
