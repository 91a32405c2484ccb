//! The one task that writes what a site's router reports: Link status
//! (`remoteSiteId`, `remoteSiteName`, Operational, Ready, Configured), Site
//! status (`siteId`, `network`, `sitesInNetwork`, Running, Ready), Listener
//! `hasMatchingConnector`/`matchingConnectorCount`, MultiKeyListener status
//! ([`super::multi_key_status`]) and Connector
//! `hasMatchingListener`/`matchingListenerCount`/`selectedPods` and `Ready`
//! ([`super::connector_status`]).
//!
//! Inputs: reports from the RouterStatus RPC (the newest stream wins; a
//! stream's end is compare-and-delete on its id, so an old stream's end
//! never clears a newer one's report), and the router reconciler's
//! configuration (what is withheld, what selectors picked; it changes with
//! every relevant store change). Writes are coalesced ([`COALESCE`]) and
//! merged (read, change only these fields and conditions, CAS), so a
//! router's end or a removal shows in status well within 2 s, and nothing
//! is written when nothing changed.
//!
//! It must never write a spec, nor a condition it does not own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use meshlink_api::spec::{ConnectorStatus, ListenerStatus, NetworkSite, Spec, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};
use meshlink_runtime::Shutdown;
use meshlink_xds::certify::RouterReport;
use meshlink_xds::router::RouterConfig;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::holder::{Claims, Holder};
use super::network_status::{local_services, network};
use crate::resources::ResourceService;
use crate::status::writer::merge;

/// How long changes gather before one flush writes them.
pub(crate) const COALESCE: Duration = Duration::from_millis(200);

/// How long a failed flush waits before it is retried.
const RETRY: Duration = Duration::from_secs(1);

/// With several replicas (not SQLite), how often status is recomputed even
/// without a change: the holder of the router's stream rewrites what a
/// racing replica may have written, and the others notice a holder that
/// went away.
const RESYNC: Duration = Duration::from_secs(2);

/// What the RouterStatus RPC tells the task.
#[derive(Debug)]
pub(crate) enum Event {
    /// Stream `stream` (of the router of `site`) sent `report`.
    Report {
        stream: u64,
        site: String,
        /// Boxed: a report is far larger than the other variant.
        report: Box<RouterReport>,
    },
    /// Stream `stream` ended.
    Ended { stream: u64 },
}

/// Sends events to the task. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct RouterStatusHandle {
    tx: mpsc::UnboundedSender<Event>,
}

impl RouterStatusHandle {
    pub(crate) fn send(&self, ev: Event) {
        let _ = self.tx.send(ev);
    }
}

/// The handle and the task's inbox.
pub(crate) fn channel() -> (RouterStatusHandle, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (RouterStatusHandle { tx }, rx)
}

/// The latest report of the current stream.
struct Current {
    stream: u64,
    site: String,
    report: RouterReport,
}

/// Runs until shutdown. `holder` records which replica holds the router's
/// stream ([`super::holder`]).
pub(crate) async fn run(
    resources: ResourceService,
    advertised_host: String,
    mut config: watch::Receiver<Arc<RouterConfig>>,
    mut rx: mpsc::UnboundedReceiver<Event>,
    holder: Holder,
    shutdown: Shutdown,
) {
    let mut current: Option<Current> = None;
    let mut claims = Claims::default();
    let mut warned = super::credentials::Warned::default();
    // Flush once at start: statuses left by a previous run are stale.
    let mut due: Option<Instant> = Some(Instant::now());
    let resync = if holder.store.backend() == "sqlite" {
        Duration::from_secs(24 * 3600)
    } else {
        RESYNC
    };
    let mut tick = tokio::time::interval(resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            ev = rx.recv() => match ev {
                None => return,
                Some(Event::Report { stream, site, report }) => {
                    current = Some(Current { stream, site, report: *report });
                    soon(&mut due);
                }
                Some(Event::Ended { stream }) => {
                    if current.as_ref().is_some_and(|c| c.stream == stream) {
                        current = None;
                        soon(&mut due);
                    }
                }
            },
            changed = config.changed() => {
                if changed.is_err() {
                    return;
                }
                soon(&mut due);
            }
            _ = tick.tick() => {
                due.get_or_insert(Instant::now());
            }
            () = sleep_until(due) => {
                let cfg = config.borrow().clone();
                let flushed = async {
                    if !claims.settle(&holder, cfg.site.as_deref(), current.as_ref().map(|c| (c.site.as_str(), c.stream))).await? {
                        return Ok(None);
                    }
                    flush(&resources, &cfg, current.as_ref(), &advertised_host, &mut warned).await
                };
                match flushed.await {
                    // Wake again when a link credential's verdict changes.
                    Ok(next) => due = next.map(|t| {
                        let left = t.duration_since(SystemTime::now()).unwrap_or_default();
                        Instant::now() + left + COALESCE
                    }),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot write router status; retrying");
                        due = Some(Instant::now() + RETRY);
                    }
                }
            }
        }
    }
}

/// A flush within [`COALESCE`], unless one is due sooner (a wake-up set
/// for a credential's expiry must not delay it).
fn soon(due: &mut Option<Instant>) {
    let at = Instant::now() + COALESCE;
    *due = Some(due.map_or(at, |d| d.min(at)));
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Computes and writes every status this task owns; returns when a Link's
/// `CredentialsValid` changes next by the clock alone.
async fn flush(
    resources: &ResourceService,
    config: &RouterConfig,
    current: Option<&Current>,
    advertised_host: &str,
    warned: &mut super::credentials::Warned,
) -> Result<Option<SystemTime>, crate::status::StatusError> {
    let sites = resources.list(Kind::Site, None, None).await?;
    let links = resources.list(Kind::Link, None, None).await?;
    let creds = super::credentials::verdicts(resources, &links, warned, SystemTime::now()).await?;
    let listeners = resources.list(Kind::Listener, None, None).await?;
    let multi_key = resources.list(Kind::MultiKeyListener, None, None).await?;
    let connectors = resources.list(Kind::Connector, None, None).await?;
    let site = sites
        .iter()
        .find(|s| config.site.as_deref() == Some(s.name()))
        .or(sites.first());
    // A report counts only if it is from this site's router.
    let report = current
        .filter(|c| site.is_some_and(|s| s.name() == c.site))
        .map(|c| &c.report);
    let local = local_services(&[&listeners, &multi_key], &connectors);
    let running = running_condition(site.and_then(|s| s.condition("Running")), report.is_some());
    // Why this site's router is not reporting, if it is not: the cause
    // every Link, incoming link and Listener names while it lasts.
    let router_down = (running.status != ConditionStatus::True).then_some(running.message.as_str());
    if let Some(site) = site {
        let network = network(site, report, &links, &local);
        let ingress =
            report.and_then(|r| dialable_ingress(&r.mesh_ingress_address, advertised_host));
        let bound = super::bind_status::site_bound(report);
        let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        merge(resources, Kind::Site, None, site.name(), |r| {
            let before = r
                .status
                .details
                .as_site()
                .map(|d| d.incoming_links.clone())
                .unwrap_or_default();
            let incoming =
                super::incoming_links::incoming_links(&before, report, router_down, &now);
            site_status(r, &network, &running, ingress.clone());
            if let StatusDetails::Site(d) = &mut r.status.details {
                d.incoming_links = incoming;
            }
            if let Some(c) = &bound {
                r.set_condition(c.clone());
            }
        })
        .await?;
    }
    for ra in &resources.list(Kind::RouterAccess, None, None).await? {
        if let Some(c) = super::bind_status::router_access_bound(ra, report) {
            merge(resources, Kind::RouterAccess, None, ra.name(), |r| {
                r.set_condition(c.clone())
            })
            .await?;
        }
    }
    let states: BTreeMap<&str, _> = report
        .map(|r| r.links.iter().map(|l| (l.name.as_str(), l)).collect())
        .unwrap_or_default();
    for link in &links {
        let state = states.get(link.name()).copied();
        let withheld = config
            .withheld
            .iter()
            .find(|w| w.kind == "Link" && w.name == link.name())
            .map(|w| w.reason.clone());
        merge(resources, Kind::Link, None, link.name(), |r| {
            let verdict = creds.by_link.get(r.name());
            super::link_status::link_status(r, state, withheld.as_deref(), router_down, verdict);
        })
        .await?;
    }
    // Routing keys across the network: (connectors, listeners) elsewhere.
    let own = site.map(|s| s.name().to_owned()).unwrap_or_default();
    let mut remote: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for s in report.map(|r| r.network.as_slice()).unwrap_or_default() {
        if s.name == own {
            continue;
        }
        for svc in &s.services {
            let e = remote.entry(svc.routing_key.clone()).or_default();
            e.0 += svc.connectors.len() as u32;
            e.1 += svc.listeners.len() as u32;
        }
    }
    let count = |key: &str, connectors: bool| -> u32 {
        let (c, l) = remote.get(key).copied().unwrap_or_default();
        let here = local
            .get(key)
            .map_or(0, |(cs, ls)| if connectors { cs.len() } else { ls.len() })
            as u32;
        here + if connectors { c } else { l }
    };
    for l in &listeners {
        let Spec::Listener(spec) = &l.spec else {
            continue;
        };
        let n = count(&spec.routing_key, true);
        merge(resources, Kind::Listener, None, l.name(), |r| {
            r.status.details = StatusDetails::Listener(ListenerStatus {
                has_matching_connector: Some(n > 0),
                matching_connector_count: Some(n),
            });
            r.set_condition(matched_condition(n, "Connector"));
            let ready = super::bind_status::listener_ready(r, report, router_down);
            r.set_condition(ready);
        })
        .await?;
    }
    super::multi_key_status::write(resources, &multi_key, &|key| count(key, true), report).await?;
    for c in &connectors {
        let Spec::Connector(spec) = &c.spec else {
            continue;
        };
        let n = count(&spec.routing_key, false);
        let selected = config.selected.get(c.name()).cloned().unwrap_or_default();
        merge(resources, Kind::Connector, None, c.name(), |r| {
            r.status.details = StatusDetails::Connector(ConnectorStatus {
                has_matching_listener: Some(n > 0),
                matching_listener_count: Some(n),
                selected_pods: selected.clone(),
            });
            r.set_condition(matched_condition(n, "Listener"));
            let targets = if spec.host.is_some() {
                1
            } else {
                selected.len()
            };
            let ready = super::connector_status::connector_ready(r, targets, report, router_down);
            r.set_condition(ready);
        })
        .await?;
    }
    Ok(creds.next)
}

/// The mesh ingress address sidecars dial: the reported bound address,
/// with an unspecified IP (`0.0.0.0`, `::`) replaced by the control
/// plane's advertised host. `None` when none was reported.
pub(crate) fn dialable_ingress(reported: &str, advertised_host: &str) -> Option<String> {
    let addr: std::net::SocketAddr = reported.parse().ok()?;
    if !addr.ip().is_unspecified() {
        return Some(addr.to_string());
    }
    Some(if advertised_host.contains(':') {
        format!("[{advertised_host}]:{}", addr.port())
    } else {
        format!("{advertised_host}:{}", addr.port())
    })
}

/// Writes what this task owns of a Site: `network`, `sitesInNetwork`,
/// `meshIngress` and `Running`. `siteId` and `Ready` belong to the site
/// controller (`crate::site::site_status`), which derives Ready again when
/// this write reaches it through the change feed.
pub(crate) fn site_status(
    r: &mut Resource,
    network: &[NetworkSite],
    running: &Condition,
    mesh_ingress: Option<String>,
) {
    let mut details = r.status.details.as_site().cloned().unwrap_or_default();
    details.mesh_ingress = mesh_ingress;
    let mut network = network.to_vec();
    for s in &mut network {
        if s.name == r.name() && s.id.is_none() {
            s.id = details.site_id.clone();
        }
    }
    details.sites_in_network = Some(network.len() as u64);
    details.network = network;
    r.status.details = StatusDetails::Site(details);
    r.set_condition(running.clone());
}

/// The Site's `Running` condition. While the router is not reporting, the
/// message says since when (the moment this control plane noticed, kept
/// across flushes) and how to start one.
pub(crate) fn running_condition(before: Option<&Condition>, running: bool) -> Condition {
    if running {
        return Condition::now(
            "Running",
            ConditionStatus::True,
            "RouterReporting",
            "the site's router is connected and reporting",
        );
    }
    let mut c = Condition::now("Running", ConditionStatus::False, "RouterNotConnected", "");
    if let Some(b) = before.filter(|b| b.status == ConditionStatus::False) {
        c.last_transition_time = b.last_transition_time.clone();
    }
    c.message = format!(
        "this site's router is not reporting to this control plane (since {}); start it with \
         `meshlink-proxy run --mode router` and a token from `meshlink token router`",
        c.last_transition_time
    );
    c
}

fn matched_condition(n: u32, other: &str) -> Condition {
    if n > 0 {
        Condition::now(
            "Matched",
            ConditionStatus::True,
            "Matched",
            format!("{n} {other}(s) in the network use this routing key"),
        )
    } else {
        Condition::now(
            "Matched",
            ConditionStatus::False,
            "NoMatch",
            format!("no {other} in the network uses this routing key yet"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::dialable_ingress;

    #[test]
    fn an_unspecified_ingress_bind_becomes_the_advertised_host() {
        assert_eq!(
            dialable_ingress("0.0.0.0:15671", "10.0.0.7").as_deref(),
            Some("10.0.0.7:15671")
        );
        assert_eq!(
            dialable_ingress("[::]:15671", "fd00::1").as_deref(),
            Some("[fd00::1]:15671")
        );
        assert_eq!(
            dialable_ingress("127.0.0.2:4000", "10.0.0.7").as_deref(),
            Some("127.0.0.2:4000")
        );
        assert_eq!(dialable_ingress("", "10.0.0.7"), None);
    }
}
