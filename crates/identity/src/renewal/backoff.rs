//! Per-identity retry backoff for failed renewals.
//!
//! Owns the delay policy only: exponential from [`BackoffPolicy::initial`],
//! doubling with ±20% jitter, capped by [`BackoffPolicy::max`] and by a
//! fraction of the credential's remaining lifetime, never below
//! [`BackoffPolicy::min`], and never scheduling a retry at or past expiry
//! while more than `min` of the lifetime remains. Must never sleep or read a
//! clock: callers pass the remaining lifetime in.

use std::time::Duration;

use rand::Rng as _;

/// Tunables for [`RetryBackoff`]. `Default` is the production policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    /// Delay before the first retry (before jitter).
    pub initial: Duration,
    /// Largest delay between two attempts, whatever the remaining lifetime.
    pub max: Duration,
    /// Smallest delay between two attempts: the floor that prevents a tight
    /// loop even when the credential is about to expire or has expired.
    pub min: Duration,
    /// While the credential is valid, a delay is at most `remaining /
    /// remaining_divisor` (but at least `min`), so several retries fit
    /// before expiry.
    pub remaining_divisor: u32,
    /// Relative jitter applied to each exponential step, e.g. `0.2` for ±20%.
    pub jitter: f64,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(5 * 60),
            min: Duration::from_secs(1),
            remaining_divisor: 4,
            jitter: 0.2,
        }
    }
}

/// Exponential backoff state for one identity; [`reset`](Self::reset) it
/// after a successful renewal.
#[derive(Debug, Clone)]
pub struct RetryBackoff {
    policy: BackoffPolicy,
    failures: u32,
}

// === impl RetryBackoff ===

impl RetryBackoff {
    /// Fresh backoff state (no failures yet).
    pub fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            failures: 0,
        }
    }

    /// The policy in use.
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// Failures recorded since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Forgets past failures; the next delay starts from `initial` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Records a failure and returns how long to wait before retrying, given
    /// how long the current credential remains valid (`Duration::ZERO` if
    /// expired). Uses a random jitter.
    pub fn next_delay(&mut self, remaining: Duration) -> Duration {
        let spread = self.policy.jitter.abs();
        let jitter = if spread > 0.0 {
            rand::rng().random_range(-spread..=spread)
        } else {
            0.0
        };
        self.next_delay_with_jitter(remaining, jitter)
    }

    /// Like [`next_delay`](Self::next_delay) with an explicit relative
    /// `jitter` (clamped to `±policy.jitter`), for deterministic callers.
    pub fn next_delay_with_jitter(&mut self, remaining: Duration, jitter: f64) -> Duration {
        let p = &self.policy;
        let spread = p.jitter.abs();
        let jitter = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(-spread, spread)
        };
        let step = 1u32 << self.failures.min(30);
        let base = p.initial.saturating_mul(step).min(p.max);
        self.failures = self.failures.saturating_add(1);

        let mut delay = base.mul_f64(1.0 + jitter).min(p.max);
        if remaining > p.min {
            // Fit several retries before expiry; `cap < remaining` here.
            let cap = (remaining / p.remaining_divisor.max(2)).max(p.min);
            delay = delay.min(cap);
        }
        delay.max(p.min)
    }
}

impl Default for RetryBackoff {
    fn default() -> Self {
        Self::new(BackoffPolicy::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(24 * 3600);

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn doubles_up_to_max() {
        let mut b = RetryBackoff::default();
        let delays: Vec<u64> = (0..12)
            .map(|_| b.next_delay_with_jitter(LONG, 0.0).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(b.failures(), 12);
    }

    #[test]
    fn jitter_is_bounded_and_steps_still_grow() {
        for _ in 0..200 {
            let mut b = RetryBackoff::default();
            let mut last = Duration::ZERO;
            for i in 0..9 {
                let d = b.next_delay(LONG);
                let nominal = f64::from(1u32 << i);
                assert!(secs(d) >= (nominal * 0.8).max(1.0) && secs(d) <= nominal * 1.2);
                assert!(d >= last, "step {i}: {d:?} < {last:?}");
                last = d;
            }
            let capped = b.next_delay(LONG);
            assert!(secs(capped) >= 240.0 && secs(capped) <= 300.0);
        }
    }

    #[test]
    fn capped_by_remaining_lifetime_and_never_past_expiry() {
        let mut b = RetryBackoff::default();
        for _ in 0..20 {
            b.next_delay_with_jitter(LONG, 0.0);
        }
        // 300 s would overshoot a 100 s remaining lifetime: cap at 25 s.
        assert_eq!(
            b.next_delay_with_jitter(Duration::from_secs(100), 0.2)
                .as_secs(),
            25
        );
        for remaining_ms in [1_001u64, 1_500, 2_000, 3_999, 10_000, 60_000] {
            let remaining = Duration::from_millis(remaining_ms);
            let d = b.next_delay_with_jitter(remaining, 0.2);
            assert!(d < remaining, "{d:?} not before expiry in {remaining:?}");
            assert!(d >= Duration::from_secs(1));
        }
    }

    #[test]
    fn floor_prevents_tight_loop_near_and_after_expiry() {
        let mut b = RetryBackoff::default();
        for remaining in [
            Duration::from_millis(999),
            Duration::from_millis(1),
            Duration::ZERO,
        ] {
            assert!(b.next_delay_with_jitter(remaining, -0.2) >= Duration::from_secs(1));
        }
        // After expiry the exponential continues up to max, not the floor.
        for _ in 0..20 {
            b.next_delay_with_jitter(Duration::ZERO, 0.0);
        }
        assert_eq!(b.next_delay_with_jitter(Duration::ZERO, 0.0).as_secs(), 300);
    }

    #[test]
    fn reset_starts_over() {
        let mut b = RetryBackoff::default();
        for _ in 0..5 {
            b.next_delay_with_jitter(LONG, 0.0);
        }
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.next_delay_with_jitter(LONG, 0.0), Duration::from_secs(1));
    }
}
