//! Admission control for new ADS streams: a token bucket that decides, at
//! stream open and before any credential is checked, whether this instance
//! takes one more stream now.
//!
//! Owns the bucket and the retry hint. A refused stream is told when to come
//! back: each refusal books the next free slot after the ones already
//! promised, so a storm of N refused proxies is spread over N / rate seconds
//! instead of all returning at once. It never queues or delays a stream
//! itself, and it never refuses a stream for any other reason.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

pub use meshlink_proto::hints::RETRY_AFTER_MS;

/// Bucket size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdmissionConfig {
    /// Streams admitted at once after a quiet period.
    pub burst: u32,
    /// Streams admitted per second once the burst is spent.
    pub per_second: f64,
}

/// The token bucket. Cheap to share behind an `Arc`; one short lock per
/// stream open.
#[derive(Debug)]
pub struct Admission {
    config: AdmissionConfig,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// The latest retry slot promised to a refused stream.
    promised: Instant,
}

/// Why a stream was not admitted: come back after this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl Admission {
    /// A full bucket. `burst` must be at least 1 and `per_second` positive.
    pub fn new(config: AdmissionConfig) -> Self {
        let now = Instant::now();
        Self {
            config,
            state: Mutex::new(Bucket {
                tokens: f64::from(config.burst.max(1)),
                refilled: now,
                promised: now,
            }),
        }
    }

    /// The bucket's settings.
    pub fn config(&self) -> AdmissionConfig {
        self.config
    }

    /// Takes one token, or says when to retry.
    pub fn try_admit(&self) -> Result<(), RetryAfter> {
        let now = Instant::now();
        let rate = self.config.per_second.max(f64::MIN_POSITIVE);
        let mut b = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(f64::from(self.config.burst.max(1)));
        b.refilled = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        // The next token arrives after `wait`; later refusals queue behind
        // the slots already promised, one token-interval apart.
        let wait = Duration::from_secs_f64((1.0 - b.tokens) / rate);
        let slot = Duration::from_secs_f64(1.0 / rate);
        b.promised = (b.promised + slot).max(now + wait);
        Err(RetryAfter(b.promised - now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(burst: u32, per_second: f64) -> Admission {
        Admission::new(AdmissionConfig { burst, per_second })
    }

    #[tokio::test(start_paused = true)]
    async fn admits_the_burst_then_refuses_with_a_hint() {
        let a = bucket(3, 2.0);
        for _ in 0..3 {
            assert_eq!(a.try_admit(), Ok(()));
        }
        let RetryAfter(first) = a.try_admit().unwrap_err();
        assert_eq!(first, Duration::from_millis(500), "one token at 2/s");
    }

    #[tokio::test(start_paused = true)]
    async fn refused_streams_are_spread_one_slot_apart() {
        let a = bucket(1, 10.0);
        a.try_admit().unwrap();
        let hints: Vec<Duration> = (0..4).map(|_| a.try_admit().unwrap_err().0).collect();
        assert_eq!(
            hints,
            [100, 200, 300, 400].map(Duration::from_millis).to_vec(),
            "each refusal gets the next free slot"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn refills_at_the_rate_up_to_the_burst() {
        let a = bucket(2, 4.0);
        a.try_admit().unwrap();
        a.try_admit().unwrap();
        assert!(a.try_admit().is_err());
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(a.try_admit(), Ok(()), "one token after 1/rate");
        assert!(a.try_admit().is_err());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(a.try_admit(), Ok(()));
        assert_eq!(a.try_admit(), Ok(()));
        assert!(a.try_admit().is_err(), "never more than the burst");
    }
}
