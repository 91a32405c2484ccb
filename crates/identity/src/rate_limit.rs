//! Per-key token-bucket rate limiting, used by the Certify RPC (keyed by the
//! proxy token's `jti`) so a broken or hostile proxy cannot hammer the CA.
//!
//! Owns the buckets and their memory bound: at most `max_keys` buckets are
//! tracked; when the map is full, buckets that have refilled completely (idle
//! keys, indistinguishable from new ones) are swept, and if none are, the
//! least recently used bucket is evicted. Time comes from
//! `tokio::time::Instant`, so tests run on paused time.
//!
//! Must never: hold its lock across an `.await` (there is none), or grow
//! without bound with the number of distinct keys.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Default bound on the number of tracked keys.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// Float tolerance when deciding whether a whole token is available.
const TOKEN_EPSILON: f64 = 1e-9;

/// A request was refused; retry after the given duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rate limit exceeded; retry after {}", humantime::format_duration(*.0))]
pub struct RetryAfter(pub Duration);

/// Invalid limiter settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateLimitError {
    /// `burst` was zero, so nothing would ever be allowed.
    #[error("rate limit burst must be at least 1, got 0")]
    ZeroBurst,
    /// `refill_per_second` was not a positive finite number.
    #[error("rate limit refill_per_second must be a positive number, got {0}")]
    InvalidRefill(f64),
    /// `max_keys` was zero.
    #[error("rate limit max_keys must be at least 1, got 0")]
    ZeroMaxKeys,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// A token bucket per key: up to `burst` requests at once, refilled at
/// `refill_per_second`.
#[derive(Debug)]
pub struct KeyedRateLimiter {
    burst: f64,
    refill_per_second: f64,
    max_keys: usize,
    buckets: Mutex<HashMap<String, Bucket>>,
}

// === impl Bucket ===

impl Bucket {
    fn refill(&mut self, now: Instant, burst: f64, rate: f64) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.updated = now;
    }

    fn is_full_at(&self, now: Instant, burst: f64, rate: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens + elapsed * rate >= burst
    }
}

// === impl KeyedRateLimiter ===

impl KeyedRateLimiter {
    /// A limiter allowing `burst` requests at once per key, refilled at
    /// `refill_per_second` requests per second, tracking at most
    /// [`DEFAULT_MAX_KEYS`] keys.
    pub fn new(burst: u32, refill_per_second: f64) -> Result<Self, RateLimitError> {
        if burst == 0 {
            return Err(RateLimitError::ZeroBurst);
        }
        if !(refill_per_second.is_finite() && refill_per_second > 0.0) {
            return Err(RateLimitError::InvalidRefill(refill_per_second));
        }
        Ok(Self {
            burst: f64::from(burst),
            refill_per_second,
            max_keys: DEFAULT_MAX_KEYS,
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Bounds the number of tracked keys to `max_keys`.
    pub fn with_max_keys(mut self, max_keys: usize) -> Result<Self, RateLimitError> {
        if max_keys == 0 {
            return Err(RateLimitError::ZeroMaxKeys);
        }
        self.max_keys = max_keys;
        Ok(self)
    }

    /// Takes one token from `key`'s bucket, or says how long until one is
    /// available.
    pub fn check(&self, key: &str) -> Result<(), RetryAfter> {
        let now = Instant::now();
        let (burst, rate) = (self.burst, self.refill_per_second);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(key) && buckets.len() >= self.max_keys {
            Self::make_room(&mut buckets, self.max_keys, now, burst, rate);
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        bucket.refill(now, burst, rate);
        if bucket.tokens + TOKEN_EPSILON >= 1.0 {
            bucket.tokens = (bucket.tokens - 1.0).max(0.0);
            Ok(())
        } else {
            let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / rate);
            // Whole milliseconds, rounded up: retrying after it succeeds.
            let millis = wait.as_nanos().div_ceil(1_000_000).max(1);
            Err(RetryAfter(Duration::from_millis(
                u64::try_from(millis).unwrap_or(u64::MAX),
            )))
        }
    }

    /// Number of keys currently tracked.
    pub fn tracked_keys(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn make_room(
        buckets: &mut HashMap<String, Bucket>,
        max_keys: usize,
        now: Instant,
        burst: f64,
        rate: f64,
    ) {
        buckets.retain(|_, b| !b.is_full_at(now, burst, rate));
        if buckets.len() < max_keys {
            return;
        }
        let oldest = buckets
            .iter()
            .min_by_key(|(_, b)| b.updated)
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            buckets.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(burst: u32, rate: f64) -> KeyedRateLimiter {
        KeyedRateLimiter::new(burst, rate).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_refused_with_retry_after() {
        let l = limiter(3, 0.5);
        for _ in 0..3 {
            l.check("jti-a").unwrap();
        }
        let RetryAfter(wait) = l.check("jti-a").unwrap_err();
        assert_eq!(wait, Duration::from_secs(2), "one token per 2 s at 0.5/s");
        // Still refused just before the retry-after, allowed at it.
        tokio::time::advance(wait - Duration::from_millis(10)).await;
        let RetryAfter(rest) = l.check("jti-a").unwrap_err();
        assert_eq!(rest, Duration::from_millis(10));
        tokio::time::advance(rest).await;
        l.check("jti-a").unwrap();
        assert!(l.check("jti-a").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn refills_over_time_up_to_burst_only() {
        let l = limiter(2, 1.0);
        l.check("k").unwrap();
        l.check("k").unwrap();
        assert!(l.check("k").is_err());
        tokio::time::advance(Duration::from_secs(3600)).await;
        l.check("k").unwrap();
        l.check("k").unwrap();
        assert!(
            l.check("k").is_err(),
            "idle time must not bank more than burst"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn keys_are_independent() {
        let l = limiter(1, 1.0);
        l.check("proxy-a").unwrap();
        assert!(l.check("proxy-a").is_err());
        l.check("proxy-b").unwrap();
        assert!(l.check("proxy-b").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_bounded_and_busy_keys_keep_their_limit() {
        let l = limiter(2, 0.1).with_max_keys(100).unwrap();
        l.check("hammer").unwrap();
        l.check("hammer").unwrap();
        for i in 0..10_000 {
            tokio::time::advance(Duration::from_micros(10)).await;
            l.check(&format!("key-{i}")).unwrap();
            assert!(l.tracked_keys() <= 100);
            if i % 50 == 0 {
                // A hammering key stays recently used and stays limited.
                assert!(l.check("hammer").is_err(), "at {i}");
            }
        }
        assert_eq!(l.tracked_keys(), 100);
        // Idle keys whose buckets refilled are swept before anything else.
        tokio::time::advance(Duration::from_secs(60)).await;
        l.check("fresh").unwrap();
        assert_eq!(l.tracked_keys(), 1);
    }

    #[test]
    fn rejects_invalid_settings() {
        assert_eq!(
            KeyedRateLimiter::new(0, 1.0).unwrap_err(),
            RateLimitError::ZeroBurst
        );
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                KeyedRateLimiter::new(1, rate),
                Err(RateLimitError::InvalidRefill(_))
            ));
        }
        assert_eq!(
            limiter(1, 1.0).with_max_keys(0).unwrap_err(),
            RateLimitError::ZeroMaxKeys
        );
    }
}
