//! Whether this router's connector targets accept connections, so a
//! Connector whose target is down says so without waiting for traffic.
//!
//! Every connection to a target is an observation: a flow's (in
//! [`crate::flows`]) and a probe's (a plain TCP connect, closed at once).
//! A failure enters `RouterStatus.connector_failures` with the error and
//! since when; the next success removes it. One probe task per connector
//! connects to each target when the connector is configured, then, while
//! any of its targets fails, retries those with backoff
//! ([`PROBE_FIRST`] doubling to [`PROBE_MAX`]); once none fails it sleeps
//! until a flow records a failure.
//!
//! Why no stale entry survives a configuration change: a record is
//! applied inside the status channel's lock only if the target is still
//! configured, and `Router::apply` swaps the targets first and then, in
//! the same lock, drops the entries of targets it no longer has. A record
//! that read the old targets either lands before that sweep (and is swept)
//! or sees the new targets (and is dropped).
//!
//! Until a target's first connection has an outcome it is listed as
//! probing (`RouterStatus.connectors_probing`): added by `Router::apply`
//! for every target the configuration adds, removed by the first record.
//!
//! Owns the probes, the failure entries and the probing entries; never
//! decides where a flow goes (a failing target still gets its round-robin
//! turn).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::config::ConnectorConfig;
use crate::core::{ConnectorTargets, Core, LocalTarget};
use crate::status::{RouterStatus, TargetFailure};

/// The first wait before a failing target is probed again.
pub(crate) const PROBE_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between probes of a failing target.
pub(crate) const PROBE_MAX: Duration = Duration::from_secs(30);
/// How long a connector's target may take to accept a connection (a
/// flow's or a probe's).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

// === impl Core ===

impl Core {
    /// Records the outcome of a connection to `target`: a failure enters
    /// (or updates) its entry, keeping since when it fails; a success
    /// removes it. Ignored unless `target` is configured now.
    pub(crate) fn record_connect(&self, target: &LocalTarget, outcome: Result<(), String>) {
        let addr = target.addr();
        self.status.send_if_modified(|s| {
            let configured = self
                .connectors
                .borrow()
                .values()
                .flatten()
                .any(|t| t == target);
            if !configured {
                return false;
            }
            let tried = unlist(&mut s.connectors_probing, &target.connector, &addr);
            tried
                | match outcome {
                    Ok(()) => clear(s, &target.connector, &addr),
                    Err(error) => {
                        let entry = s
                            .connector_failures
                            .entry(target.connector.clone())
                            .or_default();
                        match entry.get_mut(&addr) {
                            Some(f) if f.error == error => false,
                            Some(f) => {
                                f.error = error;
                                true
                            }
                            None => {
                                entry.insert(
                                    addr,
                                    TargetFailure {
                                        error,
                                        since_unix_secs: unix_now(),
                                    },
                                );
                                true
                            }
                        }
                    }
                }
        });
    }

    /// After `Router::apply` swapped the targets (`old` were configured
    /// before): lists every added target as probing, and drops the
    /// failures and probing entries of targets no longer configured.
    pub(crate) fn reconcile_target_status(&self, old: &ConnectorTargets) {
        self.status.send_if_modified(|s| {
            let targets = self.connectors.borrow();
            let (failures_before, probing_before) =
                (s.connector_failures.clone(), s.connectors_probing.clone());
            let configured = |connector: &str, addr: &str| {
                targets
                    .values()
                    .flatten()
                    .any(|t| t.connector == connector && t.addr() == addr)
            };
            s.connector_failures.retain(|connector, failures| {
                failures.retain(|addr, _| configured(connector, addr));
                !failures.is_empty()
            });
            s.connectors_probing.retain(|connector, addrs| {
                addrs.retain(|addr| configured(connector, addr));
                !addrs.is_empty()
            });
            for t in targets.values().flatten() {
                if !old.values().flatten().any(|o| o == t) {
                    s.connectors_probing
                        .entry(t.connector.clone())
                        .or_default()
                        .insert(t.addr());
                }
            }
            s.connector_failures != failures_before || s.connectors_probing != probing_before
        });
    }
}

/// Removes `connector`'s probing entry for `addr`; whether there was one.
fn unlist(probing: &mut BTreeMap<String, BTreeSet<String>>, connector: &str, addr: &str) -> bool {
    let Some(addrs) = probing.get_mut(connector) else {
        return false;
    };
    let removed = addrs.remove(addr);
    if addrs.is_empty() {
        probing.remove(connector);
    }
    removed
}

/// Removes `connector`'s entry for `addr`; whether there was one.
fn clear(s: &mut RouterStatus, connector: &str, addr: &str) -> bool {
    let Some(failures) = s.connector_failures.get_mut(connector) else {
        return false;
    };
    let removed = failures.remove(addr).is_some();
    if failures.is_empty() {
        s.connector_failures.remove(connector);
    }
    removed
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Connects to `target` (at most [`CONNECT_TIMEOUT`]) and records the
/// outcome.
pub(crate) async fn connect(core: &Core, target: &LocalTarget) -> Result<TcpStream, String> {
    let connecting = TcpStream::connect((target.host.as_str(), target.port));
    let result = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(tcp)) => Ok(tcp),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
    };
    core.record_connect(target, result.as_ref().map(|_| ()).map_err(Clone::clone));
    result
}

/// Probes connector `cfg`'s targets until `stop`: each once now, then the
/// failing ones with backoff while any fails.
pub(crate) async fn probe(core: Arc<Core>, cfg: ConnectorConfig, stop: CancellationToken) {
    let targets: Vec<LocalTarget> = cfg
        .targets
        .iter()
        .map(|t| LocalTarget {
            connector: cfg.name.clone(),
            host: t.host.clone(),
            port: t.port,
        })
        .collect();
    let mut status = core.status.subscribe();
    let mut pending = targets.clone();
    let mut delay = PROBE_FIRST;
    loop {
        let probes = pending.iter().map(|t| async {
            // A probe only asks whether the target accepts; close at once.
            drop(connect(&core, t).await);
        });
        tokio::select! {
            () = stop.cancelled() => return,
            _ = futures::future::join_all(probes) => {}
        }
        let failing = |s: &RouterStatus| -> Vec<LocalTarget> {
            let Some(failures) = s.connector_failures.get(&cfg.name) else {
                return Vec::new();
            };
            targets
                .iter()
                .filter(|t| failures.contains_key(&t.addr()))
                .cloned()
                .collect()
        };
        if failing(&status.borrow_and_update()).is_empty() {
            // Healthy: wait for a flow to record a failure.
            delay = PROBE_FIRST;
            tokio::select! {
                () = stop.cancelled() => return,
                r = status.wait_for(|s| !failing(s).is_empty()) => if r.is_err() { return },
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(PROBE_MAX);
        pending = failing(&status.borrow_and_update());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::link_state::Routing;
    use crate::metrics::LinkMetrics;
    use crate::routing::RouterInfo;

    fn core() -> Core {
        let metrics = Arc::new(LinkMetrics::default());
        let routing =
            Routing::new(RouterInfo::new("r", "site", false), 1, metrics.clone()).unwrap();
        Core::new("r".into(), "site".into(), false, metrics, routing)
    }

    fn target(port: u16) -> LocalTarget {
        LocalTarget {
            connector: "db".into(),
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn configure(core: &Core, targets: &[LocalTarget]) {
        let old = core.connectors.send_replace(Arc::new(BTreeMap::from([(
            "db".to_owned(),
            targets.to_vec(),
        )])));
        core.reconcile_target_status(&old);
    }

    fn probing(core: &Core) -> Vec<String> {
        let s = core.status.borrow();
        s.connectors_probing
            .iter()
            .flat_map(|(c, ts)| ts.iter().map(move |t| format!("{c} {t}")))
            .collect()
    }

    fn failures(core: &Core) -> Vec<(String, String)> {
        let s = core.status.borrow();
        s.connector_failures
            .iter()
            .flat_map(|(c, fs)| {
                fs.iter()
                    .map(move |(t, f)| (format!("{c} {t}"), f.error.clone()))
            })
            .collect()
    }

    #[test]
    fn a_failure_keeps_its_start_until_a_success_clears_it() {
        let core = core();
        configure(&core, &[target(1)]);
        core.record_connect(&target(1), Err("refused".into()));
        let since = core.status.borrow().connector_failures["db"]["127.0.0.1:1"].since_unix_secs;
        core.record_connect(&target(1), Err("timed out".into()));
        let s = core.status.borrow().clone();
        let f = &s.connector_failures["db"]["127.0.0.1:1"];
        assert_eq!((f.error.as_str(), f.since_unix_secs), ("timed out", since));
        core.record_connect(&target(1), Ok(()));
        assert!(core.status.borrow().connector_failures.is_empty());
    }

    #[test]
    fn a_target_removed_by_apply_never_keeps_a_failure_whatever_the_order() {
        // The record lands before the swap (and is swept), or after it
        // (and is dropped): either way nothing is left.
        for record_first in [true, false] {
            let core = core();
            configure(&core, &[target(1), target(2)]);
            if record_first {
                core.record_connect(&target(1), Err("refused".into()));
                configure(&core, &[target(2)]);
            } else {
                configure(&core, &[target(2)]);
                core.record_connect(&target(1), Err("refused".into()));
            }
            core.record_connect(&target(2), Err("refused".into()));
            assert_eq!(
                failures(&core),
                [("db 127.0.0.1:2".to_owned(), "refused".to_owned())],
                "record first: {record_first}"
            );
        }
    }

    #[test]
    fn an_added_target_is_probing_until_its_first_outcome() {
        let core = core();
        configure(&core, &[target(1)]);
        assert_eq!(probing(&core), ["db 127.0.0.1:1"]);
        core.record_connect(&target(1), Ok(()));
        assert!(probing(&core).is_empty());
        // Adding a second target lists only it; a failure also ends probing.
        configure(&core, &[target(1), target(2)]);
        assert_eq!(probing(&core), ["db 127.0.0.1:2"]);
        core.record_connect(&target(2), Err("refused".into()));
        assert!(probing(&core).is_empty());
        assert_eq!(failures(&core).len(), 1);
        // A target removed before it was tried leaves nothing behind.
        configure(&core, &[target(1), target(3)]);
        configure(&core, &[target(1)]);
        assert!(probing(&core).is_empty() && failures(&core).is_empty());
    }

    #[test]
    fn an_ipv6_target_is_named_in_brackets() {
        let t = LocalTarget {
            connector: "db".into(),
            host: "::1".into(),
            port: 80,
        };
        assert_eq!(t.addr(), "[::1]:80");
    }
}
