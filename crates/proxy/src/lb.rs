//! Load balancing over a cluster's endpoints, with passive outlier
//! ejection.
//!
//! Owns per-endpoint health (consecutive connect failures, ejection until
//! a deadline, connections in flight) and the order in which a new
//! connection tries endpoints: the policy's pick first, then the others,
//! ejected endpoints last. It never ejects the last healthy endpoint's
//! chance: when every endpoint is ejected they are all tried anyway.
//! State survives configuration updates (the [`Balancer`] is rebuilt with
//! the same [`Endpoint`] objects for addresses that stay).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use rand::Rng as _;
use tokio::time::Instant;

use crate::model::LbPolicy;

/// Consecutive connect failures that eject an endpoint.
pub const EJECT_AFTER_FAILURES: u32 = 2;
/// Base ejection time; the n-th ejection in a row lasts n times this.
pub const BASE_EJECTION: Duration = Duration::from_secs(5);
/// Longest ejection.
pub const MAX_EJECTION: Duration = Duration::from_secs(60);

/// One endpoint and its health.
#[derive(Debug)]
pub struct Endpoint {
    /// Its address.
    pub addr: SocketAddr,
    active: AtomicUsize,
    failures: AtomicU32,
    ejections: AtomicU32,
    ejected_until: Mutex<Option<Instant>>,
}

/// Keeps [`Endpoint::active`] up while a connection is open.
#[derive(Debug)]
pub struct ActiveGuard(Arc<Endpoint>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Relaxed);
    }
}

impl Endpoint {
    /// A healthy endpoint.
    pub fn new(addr: SocketAddr) -> Arc<Self> {
        Arc::new(Endpoint {
            addr,
            active: AtomicUsize::new(0),
            failures: AtomicU32::new(0),
            ejections: AtomicU32::new(0),
            ejected_until: Mutex::new(None),
        })
    }

    /// Whether the endpoint is ejected at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.ejected_until
            .lock()
            .expect("endpoint lock")
            .is_some_and(|until| until > now)
    }

    /// Records a successful connect: failures reset, ejection ends.
    pub fn record_success(&self) {
        self.failures.store(0, Relaxed);
        self.ejections.store(0, Relaxed);
        *self.ejected_until.lock().expect("endpoint lock") = None;
    }

    /// Records a failed connect; returns true when this ejected it.
    pub fn record_failure(&self, now: Instant) -> bool {
        let failures = self.failures.fetch_add(1, Relaxed) + 1;
        if failures < EJECT_AFTER_FAILURES {
            return false;
        }
        self.failures.store(0, Relaxed);
        let n = self.ejections.fetch_add(1, Relaxed) + 1;
        let duration = (BASE_EJECTION * n).min(MAX_EJECTION);
        *self.ejected_until.lock().expect("endpoint lock") = Some(now + duration);
        true
    }

    /// Counts a connection in flight until the guard drops.
    pub fn start(self: &Arc<Self>) -> ActiveGuard {
        self.active.fetch_add(1, Relaxed);
        ActiveGuard(self.clone())
    }

    /// Connections in flight.
    pub fn active(&self) -> usize {
        self.active.load(Relaxed)
    }
}

/// A cluster's endpoints and its policy.
#[derive(Debug)]
pub struct Balancer {
    policy: LbPolicy,
    endpoints: Vec<Arc<Endpoint>>,
    next: AtomicUsize,
}

impl Balancer {
    /// A balancer over `addrs`, reusing the health of endpoints in
    /// `previous` with the same address.
    pub fn new(policy: LbPolicy, addrs: &[SocketAddr], previous: Option<&Balancer>) -> Self {
        let endpoints = addrs
            .iter()
            .map(|a| {
                previous
                    .and_then(|p| p.endpoints.iter().find(|e| e.addr == *a).cloned())
                    .unwrap_or_else(|| Endpoint::new(*a))
            })
            .collect();
        Balancer {
            policy,
            endpoints,
            next: AtomicUsize::new(previous.map_or(0, |p| p.next.load(Relaxed))),
        }
    }

    /// Whether there are no endpoints at all.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The endpoint one request should try: [`Balancer::attempt_order`]'s
    /// first, without building the whole order when it is not ejected.
    pub fn pick(&self, now: Instant) -> Option<Arc<Endpoint>> {
        let n = self.endpoints.len();
        if n == 0 {
            return None;
        }
        let first = self.first(n);
        let e = &self.endpoints[first];
        if !e.is_ejected(now) {
            return Some(e.clone());
        }
        self.attempt_order(now).into_iter().next()
    }

    /// The index the policy starts at.
    fn first(&self, n: usize) -> usize {
        match self.policy {
            LbPolicy::RoundRobin => self.next.fetch_add(1, Relaxed) % n,
            LbPolicy::LeastRequest => {
                let mut rng = rand::rng();
                let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                if self.endpoints[b].active() < self.endpoints[a].active() {
                    b
                } else {
                    a
                }
            }
        }
    }

    /// The endpoints in the order a new connection should try them.
    pub fn attempt_order(&self, now: Instant) -> Vec<Arc<Endpoint>> {
        let n = self.endpoints.len();
        if n == 0 {
            return Vec::new();
        }
        let first = self.first(n);
        let rotated = (0..n).map(|i| self.endpoints[(first + i) % n].clone());
        let (healthy, ejected): (Vec<_>, Vec<_>) = rotated.partition(|e| !e.is_ejected(now));
        healthy.into_iter().chain(ejected).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 1000 + i)))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn round_robin_spreads_and_skips_ejected_endpoints() {
        let b = Balancer::new(LbPolicy::RoundRobin, &addrs(2), None);
        let now = Instant::now();
        let firsts: Vec<_> = (0..4)
            .map(|_| b.attempt_order(now)[0].addr.port())
            .collect();
        assert_eq!(firsts, [1000, 1001, 1000, 1001]);
        let bad = b.attempt_order(now)[0].clone();
        assert!(!bad.record_failure(now));
        assert!(bad.record_failure(now), "second consecutive failure ejects");
        for _ in 0..4 {
            assert_ne!(b.attempt_order(now)[0].addr, bad.addr);
        }
        tokio::time::advance(BASE_EJECTION + Duration::from_millis(1)).await;
        assert!(!bad.is_ejected(Instant::now()), "ejection ends");
    }

    #[tokio::test(start_paused = true)]
    async fn all_ejected_are_still_tried_and_health_survives_updates() {
        let b = Balancer::new(LbPolicy::RoundRobin, &addrs(1), None);
        let now = Instant::now();
        let e = b.attempt_order(now)[0].clone();
        e.record_failure(now);
        e.record_failure(now);
        assert_eq!(
            b.attempt_order(now).len(),
            1,
            "the only endpoint is still tried"
        );
        let rebuilt = Balancer::new(LbPolicy::RoundRobin, &addrs(2), Some(&b));
        assert!(rebuilt.attempt_order(now).last().unwrap().is_ejected(now));
    }

    #[test]
    fn least_request_prefers_the_idle_endpoint() {
        let b = Balancer::new(LbPolicy::LeastRequest, &addrs(2), None);
        let now = Instant::now();
        let busy = b.endpoints[0].clone();
        let _guards: Vec<_> = (0..10).map(|_| busy.start()).collect();
        let idle_first = (0..200)
            .filter(|_| b.attempt_order(now)[0].addr == b.endpoints[1].addr)
            .count();
        // Two random choices pick the busy one only when both draws are it.
        assert!(idle_first > 100, "idle endpoint first in {idle_first}/200");
    }
}
