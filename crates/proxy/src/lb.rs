//! Load balancing over a cluster's endpoints, with outlier detection.
//!
//! Owns per-endpoint health (the detectors' counters, ejection until a
//! deadline, connections in flight) and the order in which a new
//! connection tries endpoints: the policy's pick first, then the others,
//! ejected endpoints last. Below the cluster's healthy panic threshold
//! every endpoint takes traffic again (Envoy's panic mode), and when every
//! endpoint is ejected they are all tried anyway. State survives
//! configuration updates (the [`Balancer`] is rebuilt with the same
//! [`Endpoint`] objects for addresses that stay). Detection itself is
//! [`outlier`]'s; without `outlier_detection` a cluster gets
//! [`OutlierSpec::builtin`].

mod outlier;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use rand::Rng as _;
use tokio::time::Instant;

pub use outlier::{DetectorKind, Event};

use crate::model::LbPolicy;
use crate::model::circuit_breaker::OutlierSpec;

/// One endpoint and its health.
#[derive(Debug)]
pub struct Endpoint {
    /// Its address.
    pub addr: SocketAddr,
    active: AtomicUsize,
    health: Mutex<outlier::Health>,
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
            health: Mutex::default(),
        })
    }

    fn health(&self) -> std::sync::MutexGuard<'_, outlier::Health> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the endpoint is ejected at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.health().is_ejected(now)
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

/// A cluster's endpoints, its policy and its outlier detection.
#[derive(Debug)]
pub struct Balancer {
    policy: LbPolicy,
    endpoints: Vec<Arc<Endpoint>>,
    /// The consistent-hash ring of a `RingHash` policy.
    ring: Option<crate::hash_ring::Ring>,
    next: AtomicUsize,
    detector: outlier::Detector,
}

impl Balancer {
    /// A balancer over `addrs` detecting outliers by `outlier`, reusing
    /// the health of endpoints in `previous` with the same address.
    pub fn new(
        policy: LbPolicy,
        addrs: &[SocketAddr],
        outlier: OutlierSpec,
        previous: Option<&Balancer>,
    ) -> Self {
        let endpoints = addrs
            .iter()
            .map(|a| {
                previous
                    .and_then(|p| p.endpoints.iter().find(|e| e.addr == *a).cloned())
                    .unwrap_or_else(|| Endpoint::new(*a))
            })
            .collect();
        let ring = match policy {
            LbPolicy::RingHash { min, max } => Some(crate::hash_ring::Ring::new(addrs, min, max)),
            _ => None,
        };
        Balancer {
            policy,
            ring,
            endpoints,
            next: AtomicUsize::new(previous.map_or(0, |p| p.next.load(Relaxed))),
            detector: outlier::Detector::new(outlier, Instant::now()),
        }
    }

    /// Whether there are no endpoints at all.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Records `event` on `endpoint` at `now`, ejecting it when a
    /// consecutive detector trips, and runs the interval's sweep when it
    /// is due. Returns the ejections it made (endpoint, detector).
    pub fn record(
        &self,
        endpoint: &Endpoint,
        event: Event,
        now: Instant,
    ) -> Vec<(SocketAddr, DetectorKind)> {
        let mut ejected = Vec::new();
        let tripped = {
            let mut h = endpoint.health();
            if h.is_ejected(now) {
                [None, None]
            } else {
                h.record(&self.detector.spec, event)
            }
        };
        if let Some(kind) = tripped
            .into_iter()
            .flatten()
            .find(|kind| self.eject(endpoint, *kind, now))
        {
            ejected.push((endpoint.addr, kind));
        }
        ejected.extend(self.sweep_if_due(now));
        ejected
    }

    /// Ejects `endpoint` for `kind` if the cluster's rules allow it.
    fn eject(&self, endpoint: &Endpoint, kind: DetectorKind, now: Instant) -> bool {
        let ejected = self.ejected(now);
        if !self.detector.may_eject(kind, ejected, self.endpoints.len()) {
            return false;
        }
        let mut h = endpoint.health();
        if h.is_ejected(now) {
            return false;
        }
        h.ejections += 1;
        h.ejected_until = Some(now + self.detector.ejection_time(h.ejections));
        true
    }

    /// Endpoints ejected at `now`.
    fn ejected(&self, now: Instant) -> usize {
        self.endpoints.iter().filter(|e| e.is_ejected(now)).count()
    }

    /// The statistical detectors over the interval that ended, once per
    /// interval: judged endpoints are ejected, every endpoint's window
    /// starts again, and an endpoint not ejected counts one ejection less.
    fn sweep_if_due(&self, now: Instant) -> Vec<(SocketAddr, DetectorKind)> {
        {
            let mut next = self
                .detector
                .next_sweep
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if now < *next {
                return Vec::new();
            }
            *next = now + self.detector.spec.interval;
        }
        let windows: Vec<_> = self
            .endpoints
            .iter()
            .map(|e| {
                let mut h = e.health();
                let w = (!h.is_ejected(now)).then_some((h.external, h.local));
                if w.is_some() {
                    h.ejections = h.ejections.saturating_sub(1);
                }
                h.external = Default::default();
                h.local = Default::default();
                w
            })
            .collect();
        let mut ejected = Vec::new();
        for (i, kind) in self.detector.sweep(&windows) {
            let e = &self.endpoints[i];
            if self.eject(e, kind, now) {
                ejected.push((e.addr, kind));
            }
        }
        ejected
    }

    /// Whether fewer endpoints than the panic threshold are healthy at
    /// `now`: then ejections are ignored.
    fn panicking(&self, now: Instant) -> bool {
        let threshold = self.detector.spec.healthy_panic_threshold as usize;
        let n = self.endpoints.len();
        threshold > 0 && (n - self.ejected(now)) * 10_000 < threshold * n
    }

    /// The endpoint one request should try: [`Balancer::attempt_order`]'s
    /// first, without building the whole order when it is not ejected.
    pub fn pick(&self, now: Instant) -> Option<Arc<Endpoint>> {
        self.pick_hashed(None, now)
    }

    /// [`Balancer::pick`] for a request with `hash` (its route's
    /// `hash_policy`): on a ring, the first endpoint at or after the hash
    /// that is not ejected (the ring's order, not the list's); elsewhere,
    /// or without a hash, as the policy picks.
    pub fn pick_hashed(&self, hash: Option<u64>, now: Instant) -> Option<Arc<Endpoint>> {
        let n = self.endpoints.len();
        if n == 0 {
            return None;
        }
        if let (Some(ring), Some(h)) = (&self.ring, hash) {
            let order = ring.order_from(h, n);
            let panicking = self.panicking(now);
            return order
                .iter()
                .map(|&i| &self.endpoints[i])
                .find(|e| panicking || !e.is_ejected(now))
                .or_else(|| order.first().map(|&i| &self.endpoints[i]))
                .cloned();
        }
        let first = self.first(n);
        let e = &self.endpoints[first];
        if !e.is_ejected(now) || self.panicking(now) {
            return Some(e.clone());
        }
        self.order_from(first, now).into_iter().next()
    }

    /// The index the policy starts at.
    fn first(&self, n: usize) -> usize {
        match self.policy {
            LbPolicy::RoundRobin => self.next.fetch_add(1, Relaxed) % n,
            LbPolicy::LeastRequest => self.least_of(2, n),
            LbPolicy::LeastRequestOf(k) => self.least_of(k, n),
            // A ring without a request hash: a random point.
            LbPolicy::Random | LbPolicy::RingHash { .. } => rand::rng().random_range(0..n),
        }
    }

    /// The least loaded of `k` random endpoints (the first drawn on a tie).
    fn least_of(&self, k: u32, n: usize) -> usize {
        let mut rng = rand::rng();
        let mut best = rng.random_range(0..n);
        for _ in 1..k {
            let c = rng.random_range(0..n);
            if self.endpoints[c].active() < self.endpoints[best].active() {
                best = c;
            }
        }
        best
    }

    /// The endpoints in the order a new connection should try them.
    pub fn attempt_order(&self, now: Instant) -> Vec<Arc<Endpoint>> {
        let n = self.endpoints.len();
        if n == 0 {
            return Vec::new();
        }
        let first = self.first(n);
        self.order_from(first, now)
    }

    /// Every endpoint from `first` on, ejected ones last (unless the
    /// cluster panics).
    fn order_from(&self, first: usize, now: Instant) -> Vec<Arc<Endpoint>> {
        let n = self.endpoints.len();
        let rotated = (0..n).map(|i| self.endpoints[(first + i) % n].clone());
        if self.panicking(now) {
            return rotated.collect();
        }
        let (healthy, ejected): (Vec<_>, Vec<_>) = rotated.partition(|e| !e.is_ejected(now));
        healthy.into_iter().chain(ejected).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 1000 + i)))
            .collect()
    }

    fn builtin(n: u16) -> Balancer {
        Balancer::new(
            LbPolicy::RoundRobin,
            &addrs(n),
            OutlierSpec::builtin(),
            None,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn round_robin_spreads_and_skips_ejected_endpoints() {
        let b = builtin(2);
        let now = Instant::now();
        let firsts: Vec<_> = (0..4)
            .map(|_| b.attempt_order(now)[0].addr.port())
            .collect();
        assert_eq!(firsts, [1000, 1001, 1000, 1001]);
        let bad = b.attempt_order(now)[0].clone();
        assert!(b.record(&bad, Event::ConnectFailed, now).is_empty());
        assert_eq!(
            b.record(&bad, Event::ConnectFailed, now),
            [(bad.addr, DetectorKind::ConsecutiveGatewayFailure)],
            "the built-in rule: a second failure in a row ejects"
        );
        for _ in 0..4 {
            assert_ne!(b.attempt_order(now)[0].addr, bad.addr);
            assert_ne!(b.pick(now).unwrap().addr, bad.addr);
        }
        tokio::time::advance(Duration::from_secs(5) + Duration::from_millis(1)).await;
        assert!(!bad.is_ejected(Instant::now()), "ejection ends");
    }

    #[tokio::test(start_paused = true)]
    async fn all_ejected_are_still_tried_and_health_survives_updates() {
        let b = builtin(1);
        let now = Instant::now();
        let e = b.attempt_order(now)[0].clone();
        b.record(&e, Event::ConnectFailed, now);
        b.record(&e, Event::ConnectFailed, now);
        assert!(e.is_ejected(now));
        assert_eq!(
            b.attempt_order(now).len(),
            1,
            "the only endpoint is still tried"
        );
        assert_eq!(b.pick(now).unwrap().addr, e.addr);
        let rebuilt = Balancer::new(
            LbPolicy::RoundRobin,
            &addrs(2),
            OutlierSpec::builtin(),
            Some(&b),
        );
        assert!(rebuilt.attempt_order(now).last().unwrap().is_ejected(now));
    }

    #[tokio::test(start_paused = true)]
    async fn below_the_panic_threshold_ejected_endpoints_take_traffic_again() {
        let spec = OutlierSpec {
            consecutive_5xx: 1,
            max_ejection_percent: 100,
            ..OutlierSpec::default()
        };
        let b = Balancer::new(LbPolicy::RoundRobin, &addrs(4), spec, None);
        let now = Instant::now();
        let (one, two) = (b.endpoints[0].clone(), b.endpoints[1].clone());
        b.record(&one, Event::Response(500), now);
        // 3 of 4 healthy (75 % >= 50 %): the ejected one is skipped.
        assert!((0..8).all(|_| b.pick(now).unwrap().addr != one.addr));
        b.record(&two, Event::Response(500), now);
        b.record(&b.endpoints[2].clone(), Event::Response(500), now);
        // 1 of 4 healthy (25 % < 50 %): panic, every endpoint in turn.
        let picked: std::collections::BTreeSet<_> =
            (0..8).map(|_| b.pick(now).unwrap().addr).collect();
        assert_eq!(picked.len(), 4, "{picked:?}");
    }

    #[test]
    fn least_request_prefers_the_idle_endpoint() {
        let b = Balancer::new(
            LbPolicy::LeastRequest,
            &addrs(2),
            OutlierSpec::builtin(),
            None,
        );
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
