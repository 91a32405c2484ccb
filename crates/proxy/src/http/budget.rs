//! A cluster's retry budget (Envoy's `retry_budget` defaults): retries in
//! flight may be at most 20 % of the requests in flight, and never fewer
//! than 3, so that retries cannot multiply an overload.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Share of in-flight requests that may be retries, in percent.
const BUDGET_PERCENT: usize = 20;
/// Retries always allowed in flight, whatever the request count.
const MIN_RETRY_CONCURRENCY: usize = 3;

/// In-flight requests and retries of one cluster.
#[derive(Debug, Default)]
pub struct RetryBudget {
    requests: AtomicUsize,
    retries: AtomicUsize,
}

/// Counts one request (or retry) in flight until dropped.
#[derive(Debug)]
pub struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl RetryBudget {
    /// Counts a request in flight.
    pub fn request(&self) -> InFlight<'_> {
        self.requests.fetch_add(1, Relaxed);
        InFlight(&self.requests)
    }

    /// A retry in flight if the budget allows one now.
    pub fn retry(&self) -> Option<InFlight<'_>> {
        let allowed =
            (self.requests.load(Relaxed) * BUDGET_PERCENT / 100).max(MIN_RETRY_CONCURRENCY);
        let now = self.retries.fetch_add(1, Relaxed);
        if now >= allowed {
            self.retries.fetch_sub(1, Relaxed);
            return None;
        }
        Some(InFlight(&self.retries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_capped_at_a_fifth_of_requests_but_at_least_three() {
        let budget = RetryBudget::default();
        let _one = budget.request();
        let three: Vec<_> = (0..3)
            .map(|_| budget.retry().expect("three always"))
            .collect();
        assert!(budget.retry().is_none(), "a fourth retry with one request");
        drop(three);
        let requests: Vec<_> = (0..49).map(|_| budget.request()).collect();
        let ten: Vec<_> = (0..10)
            .map(|_| budget.retry().expect("20 % of 50"))
            .collect();
        assert!(budget.retry().is_none());
        drop(ten);
        drop(requests);
        assert!(budget.retry().is_some());
    }
}
