//! Jittered exponential backoff for reconnects and retries.
//!
//! Owns only the delay sequence: `initial`, doubling up to `max`, each
//! step with ±20% jitter so many proxies restarted together do not retry
//! in lockstep. It never sleeps itself; callers sleep on `tokio::time`.

use std::time::Duration;

use rand::Rng as _;

/// A backoff sequence; [`Backoff::reset`] after a healthy period.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Starts at `initial` and never exceeds `max` (before jitter).
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// The delay before the next attempt; doubles the one after.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        base.mul_f64(rand::rng().random_range(0.8..1.2))
    }

    /// Starts over from `initial` (after a healthy stream).
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// The wait before retrying after a server's retry hint: the hint plus up
/// to 50% jitter (never less than the hint).
pub fn after_hint(hint: Duration) -> Duration {
    hint.mul_f64(rand::rng().random_range(1.0..1.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(15));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(8) && first <= Duration::from_millis(12));
        let mut last = first;
        for _ in 0..20 {
            last = b.next_delay();
        }
        assert!(
            last >= Duration::from_secs(12) && last <= Duration::from_secs(18),
            "{last:?}"
        );
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(12));
    }

    #[test]
    fn a_server_hint_is_never_undercut() {
        for _ in 0..100 {
            let d = after_hint(Duration::from_millis(200));
            assert!(d >= Duration::from_millis(200) && d < Duration::from_millis(300));
        }
    }
}
