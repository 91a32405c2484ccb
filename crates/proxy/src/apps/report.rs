//! Reports the inbound applications' states to the control plane
//! (`meshlink.v1.DataplaneHealth/Report`, authenticated with the token of
//! the ADS stream).
//!
//! Owns the report stream: one at a time, opened on the HTTP/2 connection
//! of the current healthy ADS stream ([`CpConnection`]), so it reaches
//! the control-plane replica that holds that stream and owns the
//! Dataplane's status. When the xDS client moves to another connection the
//! stream follows it at once. A report is the complete current view, sent
//! once the states are settled (every inbound probed) and then whenever a
//! state changes; the control plane keeps the time an outage started, so
//! only states, addresses and errors count as changes. Each report also
//! carries every inbound's traffic (connections and bytes, from the
//! listener's counters), sampled every [`TRAFFIC_EVERY`]: moved figures
//! send a report, so traffic alone sends at most one per interval. And
//! each report names the endpoints this sidecar keeps out of its
//! balancers ([`super::unhealthy`], sampled every second): a changed set
//! (cluster, address, reason; never the durations) sends a report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use meshlink_proto::certify::dataplane_health_client::DataplaneHealthClient;
use meshlink_proto::certify::{
    DataplaneHealthReport, InboundApp as PbInboundApp, UnhealthyEndpoint as PbUnhealthyEndpoint,
};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::unhealthy::UnhealthyEndpoints;
use super::{AppHealth, AppState, AppStates};
use crate::backoff::Backoff;
use crate::log_limit::LogLimiter;
use crate::metrics::{ListenerLabels, NameLabels, ProxyMetrics};
use crate::xds::CpConnection;

/// How a report stream ended.
enum Ended {
    /// The xDS client moved to another connection (or lost it): follow.
    Moved,
    /// The control plane ended or refused the stream: back off.
    Failed(String),
}

/// How often the inbounds' traffic figures are sampled.
pub const TRAFFIC_EVERY: Duration = Duration::from_secs(10);

/// One inbound's traffic since the sidecar started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboundTraffic {
    /// Connections accepted.
    pub opened: u64,
    /// Connections open now.
    pub active: u64,
    /// Bytes received from downstream (TLS included).
    pub received: u64,
    /// Bytes sent downstream (TLS included).
    pub sent: u64,
}

/// The traffic of inbound listener `listener`, from its counters.
fn inbound_traffic(metrics: &ProxyMetrics, listener: &str) -> InboundTraffic {
    let name = NameLabels {
        listener: listener.to_owned(),
    };
    let opened = metrics
        .connections
        .get_or_create(&ListenerLabels {
            listener: listener.to_owned(),
            direction: crate::model::Direction::Inbound.as_str().to_owned(),
        })
        .get();
    let active = metrics
        .listener_connections_active
        .get_or_create(&name)
        .get();
    InboundTraffic {
        opened,
        active: u64::try_from(active).unwrap_or(0),
        received: metrics.listener_rx_bytes.get_or_create(&name).get(),
        sent: metrics.listener_tx_bytes.get_or_create(&name).get(),
    }
}

/// What a report is made of: the inbounds' applications, the endpoints
/// kept out of the balancers, and the traffic counters.
#[derive(Debug, Clone)]
pub struct ReportSources {
    /// The inbounds' local applications.
    pub apps: AppHealth,
    /// The endpoints this sidecar keeps out of its balancers
    /// ([`super::unhealthy::run`]).
    pub unhealthy: watch::Receiver<Arc<UnhealthyEndpoints>>,
    /// The listeners' counters.
    pub metrics: Arc<ProxyMetrics>,
}

/// Runs report streams for `node_id` until `cancel` fires.
pub async fn run(
    node_id: String,
    mut connection: watch::Receiver<Option<CpConnection>>,
    sources: ReportSources,
    cancel: CancellationToken,
) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(15));
    let mut log = LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
    loop {
        let conn = tokio::select! {
            () = cancel.cancelled() => return,
            c = connection.wait_for(Option::is_some) => match c {
                Ok(c) => c.clone().expect("waited for Some"),
                Err(_) => return,
            },
        };
        let ended = tokio::select! {
            () = cancel.cancelled() => return,
            e = session(&node_id, &conn, &sources, connection.clone()) => e,
        };
        let why = match ended {
            Ended::Moved => {
                backoff.reset();
                continue;
            }
            Ended::Failed(why) => why,
        };
        if let Some(failures) = log.hit(Instant::now()) {
            tracing::warn!(cp = %conn.cp, error = %why, failures,
                "cannot report the local applications' state to the control plane; retrying \
                 (logged at most every 30 s while it lasts)");
        }
        let delay = backoff.next_delay();
        let moved = connection.wait_for(|c| c.as_ref().map(|c| c.session) != Some(conn.session));
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = moved => backoff.reset(),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One report stream on `conn`, until it ends or the connection changes.
async fn session(
    node_id: &str,
    conn: &CpConnection,
    sources: &ReportSources,
    mut connection: watch::Receiver<Option<CpConnection>>,
) -> Ended {
    let mut states = sources.apps.states();
    let mut unhealthy = sources.unhealthy.clone();
    let metrics = &sources.metrics;
    let (tx, rx) = mpsc::channel(4);
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    request
        .metadata_mut()
        .insert("authorization", conn.bearer.clone());
    let mut client = DataplaneHealthClient::new(conn.channel.clone());
    let call = client.report(request);
    let sender = async {
        let mut last = None;
        let mut traffic = BTreeMap::new();
        let mut sampled = false;
        let mut sampler_runs = true;
        let mut tick = tokio::time::interval_at(Instant::now() + TRAFFIC_EVERY, TRAFFIC_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let current = states.borrow_and_update().clone();
            let endpoints = unhealthy.borrow_and_update().clone();
            if current.settled {
                if !sampled {
                    traffic = sample(metrics, &current);
                    sampled = true;
                }
                let report = build(node_id, &current, &traffic, &endpoints, Instant::now());
                let key = change_key(&report);
                if last.as_ref() != Some(&key) {
                    if tx.send(report).await.is_err() {
                        return;
                    }
                    last = Some(key);
                }
            }
            tokio::select! {
                changed = states.changed() => if changed.is_err() {
                    return;
                },
                // The sampler ends with the data path (drain): keep
                // reporting the applications without it.
                changed = unhealthy.changed(), if sampler_runs => if changed.is_err() {
                    sampler_runs = false;
                },
                _ = tick.tick() => sampled = false,
            }
        }
    };
    let session = conn.session;
    let moved = connection.wait_for(|c| c.as_ref().map(|c| c.session) != Some(session));
    tokio::select! {
        r = call => Ended::Failed(match r {
            Ok(_) => "the control plane ended the report stream".to_owned(),
            Err(s) => format!("the control plane ended the report stream: {:?}: {}", s.code(), s.message()),
        }),
        () = sender => Ended::Failed("the report stream closed".to_owned()),
        _ = moved => Ended::Moved,
    }
}

/// Every inbound's traffic now, by inbound listener name.
fn sample(metrics: &ProxyMetrics, states: &AppStates) -> BTreeMap<String, InboundTraffic> {
    states
        .inbounds
        .keys()
        .map(|name| (name.clone(), inbound_traffic(metrics, name)))
        .collect()
}

/// The report of `states`, `traffic` (by inbound listener name) and
/// `unhealthy` at `now`.
pub fn build(
    node_id: &str,
    states: &AppStates,
    traffic: &BTreeMap<String, InboundTraffic>,
    unhealthy: &UnhealthyEndpoints,
    now: Instant,
) -> DataplaneHealthReport {
    let inbounds = states
        .inbounds
        .iter()
        .map(|(name, app)| {
            let (reachable, error, down_for) = match &app.state {
                AppState::Unreachable { error, since } => {
                    (false, error.clone(), now.saturating_duration_since(*since))
                }
                AppState::Reachable | AppState::Unknown => (true, String::new(), Duration::ZERO),
            };
            let t = traffic.get(name).copied().unwrap_or_default();
            PbInboundApp {
                port: u32::from(app.port),
                address: app.address.to_string(),
                reachable,
                error,
                unreachable_for_ms: millis(down_for),
                connections_opened: t.opened,
                connections_active: t.active,
                bytes_received: t.received,
                bytes_sent: t.sent,
            }
        })
        .collect();
    let unhealthy_endpoints = unhealthy
        .iter()
        .map(|((cluster, addr, reason), since)| PbUnhealthyEndpoint {
            cluster: cluster.clone(),
            address: addr.to_string(),
            reason: reason.as_str().to_owned(),
            for_ms: millis(now.saturating_duration_since(since)),
        })
        .collect();
    DataplaneHealthReport {
        node_id: node_id.to_owned(),
        inbounds,
        unhealthy_endpoints,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What an inbound's report entry is compared by.
type InboundKey = (u32, String, bool, String, [u64; 4]);

/// What an unhealthy endpoint's report entry is compared by: cluster,
/// address, reason.
type EndpointKey = (String, String, String);

/// What tells one report from the next: everything but the durations.
fn change_key(report: &DataplaneHealthReport) -> (Vec<InboundKey>, Vec<EndpointKey>) {
    let endpoints = report
        .unhealthy_endpoints
        .iter()
        .map(|e| (e.cluster.clone(), e.address.clone(), e.reason.clone()))
        .collect();
    let inbounds = report
        .inbounds
        .iter()
        .map(|i| {
            (
                i.port,
                i.address.clone(),
                i.reachable,
                i.error.clone(),
                [
                    i.connections_opened,
                    i.connections_active,
                    i.bytes_received,
                    i.bytes_sent,
                ],
            )
        })
        .collect();
    (inbounds, endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::InboundApp;

    #[tokio::test(start_paused = true)]
    async fn a_report_carries_each_inbound_and_changes_only_with_a_state() {
        let since = Instant::now();
        let states = |state: AppState| AppStates {
            settled: true,
            inbounds: [(
                "inbound:10.0.0.1:15000".to_owned(),
                InboundApp {
                    port: 15000,
                    address: "127.0.0.1:9080".parse().unwrap(),
                    state,
                },
            )]
            .into(),
        };
        let down = states(AppState::Unreachable {
            error: "Connection refused (os error 111)".into(),
            since,
        });
        let none = BTreeMap::new();
        let ok = UnhealthyEndpoints::default();
        let first = build("default.backend-1", &down, &none, &ok, since);
        tokio::time::advance(Duration::from_secs(3)).await;
        let later = build("default.backend-1", &down, &none, &ok, Instant::now());
        assert_eq!(later.node_id, "default.backend-1");
        let i = &later.inbounds[0];
        assert_eq!(
            (i.port, i.address.as_str(), i.reachable),
            (15000, "127.0.0.1:9080", false)
        );
        assert_eq!(i.unreachable_for_ms, 3000);
        assert_eq!(
            change_key(&first),
            change_key(&later),
            "time alone is no change"
        );
        let up = build(
            "default.backend-1",
            &states(AppState::Reachable),
            &none,
            &ok,
            Instant::now(),
        );
        assert!(up.inbounds[0].reachable && up.inbounds[0].error.is_empty());
        assert_ne!(change_key(&first), change_key(&up));
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_names_the_unhealthy_endpoints_and_changes_only_with_the_set() {
        use crate::apps::unhealthy::Reason;
        let states = AppStates {
            settled: true,
            inbounds: BTreeMap::new(),
        };
        let none = BTreeMap::new();
        let since = Instant::now();
        let b1: std::net::SocketAddr = "10.0.0.1:15000".parse().unwrap();
        let failing =
            UnhealthyEndpoints::of([(("backend".to_owned(), b1, Reason::HealthCheck), since)]);
        let first = build("default.web-1", &states, &none, &failing, since);
        tokio::time::advance(Duration::from_secs(2)).await;
        let later = build("default.web-1", &states, &none, &failing, Instant::now());
        let e = &later.unhealthy_endpoints[0];
        assert_eq!(
            (
                e.cluster.as_str(),
                e.address.as_str(),
                e.reason.as_str(),
                e.for_ms
            ),
            ("backend", "10.0.0.1:15000", "HealthCheck", 2000)
        );
        assert_eq!(
            change_key(&first),
            change_key(&later),
            "time alone is no change"
        );
        let both = UnhealthyEndpoints::of([
            (("backend".to_owned(), b1, Reason::HealthCheck), since),
            (("backend".to_owned(), b1, Reason::Outlier), Instant::now()),
        ]);
        let ejected = build("default.web-1", &states, &none, &both, Instant::now());
        let reasons: Vec<&str> = ejected
            .unhealthy_endpoints
            .iter()
            .map(|e| e.reason.as_str())
            .collect();
        assert_eq!(reasons, ["HealthCheck", "Outlier"]);
        assert_eq!(ejected.unhealthy_endpoints[1].for_ms, 0);
        assert_ne!(change_key(&later), change_key(&ejected));
        let healthy = build(
            "default.web-1",
            &states,
            &none,
            &UnhealthyEndpoints::default(),
            Instant::now(),
        );
        assert!(healthy.unhealthy_endpoints.is_empty());
        assert_ne!(change_key(&later), change_key(&healthy));
    }

    #[test]
    fn a_report_carries_each_inbounds_traffic_from_its_listener_counters() {
        let metrics = ProxyMetrics::default();
        let name = "inbound:10.0.0.1:15000";
        let states = AppStates {
            settled: true,
            inbounds: [(
                name.to_owned(),
                InboundApp {
                    port: 15000,
                    address: "127.0.0.1:9080".parse().unwrap(),
                    state: AppState::Reachable,
                },
            )]
            .into(),
        };
        let before = build(
            "default.backend-1",
            &states,
            &sample(&metrics, &states),
            &UnhealthyEndpoints::default(),
            Instant::now(),
        );
        let listener = NameLabels {
            listener: name.to_owned(),
        };
        metrics
            .connections
            .get_or_create(&ListenerLabels {
                listener: name.to_owned(),
                direction: "inbound".to_owned(),
            })
            .inc_by(3);
        metrics
            .listener_connections_active
            .get_or_create(&listener)
            .set(1);
        metrics
            .listener_rx_bytes
            .get_or_create(&listener)
            .inc_by(700);
        metrics
            .listener_tx_bytes
            .get_or_create(&listener)
            .inc_by(9000);
        let after = build(
            "default.backend-1",
            &states,
            &sample(&metrics, &states),
            &UnhealthyEndpoints::default(),
            Instant::now(),
        );
        let i = &after.inbounds[0];
        assert_eq!(
            (
                i.connections_opened,
                i.connections_active,
                i.bytes_received,
                i.bytes_sent
            ),
            (3, 1, 700, 9000)
        );
        assert_ne!(
            change_key(&before),
            change_key(&after),
            "moved traffic is a change"
        );
    }
}
