//! Active health checks (what Kuma's MeshHealthCheck becomes): one task
//! per endpoint of every cluster with a `health_checks` entry, checking
//! from this sidecar over the cluster's own mTLS ([`probe`]), and
//! recording each endpoint's standing where the balancer reads it
//! ([`crate::lb::CheckedHealth`]).
//!
//! Owns the tasks. The [`HealthChecker`] follows the data-path view
//! ([`Dataplane`]): when a view arrives it starts a task for each
//! (cluster, endpoint) that needs one, and cancels (through the
//! `DropGuard` it holds per task) the tasks whose endpoint left its
//! cluster's load assignment, whose cluster went away, or whose check
//! changed (a changed check restarts with the endpoint's standing as it
//! was). Every task is in its `JoinSet` and ends with it, or when the
//! proxy's task token fires: none outlives the proxy. A task whose check
//! stops while its endpoint stays (the check was removed) leaves the
//! endpoint pending again, so a check added later starts afresh.
//!
//! Endpoints start pending (kept out of the balancer until a check
//! passes, as Envoy's hosts are); see [`crate::lb`] for the panic rule.

mod endpoint;
mod event_log;
mod grpc;
pub mod probe;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::dataplane::Dataplane;
use crate::lb::CheckedHealth;
use crate::metrics::ProxyMetrics;
use crate::model::health_check::HealthCheckSpec;

/// Runs the active health checks of every cluster that has one.
#[derive(Debug)]
pub struct HealthChecker {
    /// The data-path view (clusters, balancers, TLS configs).
    pub dataplane: watch::Receiver<Arc<Dataplane>>,
    /// Where checks are counted.
    pub metrics: Arc<ProxyMetrics>,
}

/// One running endpoint task: the check it runs, and the guard whose drop
/// cancels it.
struct Running {
    spec: HealthCheckSpec,
    _guard: DropGuard,
}

impl HealthChecker {
    /// Follows the view until `stop` fires or the view's sender is gone,
    /// then cancels and awaits every task.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut running: HashMap<(String, SocketAddr), Running> = HashMap::new();
        let mut tasks = JoinSet::new();
        loop {
            let view = self.dataplane.borrow_and_update().clone();
            self.reconcile(&view, &mut running, &mut tasks, &stop);
            tokio::select! {
                () = stop.cancelled() => break,
                changed = self.dataplane.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(running);
        tasks.shutdown().await;
    }

    /// Starts and cancels tasks so that exactly the endpoints of `view`'s
    /// checked clusters have one, running their cluster's check.
    fn reconcile(
        &self,
        view: &Dataplane,
        running: &mut HashMap<(String, SocketAddr), Running>,
        tasks: &mut JoinSet<()>,
        stop: &CancellationToken,
    ) {
        let mut wanted: HashMap<(String, SocketAddr), &HealthCheckSpec> = HashMap::new();
        for (name, cluster) in &view.clusters {
            let Some(spec) = &cluster.spec.health_check else {
                continue;
            };
            for e in cluster.balancer.endpoints() {
                wanted.insert((name.clone(), e.addr), spec);
            }
        }
        running.retain(|key, r| {
            let keep = wanted.get(key).is_some_and(|spec| **spec == r.spec);
            if !keep && !wanted.contains_key(key) {
                forget_standing(view, key);
            }
            keep
        });
        for (key, spec) in wanted {
            if running.contains_key(&key) {
                continue;
            }
            let token = stop.child_token();
            let task = endpoint::EndpointCheck {
                cluster: key.0.clone(),
                addr: key.1,
                spec: spec.clone(),
                dataplane: self.dataplane.clone(),
                metrics: self.metrics.clone(),
            };
            tasks.spawn(task.run(token.clone()));
            running.insert(
                key,
                Running {
                    spec: spec.clone(),
                    _guard: token.drop_guard(),
                },
            );
        }
    }
}

/// Leaves the endpoint `key` pending when it stays in `view` unchecked.
fn forget_standing(view: &Dataplane, (cluster, addr): &(String, SocketAddr)) {
    let endpoint = view
        .clusters
        .get(cluster)
        .and_then(|c| c.balancer.endpoints().iter().find(|e| e.addr == *addr));
    if let Some(e) = endpoint {
        e.set_checked_health(CheckedHealth::Pending);
    }
}

#[cfg(test)]
mod tests;
