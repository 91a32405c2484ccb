//! The endpoints this sidecar keeps out of its balancers, as it reports
//! them to the control plane (issue 36: unhealthy endpoints are named in
//! `meshlink inspect dataplane` and the console).
//!
//! Owns the sampler. An endpoint's standing lives in atomics that the
//! health checks and the data path set without telling anyone
//! ([`crate::lb::Endpoint::checked_health`], [`crate::lb::Endpoint::is_ejected`],
//! the same facts as `/config_dump`'s `endpoint_health`), so [`run`]
//! samples every cluster of the data-path view every [`SAMPLE_EVERY`] and
//! whenever the view changes, and publishes the set only when it changes
//! (cluster, address, reason). Each entry keeps the instant it was first
//! seen, so its duration grows without being a change. Endpoints pending
//! their first check are not unhealthy (nothing is known of them yet) and
//! are never listed. It only reads: it never changes a standing or what
//! the balancer picks.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::dataplane::Dataplane;
use crate::lb::CheckedHealth;

/// How often the endpoints' standing is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Why an endpoint is kept out of a cluster's balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The cluster's active health check (MeshHealthCheck) fails.
    HealthCheck,
    /// Outlier detection ejected it (MeshCircuitBreaker's, or the
    /// built-in one).
    Outlier,
}

impl Reason {
    /// The name in reports and in the Dataplane's status.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::HealthCheck => "HealthCheck",
            Reason::Outlier => "Outlier",
        }
    }
}

/// One unhealthy endpoint: cluster, address and reason.
pub type EndpointKey = (String, SocketAddr, Reason);

/// The unhealthy endpoints, each with the instant it was first seen so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnhealthyEndpoints {
    since: BTreeMap<EndpointKey, Instant>,
}

impl UnhealthyEndpoints {
    /// Takes what `view` shows at `now`; returns whether the set changed.
    /// An entry that stays keeps its first instant; a new one starts at
    /// `now`.
    pub fn observe(&mut self, view: &Dataplane, now: Instant) -> bool {
        let seen = unhealthy_in(view, now);
        let changed =
            seen.len() != self.since.len() || seen.iter().any(|k| !self.since.contains_key(k));
        if changed {
            self.since.retain(|k, _| seen.contains(k));
            for key in seen {
                self.since.entry(key).or_insert(now);
            }
        }
        changed
    }

    /// Every entry with the instant it was first seen, sorted by cluster,
    /// address and reason.
    pub fn iter(&self) -> impl Iterator<Item = (&EndpointKey, Instant)> {
        self.since.iter().map(|(k, t)| (k, *t))
    }

    /// Whether every endpoint takes traffic (or waits for its first
    /// check).
    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }

    /// A set of exactly `entries` (tests of what reads it).
    #[cfg(test)]
    pub(crate) fn of(entries: impl IntoIterator<Item = (EndpointKey, Instant)>) -> Self {
        UnhealthyEndpoints {
            since: entries.into_iter().collect(),
        }
    }
}

/// The endpoints `view` keeps out at `now`: one entry per reason, so an
/// endpoint failing its check and ejected has two.
pub fn unhealthy_in(view: &Dataplane, now: Instant) -> BTreeSet<EndpointKey> {
    let mut out = BTreeSet::new();
    for (name, cluster) in &view.clusters {
        let checked = cluster.spec.health_check.is_some();
        for e in cluster.balancer.endpoints() {
            if checked && e.checked_health() == CheckedHealth::Unhealthy {
                out.insert((name.clone(), e.addr, Reason::HealthCheck));
            }
            if e.is_ejected(now) {
                out.insert((name.clone(), e.addr, Reason::Outlier));
            }
        }
    }
    out
}

/// Samples `dataplane` every [`SAMPLE_EVERY`] and on each new view,
/// publishing the set on `tx` when it changes, until `cancel` fires or
/// the view's sender is gone.
pub async fn run(
    mut dataplane: watch::Receiver<Arc<Dataplane>>,
    tx: watch::Sender<Arc<UnhealthyEndpoints>>,
    cancel: CancellationToken,
) {
    let mut current = UnhealthyEndpoints::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let view = dataplane.borrow_and_update().clone();
        if current.observe(&view, Instant::now()) {
            tx.send_replace(Arc::new(current.clone()));
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = dataplane.changed() => if changed.is_err() {
                return;
            },
            _ = tick.tick() => {}
        }
    }
}

#[cfg(test)]
#[path = "unhealthy_tests.rs"]
mod tests;
