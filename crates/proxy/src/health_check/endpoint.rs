//! The checking loop of one endpoint of one cluster: wait the initial
//! jitter, then check, record the endpoint's standing in the balancer
//! ([`crate::lb::CheckedHealth`], the thresholds' arithmetic is
//! [`Streak`]'s), count the result, and wait the interval Envoy would
//! (`no_traffic_interval` while the cluster has carried no traffic,
//! `unhealthy_interval` while the endpoint is unhealthy, else `interval`;
//! plus jitter), until cancelled.
//!
//! Reads the cluster (its TLS config, its endpoint object) from the
//! latest [`Dataplane`] at each check, so a certificate rotation is
//! picked up by the next new connection. Failures are logged once per
//! streak and then rate-limited ([`LogLimiter`]), unless
//! `always_log_health_check_failures`. It never touches the data path:
//! the balancer reads the standing with one atomic load.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng as _;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::probe::{Prober, Target};
use crate::dataplane::{ClusterRuntime, Dataplane, server_name};
use crate::lb::{CheckedHealth, Endpoint, Streak};
use crate::log_limit::{LogLimiter, REPEAT_INTERVAL};
use crate::metrics::ProxyMetrics;
use crate::model::health_check::HealthCheckSpec;

/// One endpoint's checks.
pub(super) struct EndpointCheck {
    pub(super) cluster: String,
    pub(super) addr: SocketAddr,
    pub(super) spec: HealthCheckSpec,
    pub(super) dataplane: watch::Receiver<Arc<Dataplane>>,
    pub(super) metrics: Arc<ProxyMetrics>,
}

impl EndpointCheck {
    /// Checks until `stop` fires.
    pub(super) async fn run(self, stop: CancellationToken) {
        let jitter = random_up_to(self.spec.initial_jitter);
        if !jitter.is_zero() && sleep_or_stop(jitter, &stop).await {
            return;
        }
        let mut prober = Prober::new(&self.spec);
        let mut streak = Streak::default();
        let mut failures_log = LogLimiter::new(REPEAT_INTERVAL);
        let mut unhealthy = UnhealthyMark::new(&self.metrics, &self.cluster);
        loop {
            let Some((cluster, endpoint)) = self.current() else {
                // Gone from the view; the supervisor stops this task.
                if sleep_or_stop(self.spec.interval, &stop).await {
                    return;
                }
                continue;
            };
            let target = Target {
                addr: self.addr,
                cluster: self.cluster.clone(),
                connect_timeout: cluster.spec.connect_timeout,
                tls: cluster.tls.clone().map(|c| (c, server_name(&cluster.spec))),
                http2: cluster.spec.http2,
            };
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = prober.check(&target, self.spec.timeout) => outcome,
            };
            let before = endpoint.checked_health();
            let after = streak.after(
                before,
                outcome.is_ok(),
                self.spec.healthy_threshold,
                self.spec.unhealthy_threshold,
            );
            endpoint.set_checked_health(after);
            unhealthy.set(after == CheckedHealth::Unhealthy);
            let result = outcome.as_ref().map_or_else(|f| f.as_str(), |()| "success");
            self.metrics.health_checked(&self.cluster, result);
            let (cluster_name, addr, kind) = (&self.cluster, self.addr, self.spec.kind.as_str());
            match &outcome {
                Ok(()) => {
                    failures_log.reset();
                }
                Err(failure) => {
                    let line = if self.spec.always_log_failures {
                        Some(1)
                    } else {
                        failures_log.hit(Instant::now())
                    };
                    if let Some(count) = line {
                        tracing::warn!(cluster = %cluster_name, endpoint = %addr, check = kind, failures = count, "health check failed: {failure}");
                    }
                }
            }
            if let Some(path) = &self.spec.event_log_path
                && let Some(event) = super::event_log::event(before, after, outcome.is_ok())
            {
                super::event_log::append(path, kind, cluster_name, addr, event);
            }
            if before != after {
                tracing::info!(cluster = %cluster_name, endpoint = %addr, check = kind, from = before.as_str(), to = after.as_str(), "endpoint health changed");
            }
            let base = if !cluster.balancer.has_carried_traffic() {
                self.spec.no_traffic_interval
            } else if after == CheckedHealth::Unhealthy {
                self.spec.unhealthy_interval
            } else {
                self.spec.interval
            };
            drop(cluster);
            if sleep_or_stop(base + interval_jitter(&self.spec, base), &stop).await {
                return;
            }
        }
    }

    /// The cluster's runtime and this endpoint's object in the latest view.
    fn current(&self) -> Option<(Arc<ClusterRuntime>, Arc<Endpoint>)> {
        let dp = self.dataplane.borrow().clone();
        let cluster = dp.clusters.get(&self.cluster)?.clone();
        let endpoint = cluster
            .balancer
            .endpoints()
            .iter()
            .find(|e| e.addr == self.addr)?
            .clone();
        Some((cluster, endpoint))
    }
}

/// Keeps the cluster's unhealthy-endpoints gauge counting this endpoint
/// while it is unhealthy, and no longer once the task ends.
struct UnhealthyMark {
    gauge: prometheus_client::metrics::gauge::Gauge,
    on: bool,
}

impl UnhealthyMark {
    fn new(metrics: &ProxyMetrics, cluster: &str) -> Self {
        UnhealthyMark {
            gauge: metrics.unhealthy_endpoints(cluster),
            on: false,
        }
    }

    fn set(&mut self, on: bool) {
        match (self.on, on) {
            (false, true) => self.gauge.inc(),
            (true, false) => self.gauge.dec(),
            _ => return,
        };
        self.on = on;
    }
}

impl Drop for UnhealthyMark {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// The jitter added to an interval of `base`: up to `interval_jitter`,
/// plus up to `interval_jitter_percent` of `base` (Envoy adds both).
fn interval_jitter(spec: &HealthCheckSpec, base: Duration) -> Duration {
    let share = base.mul_f64(f64::from(spec.interval_jitter_percent) / 100.0);
    random_up_to(spec.interval_jitter) + random_up_to(share)
}

/// A random duration in `[0, max)` (zero for zero).
fn random_up_to(max: Duration) -> Duration {
    let nanos = max.as_nanos().min(u128::from(u64::MAX)) as u64;
    if nanos == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rand::rng().random_range(0..nanos))
}

/// Sleeps `d`; `true` when `stop` fired first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}
