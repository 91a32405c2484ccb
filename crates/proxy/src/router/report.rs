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

use meshlink_link::{Direction, LinkState, Router};
use meshlink_xds::certify::router_status_client::RouterStatusClient;
use meshlink_xds::certify::{
    LinkRecord, LinkState as PbLinkState, RouterReport, ServiceRecord, SiteRecord,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::driver::RouterState;
use super::resources::SiteIdentity;
use crate::backoff::Backoff;
use crate::cp::CpTarget;
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
        let (healthy, why) = match outcome {
            Ok(n) => (
                n > 0,
                "the control plane ended the status stream".to_owned(),
            ),
            Err((n, why)) => (n > 0, why),
        };
        if healthy {
            backoff.reset();
            log.reset();
        }
        if let Some(failures) = log.hit(tokio::time::Instant::now()) {
            tracing::warn!(error = %why, failures, "router status stream lost; reconnecting (logged at most every 30 s while it lasts)");
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

/// One report stream; returns how many reports it sent.
async fn session(
    target: &CpTarget,
    mut state: watch::Receiver<RouterState>,
) -> Result<u64, (u64, String)> {
    // Nothing to report before the router runs.
    let _ = state
        .wait_for(|s| s.router.is_some())
        .await
        .map_err(|_| (0, "router stopped".to_owned()))?;
    let token = target.credentials().map_err(|e| (0, e.to_string()))?;
    let channel = target.connect().await.map_err(|e| (0, e.to_string()))?;
    let (tx, rx) = mpsc::channel(4);
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    request.metadata_mut().insert("authorization", token.bearer);
    let mut client = RouterStatusClient::new(channel);
    let call = client.report(request);
    let sender = async {
        let mut sent = 0u64;
        let mut last: Option<RouterReport> = None;
        let mut status = None;
        loop {
            let current = state.borrow_and_update().clone();
            if let (Some(router), Some(site)) = (&current.router, &current.site) {
                let s = status.get_or_insert_with(|| router.status());
                let _ = s.borrow_and_update();
                let report = build(site, router);
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
    tokio::select! {
        r = call => match r {
            Ok(_) => Ok(1),
            Err(s) => Err((0, format!("{:?}: {}", s.code(), s.message()))),
        },
        sent = sender => Err((sent, "report stream closed".into())),
    }
}

/// The router's complete current view.
pub fn build(site: &SiteIdentity, router: &Router) -> RouterReport {
    let status = router.status().borrow().clone();
    let links = status
        .links
        .iter()
        .filter(|(_, l)| l.direction == Direction::Dialled)
        .map(|(name, l)| {
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
        })
        .collect();
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
    RouterReport {
        site: site.name.clone(),
        links,
        network,
    }
}
