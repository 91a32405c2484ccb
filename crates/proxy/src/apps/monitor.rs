//! The task that owns each inbound application's state ([`super::AppStates`]).
//!
//! Per inbound it keeps one schedule: probe when the inbound appears (or
//! its application's address changes); while the application answers,
//! again every `interval` (zero: only when the data path reports a failed
//! connect); while it does not, with backoff from [`RETRY_FIRST`] up to
//! `interval` (at most [`RETRY_MAX`]), until it answers. A probe is a TCP
//! connect with [`PROBE_TIMEOUT`], closed at once. Probes run on the
//! task's own `JoinSet`, so a slow one never holds up the others and all
//! of them end with the task. It never touches a connection of the data
//! path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{AppHealth, AppMetrics, AppState, AppStates, InboundApp, InboundLabels, targets};
use crate::backoff::Backoff;
use crate::model::ProxyConfig;
use crate::xds::apply::LISTENER;

/// How long a probe's connect may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The first retry after a failed probe.
pub const RETRY_FIRST: Duration = Duration::from_millis(200);
/// The longest wait between probes of an unreachable application.
pub const RETRY_MAX: Duration = Duration::from_secs(5);
/// Data-path reports queued before more are dropped (one is enough to
/// start a probe).
const REFUSED_QUEUE: usize = 64;

/// The monitor task's inputs; build it with [`AppMonitor::new`].
#[derive(Debug)]
pub struct AppMonitor {
    config: watch::Receiver<Arc<ProxyConfig>>,
    interval: Duration,
    refused: mpsc::Receiver<String>,
    states: watch::Sender<Arc<AppStates>>,
    metrics: AppMetrics,
}

/// One inbound's schedule.
#[derive(Debug)]
struct Probe {
    app: InboundApp,
    /// When to probe next (`None`: only on a data-path report).
    next_at: Option<Instant>,
    in_flight: bool,
    backoff: Backoff,
}

/// A probe's outcome: the inbound, the address probed, the error if any.
type Outcome = (String, SocketAddr, Result<(), String>);

// === impl AppMonitor ===

impl AppMonitor {
    /// The monitor of the inbounds of `config`, probing every `interval`
    /// (zero: only after a data-path report), and the handle the data
    /// path, the admin endpoint and the reporter use.
    pub fn new(
        config: watch::Receiver<Arc<ProxyConfig>>,
        interval: Duration,
        metrics: AppMetrics,
    ) -> (AppHealth, AppMonitor) {
        let (tx, refused) = mpsc::channel(REFUSED_QUEUE);
        let (states, rx) = watch::channel(Arc::default());
        let handle = AppHealth {
            refused: Some(tx),
            states: rx,
        };
        let monitor = AppMonitor {
            config,
            interval,
            refused,
            states,
            metrics,
        };
        (handle, monitor)
    }

    /// Runs until `cancel` fires.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut probes: HashMap<String, Probe> = HashMap::new();
        let mut running: JoinSet<Outcome> = JoinSet::new();
        let mut config = self.config.borrow_and_update().clone();
        loop {
            self.sync(&config, &mut probes);
            let now = Instant::now();
            for (name, p) in &mut probes {
                if !p.in_flight && p.next_at.is_some_and(|t| t <= now) {
                    p.in_flight = true;
                    let (name, addr) = (name.clone(), p.app.address);
                    running.spawn(async move { (name, addr, probe(addr).await) });
                }
            }
            self.publish(&config, &probes);
            let next = probes
                .values()
                .filter(|p| !p.in_flight)
                .filter_map(|p| p.next_at)
                .min();
            let due = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = self.config.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    config = self.config.borrow_and_update().clone();
                }
                Some(listener) = self.refused.recv() => {
                    if let Some(p) = probes.get_mut(&listener) {
                        p.next_at = Some(Instant::now());
                    }
                }
                Some(Ok((name, addr, outcome))) = running.join_next() => {
                    self.probed(&mut probes, &name, addr, outcome);
                }
                () = due => {}
            }
        }
    }

    /// Adds the inbounds `config` gained (probed at once), forgets those
    /// it lost, and starts over for one whose application moved.
    fn sync(&self, config: &ProxyConfig, probes: &mut HashMap<String, Probe>) {
        let want = targets(config);
        probes.retain(|name, p| {
            let keep = want.get(name) == Some(&(p.app.port, p.app.address));
            if !keep {
                self.metrics.reachable.remove(&InboundLabels {
                    inbound: name.clone(),
                });
            }
            keep
        });
        let max = if self.interval.is_zero() {
            RETRY_MAX
        } else {
            self.interval.min(RETRY_MAX)
        };
        for (name, (port, address)) in want {
            probes.entry(name).or_insert_with(|| Probe {
                app: InboundApp {
                    port,
                    address,
                    state: AppState::Unknown,
                },
                next_at: Some(Instant::now()),
                in_flight: false,
                backoff: Backoff::new(RETRY_FIRST, max.max(RETRY_FIRST)),
            });
        }
    }

    /// Records a probe's outcome and schedules the next probe.
    fn probed(
        &self,
        probes: &mut HashMap<String, Probe>,
        name: &str,
        addr: SocketAddr,
        outcome: Result<(), String>,
    ) {
        let Some(p) = probes.get_mut(name) else {
            return;
        };
        if p.app.address != addr {
            // The inbound moved meanwhile; its new address has its own probe.
            return;
        }
        p.in_flight = false;
        let now = Instant::now();
        let labels = InboundLabels {
            inbound: name.to_owned(),
        };
        match outcome {
            Ok(()) => {
                if let AppState::Unreachable { since, .. } = &p.app.state {
                    tracing::info!(listener = %name, app = %addr,
                        down_for = %humantime::format_duration(Duration::from_secs(now.saturating_duration_since(*since).as_secs())),
                        "the local application accepts connections again");
                }
                p.app.state = AppState::Reachable;
                p.backoff.reset();
                p.next_at = (!self.interval.is_zero()).then(|| now + self.interval);
                self.metrics.reachable.get_or_create(&labels).set(1);
            }
            Err(error) => {
                let since = match &p.app.state {
                    AppState::Unreachable { since, .. } => *since,
                    _ => {
                        tracing::warn!(listener = %name, app = %addr, %error,
                            "the local application does not accept connections (app down?); reporting it to the control plane, which steers other proxies' traffic away from this inbound");
                        now
                    }
                };
                p.app.state = AppState::Unreachable { error, since };
                p.next_at = Some(now + p.backoff.next_delay());
                self.metrics.reachable.get_or_create(&labels).set(0);
            }
        }
    }

    fn publish(&self, config: &ProxyConfig, probes: &HashMap<String, Probe>) {
        let states = AppStates {
            settled: config.received.contains(LISTENER)
                && probes.values().all(|p| p.app.state != AppState::Unknown),
            inbounds: probes
                .iter()
                .map(|(n, p)| (n.clone(), p.app.clone()))
                .collect(),
        };
        self.states.send_if_modified(|s| {
            let changed = **s != states;
            if changed {
                *s = Arc::new(states);
            }
            changed
        });
    }
}

/// One probe: a TCP connect to `addr`, closed at once.
pub async fn probe(addr: SocketAddr) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "no answer to a TCP connect within {}",
            humantime::format_duration(PROBE_TIMEOUT)
        )),
    }
}

#[cfg(test)]
mod tests;
