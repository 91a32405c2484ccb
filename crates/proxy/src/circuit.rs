//! A cluster's circuit breaker: Envoy's `circuit_breakers.thresholds`
//! counted per cluster (requests in flight, requests waiting for a
//! connection, upstream connections, retries in flight).
//!
//! Owns the counters and the admission decision; every admitted unit
//! holds a [`Slot`] that gives its place back when dropped (a request's
//! when its response body ends). It never queues by itself: a request
//! waiting for a connection holds a pending slot and waits on
//! [`Circuit::freed`], which fires whenever a slot is given back. Without
//! thresholds nothing is refused and retries fall back to the pool's
//! retry budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use meshlink_runtime::Limit;
use tokio::sync::Notify;

use crate::http::budget::{InFlight, RetryBudget};
use crate::model::circuit_breaker::Thresholds;

/// The counters of one cluster.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicUsize,
    pending: AtomicUsize,
    connections: AtomicUsize,
    retries: AtomicUsize,
    freed: Notify,
}

impl Counters {
    fn of(&self, limit: Limit) -> &AtomicUsize {
        match limit {
            Limit::MaxRequests => &self.requests,
            Limit::MaxPendingRequests => &self.pending,
            Limit::MaxConnections => &self.connections,
            Limit::MaxRetries => &self.retries,
        }
    }
}

/// One cluster's limits and what they count.
#[derive(Debug, Default)]
pub struct Circuit {
    limits: Option<Thresholds>,
    counters: Arc<Counters>,
}

/// One admitted request, pending request, connection or retry; its place
/// is given back when dropped.
#[derive(Debug)]
pub struct Slot {
    counters: Arc<Counters>,
    limit: Limit,
    /// Whether anyone may wait for the place (the cluster has limits).
    wake: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.counters.of(self.limit).fetch_sub(1, Relaxed);
        if self.wake {
            self.counters.freed.notify_waiters();
        }
    }
}

/// A retry's place: in the cluster's `max_retries`, or (without
/// thresholds) in the pool's retry budget.
#[derive(Debug)]
pub enum RetrySlot<'a> {
    /// Counted against `max_retries`.
    Limited(Slot),
    /// Counted against the retry budget.
    Budget(InFlight<'a>),
}

impl Circuit {
    /// A circuit enforcing `limits` (none: count only).
    pub fn new(limits: Option<Thresholds>) -> Circuit {
        Circuit {
            limits,
            counters: Arc::default(),
        }
    }

    /// The configured limit for `limit`, if any.
    fn max(&self, limit: Limit) -> Option<usize> {
        let t = self.limits?;
        Some(match limit {
            Limit::MaxRequests => t.max_requests,
            Limit::MaxPendingRequests => t.max_pending_requests,
            Limit::MaxConnections => t.max_connections,
            Limit::MaxRetries => t.max_retries,
        } as usize)
    }

    /// A place under `limit`, or `Err(limit)` when it is full.
    pub fn admit(&self, limit: Limit) -> Result<Slot, Limit> {
        let counter = self.counters.of(limit);
        let now = counter.fetch_add(1, Relaxed);
        if self.max(limit).is_some_and(|max| now >= max) {
            counter.fetch_sub(1, Relaxed);
            return Err(limit);
        }
        Ok(Slot {
            counters: self.counters.clone(),
            limit,
            wake: self.limits.is_some(),
        })
    }

    /// A retry's place, if `max_retries` (or without thresholds, the
    /// retry budget) allows one now.
    pub fn retry<'a>(&self, budget: &'a RetryBudget) -> Option<RetrySlot<'a>> {
        if self.limits.is_none() {
            return budget.retry().map(RetrySlot::Budget);
        }
        self.admit(Limit::MaxRetries).ok().map(RetrySlot::Limited)
    }

    /// Whether the cluster has thresholds (else nothing is refused).
    pub fn is_limited(&self) -> bool {
        self.limits.is_some()
    }

    /// Whether a new connection would be refused now.
    pub fn connections_full(&self) -> bool {
        self.max(Limit::MaxConnections)
            .is_some_and(|max| self.counters.connections.load(Relaxed) >= max)
    }

    /// Fires when any slot of this cluster is given back (a request ended,
    /// a connection closed): a waiting request tries again. Create the
    /// `notified()` future before checking, so no wake-up is missed.
    pub fn freed(&self) -> &Notify {
        &self.counters.freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_limit_refuses_until_a_place_is_given_back() {
        let c = Circuit::new(Some(Thresholds {
            max_requests: 2,
            ..Thresholds::default()
        }));
        let one = c.admit(Limit::MaxRequests).unwrap();
        let _two = c.admit(Limit::MaxRequests).unwrap();
        assert_eq!(c.admit(Limit::MaxRequests).unwrap_err(), Limit::MaxRequests);
        drop(one);
        assert!(c.admit(Limit::MaxRequests).is_ok());
        // Limits are independent.
        assert!(c.admit(Limit::MaxPendingRequests).is_ok());
    }

    #[test]
    fn retries_use_max_retries_with_thresholds_and_the_budget_without() {
        let budget = RetryBudget::default();
        let c = Circuit::new(Some(Thresholds {
            max_retries: 1,
            ..Thresholds::default()
        }));
        let first = c.retry(&budget);
        assert!(matches!(first, Some(RetrySlot::Limited(_))));
        assert!(c.retry(&budget).is_none(), "max_retries: 1");
        let open = Circuit::new(None);
        let three: Vec<_> = (0..3).map(|_| open.retry(&budget).unwrap()).collect();
        assert!(
            open.retry(&budget).is_none(),
            "the budget's 3 with no request"
        );
        drop(three);
        assert!(
            (0..100).all(|_| open.admit(Limit::MaxRequests).is_ok()),
            "no thresholds, no limit"
        );
    }

    #[tokio::test]
    async fn a_given_back_place_wakes_a_waiter() {
        let c = Arc::new(Circuit::new(Some(Thresholds {
            max_connections: 1,
            ..Thresholds::default()
        })));
        let held = c.admit(Limit::MaxConnections).unwrap();
        assert!(c.connections_full());
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move {
                loop {
                    let notified = c.freed().notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if let Ok(slot) = c.admit(Limit::MaxConnections) {
                        return slot;
                    }
                    notified.await;
                }
            })
        };
        drop(held);
        let _slot = waiter.await.unwrap();
        assert!(c.connections_full());
    }
}
