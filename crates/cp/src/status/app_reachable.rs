//! The Dataplane's `AppReachable` condition and `status.unreachableApps`,
//! and the two `Ready` reasons about inbounds: `AppUnreachable` (the
//! sidecar reports an inbound's application refusing connections) and
//! `InboundNotReady` (the spec says `health.ready: false`).
//!
//! # What it owns
//!
//! [`AppFacts`], kept in each [`super::model::Proxy`]: the latest report
//! of the proxy's current `DataplaneHealth` stream (the RPC sends each
//! report here as an [`AppEvent`]) and the inbounds its spec declares not
//! ready. The condition and the list are written with `Ready`, in the
//! same merge and under the same claim (the replica whose connection
//! generation is stored, `writer::merge_one`): meshlink-proxy opens the
//! report stream on the HTTP/2 connection of its ADS stream, so the report
//! reaches the replica that holds the stream.
//!
//! The same reports carry the endpoints the sidecar keeps out of its
//! balancers; [`AppFacts`] keeps them too, and they are written as
//! `status.unhealthyEndpoints` by the same rule
//! ([`super::unhealthy_endpoints`]).
//!
//! Without a report (none yet on this replica, the stream ended, an Envoy
//! client that never reports) the stored condition and lists are left as
//! they are: the last report stands, so a proxy that went away with its
//! application down stays steered around until its sidecar says otherwise.
//! It never decides which endpoints other proxies get: the translator
//! reads `unreachableApps` (`meshlink_xds::translate::effective_health`).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, SystemTime};

use meshlink_api::spec::{DataplaneSpec, DataplaneStatus, UnhealthyEndpoint, UnreachableApp};
use meshlink_api::{Condition, ConditionStatus};
use meshlink_xds::owner::ProxyKey;

use super::model::Proxy;
use super::unhealthy_endpoints::{self, ReportedEndpoint};

/// The condition type.
pub(crate) const APP_REACHABLE: &str = "AppReachable";

/// One inbound's application as a report states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReportedApp {
    /// The inbound's port.
    pub(crate) port: u16,
    /// The application's `ip:port`.
    pub(crate) address: String,
    /// Whether it accepted the sidecar's last connection or probe.
    pub(crate) reachable: bool,
    /// The connect error, when not.
    pub(crate) error: String,
    /// For how long it had been unreachable when the report was sent.
    pub(crate) unreachable_for: Duration,
}

/// What the DataplaneHealth RPC tells the status task.
#[derive(Debug, Clone)]
pub(crate) enum AppEvent {
    /// A report of stream `stream` (numbered in opening order).
    Report {
        /// The Dataplane.
        key: ProxyKey,
        /// The report stream.
        stream: u64,
        /// Every inbound's application.
        apps: Vec<ReportedApp>,
        /// The endpoints the sidecar keeps out of its balancers.
        endpoints: Vec<ReportedEndpoint>,
        /// When it arrived.
        at: SystemTime,
    },
    /// Stream `stream` ended.
    Ended {
        /// The Dataplane.
        key: ProxyKey,
        /// The report stream.
        stream: u64,
    },
}

impl super::StatusHandle {
    /// Queues a DataplaneHealth event (never waits).
    pub(crate) fn app_event(&self, e: AppEvent) {
        let _ = self.tx.send(super::Event::App(e));
    }
}

/// What the status task knows of one proxy's inbounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AppFacts {
    /// The newest report stream seen (older streams' reports are stale).
    stream: u64,
    /// The unreachable applications of that stream's latest report, by
    /// port; `None` before its first report and after it ended.
    report: Option<Vec<UnreachableApp>>,
    /// The unhealthy endpoints of the latest report of any stream: they
    /// stand while `report` is `Some`, and after the stream's end they
    /// still give the next stream's entries their `since`.
    endpoints: Vec<UnhealthyEndpoint>,
    /// Inbounds whose spec says `health.ready: false`: port and name.
    declared: Vec<(u16, Option<String>)>,
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

// === impl AppFacts ===

impl AppFacts {
    /// Takes a report of `stream` received at `at`; returns whether what
    /// is known changed. An application still unreachable, and an
    /// endpoint still unhealthy, keeps the `since` it was first reported
    /// with.
    pub(crate) fn apply_report(
        &mut self,
        stream: u64,
        apps: &[ReportedApp],
        endpoints: &[ReportedEndpoint],
        at: SystemTime,
    ) -> bool {
        if stream < self.stream {
            return false;
        }
        self.stream = stream;
        let first = self.report.is_none();
        let before = self.report.take().unwrap_or_default();
        let mut now: Vec<UnreachableApp> = apps
            .iter()
            .filter(|a| !a.reachable)
            .map(|a| {
                let since = before
                    .iter()
                    .find(|b| b.port == a.port && b.address == a.address)
                    .map(|b| b.since.clone())
                    .unwrap_or_else(|| rfc3339(at.checked_sub(a.unreachable_for).unwrap_or(at)));
                UnreachableApp {
                    port: a.port,
                    address: a.address.clone(),
                    error: a.error.clone(),
                    since,
                }
            })
            .collect();
        now.sort_by_key(|a| a.port);
        let endpoints_before = std::mem::take(&mut self.endpoints);
        let endpoints = unhealthy_endpoints::merge(&endpoints_before, endpoints, at);
        // A first report that finds nothing down still adds the condition.
        let changed = first || now != before || endpoints != endpoints_before;
        self.report = Some(now);
        self.endpoints = endpoints;
        changed
    }

    /// Stream `stream` ended: its report no longer stands (the stored
    /// status keeps it). Returns whether anything changed.
    pub(crate) fn stream_ended(&mut self, stream: u64) -> bool {
        stream == self.stream && self.report.take().is_some()
    }

    /// Takes the inbounds `spec` declares not ready; returns whether they
    /// changed.
    pub(crate) fn set_declared(&mut self, spec: &DataplaneSpec) -> bool {
        let declared: Vec<(u16, Option<String>)> = spec
            .networking
            .inbound
            .iter()
            .filter(|i| !i.is_ready())
            .map(|i| (i.port.get(), i.name.clone()))
            .collect();
        let changed = declared != self.declared;
        self.declared = declared;
        changed
    }

    /// The unreachable applications of the latest report (empty without
    /// one: the merge then keeps the stored list, see [`merged`]).
    pub(crate) fn unreachable(&self) -> Vec<UnreachableApp> {
        self.report.clone().unwrap_or_default()
    }

    /// The unhealthy endpoints of the latest report (empty without one:
    /// the merge then keeps the stored list, see [`merged`]).
    pub(crate) fn unhealthy_endpoints(&self) -> Vec<UnhealthyEndpoint> {
        match self.report {
            Some(_) => self.endpoints.clone(),
            None => Vec::new(),
        }
    }

    /// The `AppReachable` condition of the latest report; `None` without
    /// one (the stored condition stands).
    pub(crate) fn condition(&self) -> Option<Condition> {
        let report = self.report.as_ref()?;
        if report.is_empty() {
            return Some(Condition::now(
                APP_REACHABLE,
                ConditionStatus::True,
                "Reachable",
                "every inbound's application accepted the sidecar's last connection or probe",
            ));
        }
        Some(Condition::now(
            APP_REACHABLE,
            ConditionStatus::False,
            "AppUnreachable",
            unreachable_message(report),
        ))
    }

    /// Why `Ready` is False because of an inbound, if it is: an
    /// application reported unreachable, else an inbound declared not
    /// ready.
    pub(crate) fn not_ready(&self) -> Option<(&'static str, String)> {
        if let Some(report) = self.report.as_ref().filter(|r| !r.is_empty()) {
            return Some(("AppUnreachable", unreachable_message(report)));
        }
        let (port, name) = self.declared.first()?;
        let name = name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
        let more = match self.declared.len() {
            1 => String::new(),
            n => format!(" and {} more inbound(s)", n - 1),
        };
        Some((
            "InboundNotReady",
            format!(
                "inbound {port}{name}{more} says health.ready: false: other proxies get no \
                 traffic routed to it until it is ready again"
            ),
        ))
    }
}

/// The message naming every unreachable application: inbound port,
/// address, since when, and the OS error.
fn unreachable_message(report: &[UnreachableApp]) -> String {
    let each: Vec<String> = report
        .iter()
        .map(|a| {
            format!(
                "the application of inbound {} ({}) is unreachable since {}: {}",
                a.port, a.address, a.since, a.error
            )
        })
        .collect();
    format!(
        "{}; other proxies get no traffic routed to it until it accepts connections again \
         (the sidecar keeps probing it)",
        each.join("; ")
    )
}

/// Applies an event to the proxies, marking the proxy it changed dirty.
pub(crate) fn on_event(proxies: &mut std::collections::HashMap<ProxyKey, Proxy>, e: AppEvent) {
    let (key, changed) = match e {
        AppEvent::Report {
            key,
            stream,
            apps,
            endpoints,
            at,
        } => {
            let p = proxies.entry(key.clone()).or_default();
            (key, p.app.apply_report(stream, &apps, &endpoints, at))
        }
        AppEvent::Ended { key, stream } => {
            let changed = proxies
                .get_mut(&key)
                .is_some_and(|p| p.app.stream_ended(stream));
            (key, changed)
        }
    };
    if changed && let Some(p) = proxies.get_mut(&key) {
        p.dirty = true;
    }
}

/// A Dataplane's spec changed: takes the inbounds it declares not ready.
pub(crate) fn spec_changed(
    proxies: &mut std::collections::HashMap<ProxyKey, Proxy>,
    key: &ProxyKey,
    spec: &DataplaneSpec,
) {
    let p = proxies.entry(key.clone()).or_default();
    if p.app.set_declared(spec) {
        p.dirty = true;
    }
}

/// Folds the condition this task wants written into a status digest
/// (`writer::digest`), so a changed condition is never skipped as
/// "already written".
pub(crate) fn digest(status_digest: u64, app: Option<&Condition>) -> u64 {
    let mut h = DefaultHasher::new();
    status_digest.hash(&mut h);
    if let Some(c) = app {
        (c.status == ConditionStatus::True).hash(&mut h);
        c.reason.hash(&mut h);
        c.message.hash(&mut h);
    }
    h.finish()
}

/// The app part of a merge (`writer::merge_dataplanes`): with the claim
/// (`claimed`) and a report, `merged` keeps the reported list and the
/// condition is returned to be set; otherwise the stored lists
/// (`unreachableApps`, `unhealthyEndpoints`) stand and no condition is
/// set.
pub(crate) fn merged(
    app: Option<&Condition>,
    stored: &DataplaneStatus,
    merged: &mut DataplaneStatus,
    claimed: bool,
) -> Option<Condition> {
    match (claimed, app) {
        (true, Some(c)) => Some(c.clone()),
        _ => {
            merged.unreachable_apps = stored.unreachable_apps.clone();
            merged.unhealthy_endpoints = stored.unhealthy_endpoints.clone();
            None
        }
    }
}

#[cfg(test)]
#[path = "app_reachable_tests.rs"]
mod tests;
