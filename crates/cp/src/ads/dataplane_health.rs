//! The `meshlink.v1.DataplaneHealth/Report` RPC on the xDS port: a sidecar
//! streams what it sees of its inbounds' applications. Authenticated as
//! ADS is ([`ProxyAuth`]: a dataplane's proxy token, or the client
//! certificate of `meshlink token dataplane --cert-dir`), and every report
//! must name the credential's dataplane in `node_id`, as ADS checks the
//! first request's `node.id`.
//!
//! Each report's applications and unhealthy endpoints go to the status
//! task ([`crate::status::app_reachable`]) when they changed, and its traffic
//! figures to the traffic board ([`TrafficBoard`], memory only); when the
//! stream ends, however it ends, both are told, so only the newest
//! stream's reports count. It never writes status itself, and never
//! accepts a router's credential or a report for another dataplane.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use meshlink_runtime::Shutdown;
use meshlink_xds::ads::Authenticate;
use meshlink_xds::certify::dataplane_health_server::DataplaneHealth;
use meshlink_xds::certify::{DataplaneHealthReport, DataplaneHealthSummary};
use meshlink_xds::owner::ProxyKey;
use tonic::{Request, Response, Status, Streaming};

use super::ProxyAuth;
use crate::report_stream::{OnEnd, next_report};
use crate::status::StatusHandle;
use crate::status::app_reachable::{AppEvent, ReportedApp};
use crate::status::unhealthy_endpoints::ReportedEndpoint;
use crate::traffic::{InboundTraffic, TrafficBoard};

/// Serves DataplaneHealth.
pub(crate) struct DataplaneHealthService {
    auth: ProxyAuth,
    status: StatusHandle,
    traffic: TrafficBoard,
    shutdown: Shutdown,
    next_stream: AtomicU64,
}

// === impl DataplaneHealthService ===

impl DataplaneHealthService {
    /// The service, telling `status` and `traffic` what sidecars report.
    pub(crate) fn new(
        auth: ProxyAuth,
        status: StatusHandle,
        traffic: TrafficBoard,
        shutdown: Shutdown,
    ) -> Self {
        DataplaneHealthService {
            auth,
            status,
            traffic,
            shutdown,
            next_stream: AtomicU64::new(0),
        }
    }
}

/// The report's applications, or why the report is refused.
fn apps(report: &DataplaneHealthReport, key: &ProxyKey) -> Result<Vec<ReportedApp>, Status> {
    let expected = key.node_id();
    if report.node_id != expected {
        return Err(Status::permission_denied(format!(
            "report.node_id {:?} does not match the credential's dataplane {expected} \
             (meshlink-proxy: check --name/--mesh)",
            report.node_id
        )));
    }
    report
        .inbounds
        .iter()
        .map(|i| {
            let port = u16::try_from(i.port)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "inbound port {} is not a port (1-65535)",
                        i.port
                    ))
                })?;
            Ok(ReportedApp {
                port,
                address: i.address.clone(),
                reachable: i.reachable,
                error: i.error.clone(),
                unreachable_for: Duration::from_millis(i.unreachable_for_ms),
            })
        })
        .collect()
}

/// The report's unhealthy endpoints, or why the report is refused.
fn endpoints(report: &DataplaneHealthReport) -> Result<Vec<ReportedEndpoint>, Status> {
    report
        .unhealthy_endpoints
        .iter()
        .map(|e| {
            if e.cluster.is_empty() || e.address.is_empty() {
                return Err(Status::invalid_argument(format!(
                    "unhealthy endpoint {:?} of cluster {:?}: both the cluster and the \
                     address must be set",
                    e.address, e.cluster
                )));
            }
            if !matches!(e.reason.as_str(), "HealthCheck" | "Outlier") {
                return Err(Status::invalid_argument(format!(
                    "unhealthy endpoint {} of cluster {}: unknown reason {:?}; expected \
                     HealthCheck or Outlier",
                    e.address, e.cluster, e.reason
                )));
            }
            Ok(ReportedEndpoint {
                cluster: e.cluster.clone(),
                address: e.address.clone(),
                reason: e.reason.clone(),
                unhealthy_for: Duration::from_millis(e.for_ms),
            })
        })
        .collect()
}

/// The report's traffic figures, by inbound (ports checked by [`apps`]).
fn traffic(report: &DataplaneHealthReport) -> Vec<InboundTraffic> {
    report
        .inbounds
        .iter()
        .map(|i| InboundTraffic {
            port: u16::try_from(i.port).unwrap_or_default(),
            connections_opened: i.connections_opened,
            connections_active: i.connections_active,
            bytes_received: i.bytes_received,
            bytes_sent: i.bytes_sent,
        })
        .collect()
}

/// What a report's applications and endpoints are compared by.
type ReportKey<'a> = (
    Vec<(u16, &'a str, bool, &'a str)>,
    Vec<(&'a str, &'a str, &'a str)>,
);

/// What tells one report's applications and unhealthy endpoints from the
/// last: their states, never the durations (the status task keeps when
/// an outage began).
fn app_key<'a>(apps: &'a [ReportedApp], endpoints: &'a [ReportedEndpoint]) -> ReportKey<'a> {
    (
        apps.iter()
            .map(|a| (a.port, a.address.as_str(), a.reachable, a.error.as_str()))
            .collect(),
        endpoints
            .iter()
            .map(|e| (e.cluster.as_str(), e.address.as_str(), e.reason.as_str()))
            .collect(),
    )
}

#[tonic::async_trait]
impl DataplaneHealth for DataplaneHealthService {
    async fn report(
        &self,
        request: Request<Streaming<DataplaneHealthReport>>,
    ) -> Result<Response<DataplaneHealthSummary>, Status> {
        let certs = request.peer_certs();
        let credential = self
            .auth
            .credential(request.metadata(), certs.as_deref().map(Vec::as_slice))
            .await?;
        let key = credential.key;
        if key.is_router() {
            return Err(Status::permission_denied(format!(
                "DataplaneHealth is for dataplanes, but this is the router token of site {}; \
                 a router reports with RouterStatus",
                key.name
            )));
        }
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
        let (status, board, ended_key) = (self.status.clone(), self.traffic.clone(), key.clone());
        let _ended = OnEnd::new(move || {
            board.dataplane_ended(&ended_key, stream);
            status.app_event(AppEvent::Ended {
                key: ended_key,
                stream,
            });
        });
        let mut inbound = request.into_inner();
        let mut reports = 0u64;
        let mut last: Option<(Vec<ReportedApp>, Vec<ReportedEndpoint>)> = None;
        while let Some(report) =
            next_report(&self.shutdown, &mut inbound, "dataplane health", &key).await?
        {
            let apps = apps(&report, &key)?;
            let endpoints = endpoints(&report)?;
            reports += 1;
            self.traffic
                .dataplane_reported(&key, stream, traffic(&report));
            // A report whose figures alone moved changes no status.
            if last.as_ref().map(|(a, e)| app_key(a, e)) == Some(app_key(&apps, &endpoints)) {
                continue;
            }
            last = Some((apps.clone(), endpoints.clone()));
            self.status.app_event(AppEvent::Report {
                key: key.clone(),
                stream,
                apps,
                endpoints,
                at: SystemTime::now(),
            });
        }
        Ok(Response::new(DataplaneHealthSummary { reports }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlink_xds::certify::{InboundApp, UnhealthyEndpoint};

    #[test]
    fn a_report_must_name_the_credentials_dataplane_and_real_ports() {
        let key = ProxyKey::new("default", "backend-1");
        let inbound = |port| InboundApp {
            port,
            address: "127.0.0.1:9080".into(),
            reachable: false,
            error: "Connection refused (os error 111)".into(),
            unreachable_for_ms: 1500,
            ..Default::default()
        };
        let report = |node: &str, port| DataplaneHealthReport {
            node_id: node.into(),
            inbounds: vec![inbound(port)],
            unhealthy_endpoints: Vec::new(),
        };
        let ok = apps(&report("default.backend-1", 8080), &key).expect("accepted");
        assert_eq!(ok[0].port, 8080);
        assert_eq!(ok[0].unreachable_for, Duration::from_millis(1500));
        let e = apps(&report("default.web-1", 8080), &key).unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.message().contains("default.backend-1"), "{}", e.message());
        for port in [0, 70_000] {
            let e = apps(&report("default.backend-1", port), &key).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
        }
    }

    #[test]
    fn unhealthy_endpoints_need_a_cluster_an_address_and_a_known_reason() {
        let entry = |cluster: &str, reason: &str| UnhealthyEndpoint {
            cluster: cluster.into(),
            address: "10.0.0.2:15000".into(),
            reason: reason.into(),
            for_ms: 2500,
        };
        let report = |entries| DataplaneHealthReport {
            node_id: "default.web-1".into(),
            inbounds: Vec::new(),
            unhealthy_endpoints: entries,
        };
        let ok = endpoints(&report(vec![
            entry("backend", "HealthCheck"),
            entry("backend", "Outlier"),
        ]))
        .expect("accepted");
        assert_eq!(ok[0].unhealthy_for, Duration::from_millis(2500));
        assert_eq!(ok[1].reason, "Outlier");
        for bad in [entry("", "HealthCheck"), entry("backend", "Sick")] {
            let e = endpoints(&report(vec![bad])).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
        }
    }
}
