//! MeshMetric's OpenTelemetry backend: every `refreshInterval`, what a
//! scrape would serve ([`MetricsSource::text`]) is converted
//! ([`crate::otlp_metrics`]) and pushed to the collector, over OTLP/HTTP
//! protobuf when the endpoint is a URL (`http://host:port`, `/v1/metrics`
//! added when it has no path) or over OTLP/gRPC (`host:port`, Kuma's
//! form). A push that fails is logged at `warn` and the next one is made
//! at the next tick; nothing is queued.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use crate::metrics_endpoint::MetricsSource;
use crate::model::metrics::OtlpBackend;

/// OTLP/HTTP's path for metrics, added to an endpoint without a path.
const OTLP_METRICS_PATH: &str = "/v1/metrics";

/// The shortest interval between pushes, whatever the policy says.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Pushes to `backend` as `service` until `stop` fires.
pub async fn run(
    source: MetricsSource,
    backend: OtlpBackend,
    service: String,
    stop: CancellationToken,
) {
    let every = Duration::from_millis(backend.refresh_interval_ms).max(MIN_INTERVAL);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut grpc = None;
    let mut kept = None;
    tracing::info!(endpoint = %backend.endpoint, every = %humantime::format_duration(every), "pushing MeshMetric metrics over OTLP");
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let (_, text) = source.text().await;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let request = crate::otlp_metrics::request(&text, &service, now);
        let pushed = if backend.endpoint.contains("://") {
            let uri = with_path(&backend.endpoint);
            let body = Bytes::from(request.encode_to_vec());
            let conn = match &mut kept {
                Some(conn) => Ok(conn),
                None => crate::http::kept_conn::KeptConnection::new(&uri).map(|c| kept.insert(c)),
            };
            match conn {
                Ok(conn) => {
                    conn.exchange(http::Method::POST, Some("application/x-protobuf"), body)
                        .await
                }
                Err(e) => Err(e),
            }
            .and_then(|(status, _)| {
                if status.is_success() {
                    Ok(())
                } else {
                    Err(format!("the collector answered {status}"))
                }
            })
        } else {
            let client = match &mut grpc {
                Some(client) => client,
                None => {
                    let channel = tonic::transport::Endpoint::from_shared(format!(
                        "http://{}",
                        backend.endpoint
                    ))
                    .map(|e| e.connect_lazy());
                    match channel {
                        Ok(channel) => grpc.insert(MetricsServiceClient::new(channel)),
                        Err(e) => {
                            tracing::warn!(endpoint = %backend.endpoint, error = %e, "bad OTLP endpoint");
                            return;
                        }
                    }
                }
            };
            client
                .export(request)
                .await
                .map(drop)
                .map_err(|s| s.to_string())
        };
        if let Err(e) = pushed {
            tracing::warn!(endpoint = %backend.endpoint, error = %e, "MeshMetric OTLP push failed");
        }
    }
}

/// `endpoint` with [`OTLP_METRICS_PATH`] when it names no path.
fn with_path(endpoint: &str) -> String {
    let after_scheme = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    if after_scheme.contains('/') && !after_scheme.ends_with('/') {
        endpoint.to_owned()
    } else {
        format!("{}{OTLP_METRICS_PATH}", endpoint.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_gets_otlps_metrics_path() {
        assert_eq!(with_path("http://c:4318"), "http://c:4318/v1/metrics");
        assert_eq!(with_path("http://c:4318/"), "http://c:4318/v1/metrics");
        assert_eq!(with_path("http://c:4318/custom"), "http://c:4318/custom");
    }
}
