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
//! only states, addresses and errors count as changes.

use std::sync::Arc;
use std::time::Duration;

use meshlink_proto::certify::dataplane_health_client::DataplaneHealthClient;
use meshlink_proto::certify::{DataplaneHealthReport, InboundApp as PbInboundApp};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::{AppHealth, AppState, AppStates};
use crate::backoff::Backoff;
use crate::log_limit::LogLimiter;
use crate::xds::CpConnection;

/// How a report stream ended.
enum Ended {
    /// The xDS client moved to another connection (or lost it): follow.
    Moved,
    /// The control plane ended or refused the stream: back off.
    Failed(String),
}

/// Runs report streams for `node_id` until `cancel` fires.
pub async fn run(
    node_id: String,
    mut connection: watch::Receiver<Option<CpConnection>>,
    apps: AppHealth,
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
            e = session(&node_id, &conn, apps.states(), connection.clone()) => e,
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
    mut states: watch::Receiver<Arc<AppStates>>,
    mut connection: watch::Receiver<Option<CpConnection>>,
) -> Ended {
    let (tx, rx) = mpsc::channel(4);
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    request
        .metadata_mut()
        .insert("authorization", conn.bearer.clone());
    let mut client = DataplaneHealthClient::new(conn.channel.clone());
    let call = client.report(request);
    let sender = async {
        let mut last = None;
        loop {
            let current = states.borrow_and_update().clone();
            if current.settled {
                let report = build(node_id, &current, Instant::now());
                let key = change_key(&report);
                if last.as_ref() != Some(&key) {
                    if tx.send(report).await.is_err() {
                        return;
                    }
                    last = Some(key);
                }
            }
            if states.changed().await.is_err() {
                return;
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

/// The report of `states` at `now`.
pub fn build(node_id: &str, states: &AppStates, now: Instant) -> DataplaneHealthReport {
    let inbounds = states
        .inbounds
        .values()
        .map(|app| {
            let (reachable, error, down_for) = match &app.state {
                AppState::Unreachable { error, since } => {
                    (false, error.clone(), now.saturating_duration_since(*since))
                }
                AppState::Reachable | AppState::Unknown => (true, String::new(), Duration::ZERO),
            };
            PbInboundApp {
                port: u32::from(app.port),
                address: app.address.to_string(),
                reachable,
                error,
                unreachable_for_ms: u64::try_from(down_for.as_millis()).unwrap_or(u64::MAX),
            }
        })
        .collect();
    DataplaneHealthReport {
        node_id: node_id.to_owned(),
        inbounds,
    }
}

/// What tells one report from the next: everything but the durations.
fn change_key(report: &DataplaneHealthReport) -> Vec<(u32, String, bool, String)> {
    report
        .inbounds
        .iter()
        .map(|i| (i.port, i.address.clone(), i.reachable, i.error.clone()))
        .collect()
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
        let first = build("default.backend-1", &down, since);
        tokio::time::advance(Duration::from_secs(3)).await;
        let later = build("default.backend-1", &down, Instant::now());
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
            Instant::now(),
        );
        assert!(up.inbounds[0].reachable && up.inbounds[0].error.is_empty());
        assert_ne!(change_key(&first), change_key(&up));
    }
}
