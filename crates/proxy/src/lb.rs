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
//! [`OutlierSpec::builtin`]. With an active health check
//! ([`Balancer::with_active_checks`]) an endpoint takes traffic only once
//! a check passed ([`CheckedHealth`], set by [`crate::health_check`]):
//! endpoints pending their first check and unhealthy ones are kept out
//! as ejected ones are, and count as not healthy for the panic threshold.
//! With `fail_traffic_on_panic`, a panicking cluster gives no endpoint
//! (requests fail) instead of all of them.

mod checked;
mod outlier;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use rand::Rng as _;
use tokio::time::Instant;

pub use checked::{CheckedHealth, Streak};
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
    checked: checked::CheckedCell,
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
            checked: checked::CheckedCell::default(),
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

    /// Its standing with the cluster's active health check.
    pub fn checked_health(&self) -> CheckedHealth {
        self.checked.get()
    }

    /// Records its standing with the active health check.
    pub fn set_checked_health(&self, health: CheckedHealth) {
        self.checked.set(health);
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
    /// An active health check runs: only endpoints that passed it count.
    active_checks: bool,
    /// Whether the cluster has carried traffic (kept across rebuilds; the
    /// health check runs at its no-traffic interval until then).
    used: Arc<AtomicBool>,
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
            active_checks: false,
            used: previous.map_or_else(Arc::default, |p| p.used.clone()),
        }
    }

    /// This balancer, keeping endpoints that have not passed the active
    /// health check out when `on`.
    pub fn with_active_checks(mut self, on: bool) -> Self {
        self.active_checks = on;
        self
    }

    /// The endpoints, in the configuration's order.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// Whether the cluster has carried traffic (an endpoint was picked).
    pub fn has_carried_traffic(&self) -> bool {
        self.used.load(Relaxed)
    }

    fn mark_used(&self) {
        if !self.used.load(Relaxed) {
            self.used.store(true, Relaxed);
        }
    }

    /// Whether `e` is kept out at `now`: ejected, or (with active checks)
    /// not passing them.
    fn excluded(&self, e: &Endpoint, now: Instant) -> bool {
        e.is_ejected(now) || (self.active_checks && e.checked_health() != CheckedHealth::Healthy)
    }

    /// Whether `e` takes traffic at `now` (see [`Balancer::excluded`]).
    pub fn is_eligible(&self, e: &Endpoint, now: Instant) -> bool {
        !self.excluded(e, now)
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
    /// `now` (neither ejected nor failing active checks): then every
    /// endpoint takes traffic.
    fn panicking(&self, now: Instant) -> bool {
        let threshold = self.detector.spec.healthy_panic_threshold as usize;
        let n = self.endpoints.len();
        let healthy = self
            .endpoints
            .iter()
            .filter(|e| !self.excluded(e, now))
            .count();
        threshold > 0 && healthy * 10_000 < threshold * n
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
        self.mark_used();
        let panicking = self.panicking(now);
        if panicking && self.detector.spec.fail_traffic_on_panic {
            return None;
        }
        if let (Some(ring), Some(h)) = (&self.ring, hash) {
            let order = ring.order_from(h, n);
            return order
                .iter()
                .map(|&i| &self.endpoints[i])
                .find(|e| panicking || !self.excluded(e, now))
                .or_else(|| order.first().map(|&i| &self.endpoints[i]))
                .cloned();
        }
        let first = self.first(n);
        let e = &self.endpoints[first];
        if !self.excluded(e, now) || panicking {
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
        self.mark_used();
        let first = self.first(n);
        self.order_from(first, now)
    }

    /// Every endpoint from `first` on, ejected ones last (unless the
    /// cluster panics).
    fn order_from(&self, first: usize, now: Instant) -> Vec<Arc<Endpoint>> {
        let n = self.endpoints.len();
        let rotated = (0..n).map(|i| self.endpoints[(first + i) % n].clone());
        if self.panicking(now) {
            if self.detector.spec.fail_traffic_on_panic {
                return Vec::new();
            }
            return rotated.collect();
        }
        let (healthy, ejected): (Vec<_>, Vec<_>) = rotated.partition(|e| !self.excluded(e, now));
        healthy.into_iter().chain(ejected).collect()
    }
}

#[cfg(test)]
#[path = "lb/tests.rs"]
mod tests;
