//! Rate limits for log lines that can repeat many times a second (the
//! control plane down, the local app refusing connections): the first
//! occurrence is logged at once, then at most one line per interval, each
//! saying how many occurrences it stands for.
//!
//! Owns only the counting; callers log. Uses `tokio::time::Instant`, so
//! tests drive it on paused time.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How often a repeating failure is logged while it lasts.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(30);

/// Counts occurrences of one repeating event and says when to log.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    last_logged: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    /// A limiter that logs at most once per `interval` (after the first).
    pub fn new(interval: Duration) -> Self {
        LogLimiter {
            interval,
            last_logged: None,
            suppressed: 0,
        }
    }

    /// Records one occurrence at `now`. Returns `Some(n)` when this one
    /// should be logged, where `n` is how many occurrences the line stands
    /// for (this one and those suppressed since the last line); `None` when
    /// it is suppressed.
    pub fn hit(&mut self, now: Instant) -> Option<u64> {
        self.suppressed += 1;
        let due = self
            .last_logged
            .is_none_or(|at| now.duration_since(at) >= self.interval);
        if !due {
            return None;
        }
        self.last_logged = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }

    /// Forgets the streak (e.g. after a healthy session), so the next
    /// occurrence is logged at once. Returns how many occurrences went
    /// unlogged since the last line.
    pub fn reset(&mut self) -> u64 {
        self.last_logged = None;
        std::mem::take(&mut self.suppressed)
    }
}

/// A [`LogLimiter`] shared by tasks (e.g. every connection of a proxy).
/// The lock is only held to count, never across an await.
#[derive(Debug)]
pub struct SharedLogLimiter(Mutex<LogLimiter>);

impl SharedLogLimiter {
    /// See [`LogLimiter::new`].
    pub fn new(interval: Duration) -> Self {
        SharedLogLimiter(Mutex::new(LogLimiter::new(interval)))
    }

    /// See [`LogLimiter::hit`].
    pub fn hit(&self) -> Option<u64> {
        self.0.lock().expect("log limiter lock").hit(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn logs_the_first_then_once_per_interval_with_the_count() {
        let mut l = LogLimiter::new(Duration::from_secs(30));
        assert_eq!(l.hit(Instant::now()), Some(1), "the first is logged");
        // One failure a second for a minute: one line per 30 s.
        let mut lines = Vec::new();
        for _ in 0..60 {
            tokio::time::advance(Duration::from_secs(1)).await;
            if let Some(n) = l.hit(Instant::now()) {
                lines.push(n);
            }
        }
        assert_eq!(lines, vec![30, 30], "each line stands for 30 failures");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(l.hit(Instant::now()), None);
        assert_eq!(l.reset(), 1, "one failure went unlogged");
        assert_eq!(
            l.hit(Instant::now()),
            Some(1),
            "after a reset the next failure is logged at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shared_limiter_counts_across_callers() {
        let l = SharedLogLimiter::new(Duration::from_secs(10));
        assert_eq!(l.hit(), Some(1));
        for _ in 0..99 {
            assert_eq!(l.hit(), None);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(l.hit(), Some(100));
    }
}
