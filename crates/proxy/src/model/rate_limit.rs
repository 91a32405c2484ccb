//! Envoy's local rate limit HTTP filter (`envoy.filters.http.local_ratelimit`,
//! what Kuma's MeshRateLimit `local.http` becomes): one token bucket per
//! listener, shared by all its connections. A request that finds the
//! bucket empty is answered at once with the configured status (429 by
//! default) and headers, and never reaches the application.
//!
//! The bucket starts full and gains `tokens_per_fill` (never above
//! `max_tokens`) at every `fill_interval` after it was created, as Envoy's
//! timer-driven bucket does: so `max_tokens = tokens_per_fill = 5` with a
//! 10 s interval lets exactly 5 requests through in each 10 s window.
//! A new configuration of the filter starts a new, full bucket (Envoy too
//! builds a new filter config).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::route::HeaderMutation;

/// The filter's configuration and its bucket.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalRateLimit {
    /// The bucket's size (and how full it starts).
    pub max_tokens: u32,
    /// Tokens added at each fill.
    pub tokens_per_fill: u32,
    /// Time between fills.
    #[serde(serialize_with = "crate::model::humantime_serde_duration::serialize")]
    pub fill_interval: Duration,
    /// The status of a limited request's answer.
    pub status: u16,
    /// Headers added to a limited request's answer.
    pub response_headers: HeaderMutation,
    /// The tokens.
    #[serde(skip)]
    pub bucket: Arc<TokenBucket>,
}

impl PartialEq for LocalRateLimit {
    /// Compares the configuration, not the bucket's state.
    fn eq(&self, other: &Self) -> bool {
        (
            self.max_tokens,
            self.tokens_per_fill,
            self.fill_interval,
            self.status,
            &self.response_headers,
        ) == (
            other.max_tokens,
            other.tokens_per_fill,
            other.fill_interval,
            other.status,
            &other.response_headers,
        )
    }
}

impl Eq for LocalRateLimit {}

impl LocalRateLimit {
    /// Takes a token for one request; `false` when the bucket is empty.
    pub fn admit(&self, now: Instant) -> bool {
        self.bucket.take(
            self.max_tokens,
            self.tokens_per_fill,
            self.fill_interval,
            now,
        )
    }
}

/// Envoy's local rate limit network filter
/// (`envoy.filters.network.local_ratelimit`, what Kuma's MeshRateLimit
/// `local.tcp.connectionRate` becomes): a connection accepted when the
/// listener's bucket is empty is closed at once, before the TLS handshake,
/// so it never reaches RBAC or the application.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRateLimit {
    /// The bucket's size (and how full it starts).
    pub max_tokens: u32,
    /// Tokens added at each fill.
    pub tokens_per_fill: u32,
    /// Time between fills.
    #[serde(serialize_with = "crate::model::humantime_serde_duration::serialize")]
    pub fill_interval: Duration,
    /// The tokens.
    #[serde(skip)]
    pub bucket: Arc<TokenBucket>,
}

impl PartialEq for ConnectionRateLimit {
    /// Compares the configuration, not the bucket's state.
    fn eq(&self, other: &Self) -> bool {
        (self.max_tokens, self.tokens_per_fill, self.fill_interval)
            == (other.max_tokens, other.tokens_per_fill, other.fill_interval)
    }
}

impl Eq for ConnectionRateLimit {}

impl ConnectionRateLimit {
    /// Takes a token for one connection; `false` when the bucket is empty.
    pub fn admit(&self, now: Instant) -> bool {
        self.bucket.take(
            self.max_tokens,
            self.tokens_per_fill,
            self.fill_interval,
            now,
        )
    }
}

/// A token bucket refilled at fixed intervals from its creation.
#[derive(Debug)]
pub struct TokenBucket {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: u32,
    next_fill: Instant,
}

impl TokenBucket {
    /// A full bucket of `max_tokens`, first refilled `fill_interval` after
    /// `now`.
    pub fn new(max_tokens: u32, fill_interval: Duration, now: Instant) -> Self {
        TokenBucket {
            state: Mutex::new(State {
                tokens: max_tokens,
                next_fill: now + fill_interval,
            }),
        }
    }

    /// Refills the bucket for the fills due by `now` (`tokens_per_fill`
    /// each, never above `max_tokens`), then takes a token if one is left.
    fn take(
        &self,
        max_tokens: u32,
        tokens_per_fill: u32,
        fill_interval: Duration,
        now: Instant,
    ) -> bool {
        let mut s = self.state.lock().expect("token bucket lock poisoned");
        if now >= s.next_fill {
            let interval = fill_interval.as_nanos().max(1);
            let fills = 1 + now.duration_since(s.next_fill).as_nanos() / interval;
            let added = u64::try_from(fills)
                .unwrap_or(u64::MAX)
                .saturating_mul(u64::from(tokens_per_fill));
            let tokens = u64::from(s.tokens).saturating_add(added);
            s.tokens = u32::try_from(tokens.min(u64::from(max_tokens))).unwrap_or(u32::MAX);
            let step = u32::try_from(fills).unwrap_or(u32::MAX);
            s.next_fill += fill_interval.saturating_mul(step);
        }
        if s.tokens == 0 {
            return false;
        }
        s.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(max: u32, per_fill: u32, every: Duration) -> LocalRateLimit {
        LocalRateLimit {
            max_tokens: max,
            tokens_per_fill: per_fill,
            fill_interval: every,
            status: 423,
            response_headers: HeaderMutation::default(),
            bucket: Arc::new(TokenBucket::new(max, every, Instant::now())),
        }
    }

    fn admitted(l: &LocalRateLimit, n: usize) -> usize {
        (0..n).filter(|_| l.admit(Instant::now())).count()
    }

    #[tokio::test(start_paused = true)]
    async fn five_per_ten_seconds_admits_exactly_five_in_each_window() {
        let l = limit(5, 5, Duration::from_secs(10));
        assert_eq!(admitted(&l, 8), 5);
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(admitted(&l, 3), 0, "nothing before the window ends");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(admitted(&l, 8), 5);
        // Three idle windows refill to the bucket's size, never above it.
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(admitted(&l, 8), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_partial_fill_adds_its_tokens_up_to_the_size() {
        let l = limit(4, 1, Duration::from_secs(1));
        assert_eq!(admitted(&l, 4), 4);
        tokio::time::advance(Duration::from_millis(2_500)).await;
        assert_eq!(admitted(&l, 4), 2, "two fills of one token");
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(
            admitted(&l, 4),
            1,
            "the next fill comes on the interval grid"
        );
    }

    #[test]
    fn equality_is_the_configuration_not_the_tokens() {
        let a = limit(5, 5, Duration::from_secs(10));
        let b = limit(5, 5, Duration::from_secs(10));
        assert!(a.admit(Instant::now()));
        assert_eq!(a, b);
        assert_ne!(a, limit(6, 5, Duration::from_secs(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_rate_admits_its_number_per_interval() {
        let every = Duration::from_secs(1);
        let c = ConnectionRateLimit {
            max_tokens: 3,
            tokens_per_fill: 3,
            fill_interval: every,
            bucket: Arc::new(TokenBucket::new(3, every, Instant::now())),
        };
        assert_eq!((0..5).filter(|_| c.admit(Instant::now())).count(), 3);
        tokio::time::advance(every).await;
        assert_eq!((0..5).filter(|_| c.admit(Instant::now())).count(), 3);
    }
}
