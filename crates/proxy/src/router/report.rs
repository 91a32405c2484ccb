//! Reports the router's links and its view of the network to its own
//! control plane (`meshlink.v1.RouterStatus/Report` on the xDS port,
//! authenticated with the router token).
//!
//! Owns the report stream: one at a time, reconnecting with the same
//! backoff as the xDS client. A report is the complete current view; it is
//! sent when it differs from the last one sent, checked on every router
//! status change and at least every [`CHECK_INTERVAL`] (the network view
//! changes with remote LSAs, which have no watch of their own), so status
//! is never more than that behind.

use std::time::Duration;

use meshlink_link::{BindStatus, Direction, LinkState, Router};
use meshlink_proto::certify::router_status_client::RouterStatusClient;
use meshlink_proto::certify::{
    BindFailure, ConnectorFailure, KeyTraffic, LinkRecord, LinkState as PbLinkState, LinkTraffic,
    RouterReport, ServiceRecord, SiteRecord,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::driver::RouterState;
use super::resources::SiteIdentity;
use crate::backoff::Backoff;
use crate::cp::{CpTarget, FailureKind, Pace};
use crate::log_limit::LogLimiter;

/// Longest time a changed network view waits before it is reported.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// Runs report streams until `cancel` fires.
pub async fn run(target: CpTarget, state: watch::Receiver<RouterState>, cancel: CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(15));
    let mut log = LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
    loop {
        let outcome = tokio::select! {
            () = cancel.cancelled() => return,
            r = session(&target, state.clone()) => r,
        };
        let Ended { sent, why, pace } = outcome;
        let healthy = sent > 0;
        if healthy {
            backoff.reset();
            log.reset();
        }
        if let Some(failures) = log.hit(tokio::time::Instant::now()) {
            tracing::warn!(error = %why, failures, "router status stream lost; reconnecting (logged at most every 30 s while it lasts)");
        }
        if pace == Pace::Immediate {
            // The control plane is going away; the next one now.
            continue;
        }
        let delay = backoff
            .next_delay()
            .min(crate::cp::UNREACHABLE_RETRY_CAP * 5);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// How a report stream ended.
struct Ended {
    /// Reports it sent.
    sent: u64,
    /// Why it ended (naming the control plane).
    why: String,
    /// Whether the next stream (to the next control plane) starts at once.
    pace: Pace,
}

impl Ended {
    fn before_connecting(why: String, pace: Pace) -> Self {
        Ended { sent: 0, why, pace }
    }
}

/// How often the traffic figures in the report are refreshed: counters
/// move with every byte, and the report is sent when it changes.
pub const TRAFFIC_EVERY: Duration = Duration::from_secs(10);

/// The traffic figures last sampled (by routing key, by link), refreshed
/// at most every [`TRAFFIC_EVERY`].
#[derive(Default)]
struct TrafficSample {
    at: Option<tokio::time::Instant>,
    keys: Vec<KeyTraffic>,
    links: Vec<LinkTraffic>,
}

impl TrafficSample {
    /// Sets `report`'s traffic figures from the last sample.
    fn fill(&mut self, router: &meshlink_link::Router, report: &mut RouterReport) {
        if self.at.is_none_or(|t| t.elapsed() >= TRAFFIC_EVERY) {
            self.at = Some(tokio::time::Instant::now());
            self.keys = router
                .traffic()
                .into_iter()
                .map(|t| KeyTraffic {
                    routing_key: t.routing_key,
                    flows_opened: t.flows_opened,
                    flows_active: t.flows_active,
                    bytes_to_connector: t.bytes_to_connector,
                    bytes_to_listener: t.bytes_to_listener,
                })
                .collect();
            self.links = router
                .link_traffic()
                .into_iter()
                .map(|t| LinkTraffic {
                    name: t.name,
                    remote_site_id: t.peer,
                    bytes_sent: t.bytes_sent,
                    bytes_received: t.bytes_received,
                })
                .collect();
        }
        report.traffic = self.keys.clone();
        report.link_traffic = self.links.clone();
    }
}

/// One report stream, until it ends.
async fn session(target: &CpTarget, mut state: watch::Receiver<RouterState>) -> Ended {
    // Nothing to report before the router runs.
    if state.wait_for(|s| s.router.is_some()).await.is_err() {
        return Ended::before_connecting("router stopped".into(), Pace::Backoff);
    }
    let token = match target.credentials() {
        Ok(token) => token,
        Err(e) => return Ended::before_connecting(e.to_string(), Pace::Backoff),
    };
    let attempt = target.endpoints.attempt().await;
    let channel = match target.connect(&attempt).await {
        Ok(channel) => channel,
        Err(e) => {
            let pace = crate::cp::report_connect_failure(&attempt, &e);
            return Ended::before_connecting(e.to_string(), pace);
        }
    };
    let (tx, rx) = mpsc::channel(4);
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    request.metadata_mut().insert("authorization", token.bearer);
    let mut client = RouterStatusClient::new(channel);
    let call = client.report(request);
    let sender = async {
        let mut sent = 0u64;
        let mut last: Option<RouterReport> = None;
        let mut status = None;
        let mut traffic = TrafficSample::default();
        loop {
            let current = state.borrow_and_update().clone();
            if let (Some(router), Some(site)) = (&current.router, &current.site) {
                let s = status.get_or_insert_with(|| router.status());
                let _ = s.borrow_and_update();
                let mut report = build(site, router);
                traffic.fill(router, &mut report);
                if last.as_ref() != Some(&report) {
                    if tx.send(report.clone()).await.is_err() {
                        return sent;
                    }
                    sent += 1;
                    last = Some(report);
                }
            }
            let router_changed = async {
                match status.as_mut() {
                    Some(s) => {
                        let _ = s.changed().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() { return sent; }
                    status = None;
                }
                () = router_changed => {}
                () = tokio::time::sleep(CHECK_INTERVAL) => {}
            }
        }
    };
    let answered = |r: Result<_, tonic::Status>| match r {
        Ok(_) => (FailureKind::Other, "ended the status stream".to_owned()),
        Err(s) => (
            FailureKind::of_status(&s),
            format!("ended the status stream: {:?}: {}", s.code(), s.message()),
        ),
    };
    tokio::pin!(call);
    let (sent, (kind, what)) = tokio::select! {
        r = &mut call => (u64::from(r.is_ok()), answered(r)),
        sent = sender => {
            // The request side closes when the control plane ended the
            // call; its status (e.g. "shutting down") says where to go next.
            let last = tokio::time::timeout(crate::cp::FINAL_STATUS_WAIT, &mut call).await;
            let closed = (FailureKind::Other, "closed the status stream".to_owned());
            (sent, last.map_or(closed, answered))
        }
    };
    let why = format!("the control plane at {attempt} {what}");
    let pace = attempt.failed(kind, &why);
    Ended { sent, why, pace }
}

/// The router's complete current view.
pub fn build(site: &SiteIdentity, router: &Router) -> RouterReport {
    let status = router.status().borrow().clone();
    let link_state = |(name, l): (&String, &meshlink_link::LinkStatus)| {
        let up = l.state == LinkState::Up;
        PbLinkState {
            name: name.clone(),
            operational: up,
            remote_site_id: l.peer.clone().unwrap_or_default(),
            remote_site_name: l.peer_site.clone().unwrap_or_default(),
            cost: u64::from(l.cost),
            message: if up {
                String::new()
            } else {
                l.last_error
                    .clone()
                    .unwrap_or_else(|| format!("{:?}", l.state).to_lowercase())
            },
        }
    };
    let (dialled, accepted): (Vec<_>, Vec<_>) = status
        .links
        .iter()
        .partition(|(_, l)| l.direction == Direction::Dialled);
    let links = dialled.into_iter().map(link_state).collect();
    let accepted_links = accepted.into_iter().map(link_state).collect();
    let network = router
        .network_view()
        .sites
        .into_iter()
        .map(|s| SiteRecord {
            id: s.id.0,
            name: s.name,
            namespace: String::new(),
            platform: "meshlink".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            links: s
                .links
                .into_iter()
                .map(|l| LinkRecord {
                    name: l.name,
                    remote_site_id: l.remote_site_id.0,
                    remote_site_name: l.remote_site_name,
                    operational: l.operational,
                })
                .collect(),
            services: s
                .services
                .into_iter()
                .map(|v| ServiceRecord {
                    routing_key: v.routing_key,
                    connectors: v.connectors,
                    listeners: v.listeners,
                })
                .collect(),
        })
        .collect();
    let mesh_ingress_address = match status
        .listeners
        .get(meshlink_link::mesh_ingress::MESH_INGRESS_NAME)
    {
        Some(BindStatus::Bound(addr)) => addr.to_string(),
        _ => String::new(),
    };
    let bind_failures = [("role", &status.roles), ("listener", &status.listeners)]
        .into_iter()
        .flat_map(|(what, items)| {
            items.iter().filter_map(move |(name, bind)| match bind {
                BindStatus::Warming(why) => Some(BindFailure {
                    what: what.to_owned(),
                    name: name.clone(),
                    message: why.clone(),
                }),
                BindStatus::Bound(_) => None,
            })
        })
        .collect();
    let connector_failures = status
        .connector_failures
        .iter()
        .flat_map(|(name, targets)| {
            targets.iter().map(move |(target, f)| ConnectorFailure {
                name: name.clone(),
                target: target.clone(),
                message: f.error.clone(),
                since_unix_seconds: i64::try_from(f.since_unix_secs).unwrap_or(i64::MAX),
            })
        })
        .collect();
    let connectors_probing = status.connectors_probing.keys().cloned().collect();
    RouterReport {
        site: site.name.clone(),
        links,
        network,
        mesh_ingress_address,
        bind_failures,
        accepted_links,
        connector_failures,
        connectors_probing,
        // Sampled by the sender (`TrafficSample`), not on every build.
        traffic: Vec::new(),
        link_traffic: Vec::new(),
    }
}
