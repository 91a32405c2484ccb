//! Span export: one queue and one task per collector, shared by every
//! listener that sends there. A finished span is queued with `try_send`
//! (the data path never waits): when the queue ([`QUEUE`] spans) is full
//! the span is dropped and counted (`meshlink_proxy_trace_spans_dropped`).
//!
//! The task batches: it takes up to [`MAX_BATCH`] spans, waiting at most
//! [`BATCH_DELAY`] after the first, and sends them in one request: OTLP
//! protobuf (`opentelemetry-proto`'s schema) `POST`ed over HTTP/1.1 or
//! sent with the generated `TraceService` gRPC client, or a Zipkin v2 JSON
//! array. Spans of a batch the collector does not take are counted as
//! dropped. The task starts with the first span (inside the data path's
//! runtime) and ends when the last listener using the collector is gone
//! (its queue closes).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span::SpanKind, status::StatusCode,
};
use prometheus_client::metrics::counter::Counter;
use prost::Message as _;
use tokio::sync::mpsc;

use super::trace::FinishedSpan;
use crate::metrics::ProxyMetrics;
use crate::model::Direction;
use crate::model::trace::Collector;

/// Spans queued per collector before new ones are dropped.
pub const QUEUE: usize = 4096;
/// The most spans sent in one request.
pub const MAX_BATCH: usize = 512;
/// How long a batch waits for more spans after its first.
pub const BATCH_DELAY: Duration = Duration::from_millis(200);
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A collector's queue.
#[derive(Debug)]
pub struct Exporter {
    collector: Collector,
    tx: OnceLock<mpsc::Sender<FinishedSpan>>,
}

impl Exporter {
    /// The queue of `collector`, shared by every listener sending there.
    pub fn for_collector(collector: &Collector) -> Arc<Exporter> {
        static EXPORTERS: OnceLock<Mutex<HashMap<Collector, Weak<Exporter>>>> = OnceLock::new();
        let mut all = EXPORTERS
            .get_or_init(Default::default)
            .lock()
            .expect("trace exporters lock");
        if let Some(e) = all.get(collector).and_then(Weak::upgrade) {
            return e;
        }
        all.retain(|_, e| e.strong_count() > 0);
        let exporter = Arc::new(Exporter {
            collector: collector.clone(),
            tx: OnceLock::new(),
        });
        all.insert(collector.clone(), Arc::downgrade(&exporter));
        exporter
    }

    /// Queues `span`, or counts it as dropped when the queue is full.
    /// Must be called inside the proxy's runtime (the first call starts
    /// the export task).
    pub fn send(&self, span: FinishedSpan, metrics: &ProxyMetrics) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            let counters = (
                metrics.trace_spans_exported.clone(),
                metrics.trace_spans_dropped.clone(),
            );
            // Ends when every sender (this exporter) is gone.
            tokio::spawn(run(self.collector.clone(), rx, counters));
            tx
        });
        if tx.try_send(span).is_err() {
            metrics.trace_spans_dropped.inc();
        }
    }
}

async fn run(
    collector: Collector,
    mut rx: mpsc::Receiver<FinishedSpan>,
    (exported, dropped): (Counter, Counter),
) {
    let mut grpc = None;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(span)) => batch.push(span),
                _ => break,
            }
        }
        let n = batch.len() as u64;
        let sent = tokio::time::timeout(EXPORT_TIMEOUT, export(&collector, batch, &mut grpc)).await;
        match sent {
            Ok(Ok(())) => {
                exported.inc_by(n);
            }
            Ok(Err(e)) => {
                dropped.inc_by(n);
                tracing::warn!(?collector, spans = n, "exporting spans failed: {e}");
            }
            Err(_) => {
                dropped.inc_by(n);
                tracing::warn!(?collector, spans = n, "exporting spans timed out");
            }
        }
    }
}

type GrpcClient = TraceServiceClient<tonic::transport::Channel>;

async fn export(
    collector: &Collector,
    batch: Vec<FinishedSpan>,
    grpc: &mut Option<GrpcClient>,
) -> Result<(), String> {
    match collector {
        Collector::OtlpHttp { uri } => {
            let body = otlp(batch).encode_to_vec();
            post(uri, "application/x-protobuf", body).await
        }
        Collector::OtlpGrpc { target } => {
            if grpc.is_none() {
                let channel = tonic::transport::Endpoint::from_shared(format!("http://{target}"))
                    .map_err(|e| e.to_string())?
                    .connect_lazy();
                *grpc = Some(TraceServiceClient::new(channel));
            }
            let client = grpc.as_mut().expect("set above");
            client
                .export(otlp(batch))
                .await
                .map(drop)
                .map_err(|s| s.to_string())
        }
        Collector::Zipkin {
            host,
            path,
            trace_id_128bit,
            ..
        } => {
            let body = zipkin(&batch, *trace_id_128bit);
            post(&format!("http://{host}{path}"), "application/json", body).await
        }
    }
}

/// `POST`s `body` to `uri` over a fresh HTTP/1.1 connection; a 2xx answer
/// is success.
async fn post(uri: &str, content_type: &str, body: Vec<u8>) -> Result<(), String> {
    let (status, _) = super::one_shot::exchange(
        http::Method::POST,
        uri,
        Some(content_type),
        Bytes::from(body),
    )
    .await?;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    owned_kv(key.to_owned(), value.to_owned())
}

fn owned_kv(key: String, value: String) -> KeyValue {
    KeyValue {
        key,
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..Default::default()
    }
}

/// A batch as one OTLP request: one `ResourceSpans` per service.
pub fn otlp(batch: Vec<FinishedSpan>) -> ExportTraceServiceRequest {
    let mut by_service: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for s in batch {
        let span = Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: s.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            flags: 0x01,
            name: s.name,
            kind: match s.direction {
                Direction::Inbound => SpanKind::Server,
                Direction::Outbound => SpanKind::Client,
            } as i32,
            start_time_unix_nano: nanos(s.start),
            end_time_unix_nano: nanos(s.end),
            attributes: s
                .attributes
                .into_iter()
                .map(|(k, v)| owned_kv(k, v))
                .collect(),
            status: Some(Status {
                code: if s.status >= 500 {
                    StatusCode::Error
                } else {
                    StatusCode::Unset
                } as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        by_service.entry(s.service_name).or_default().push(span);
    }
    ExportTraceServiceRequest {
        resource_spans: by_service
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string_kv("service.name", &service)],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "meshlink-proxy".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..Default::default()
                    }),
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

/// A batch as a Zipkin v2 JSON array.
pub fn zipkin(batch: &[FinishedSpan], trace_id_128bit: bool) -> Vec<u8> {
    let micros = |t: SystemTime| nanos(t) / 1_000;
    let spans: Vec<serde_json::Value> = batch
        .iter()
        .map(|s| {
            let trace = hex::encode(s.trace_id);
            let trace = if trace_id_128bit || s.trace_id[..8] != [0; 8] {
                trace
            } else {
                trace[16..].to_owned()
            };
            let tags: serde_json::Map<String, serde_json::Value> = s
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
                .collect();
            let mut span = serde_json::json!({
                "traceId": trace,
                "id": hex::encode(s.span_id),
                "name": s.name,
                "kind": (if s.direction == Direction::Inbound { "SERVER" } else { "CLIENT" }),
                "timestamp": micros(s.start),
                "duration": micros(s.end).saturating_sub(micros(s.start)).max(1),
                "tags": tags,
            });
            if !s.service_name.is_empty() {
                span["localEndpoint"] = serde_json::json!({"serviceName": s.service_name});
            }
            if let Some(p) = s.parent_span_id {
                span["parentId"] = hex::encode(p).into();
            }
            if s.shared {
                span["shared"] = true.into();
            }
            span
        })
        .collect();
    serde_json::to_vec(&spans).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(direction: Direction, service: &str) -> FinishedSpan {
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_000);
        FinishedSpan {
            trace_id: [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            span_id: [9; 8],
            parent_span_id: Some([7; 8]),
            name: "outbound GET backend".into(),
            direction,
            start,
            end: start + Duration::from_millis(3),
            service_name: service.into(),
            status: 503,
            attributes: vec![("env".into(), "prod".into())],
            shared: false,
        }
    }

    #[test]
    fn otlp_groups_spans_by_service_with_kinds_and_times() {
        let req = otlp(vec![
            span(Direction::Outbound, "web"),
            span(Direction::Inbound, "backend"),
        ]);
        let decoded = ExportTraceServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.resource_spans.len(), 2);
        let backend = &decoded.resource_spans[0];
        assert_eq!(
            backend.resource.as_ref().unwrap().attributes[0],
            string_kv("service.name", "backend")
        );
        let s = &backend.scope_spans[0].spans[0];
        assert_eq!(s.kind, SpanKind::Server as i32);
        assert_eq!(s.parent_span_id, vec![7; 8]);
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 3_000_000);
        assert_eq!(s.status.as_ref().unwrap().code, StatusCode::Error as i32);
        let web = &decoded.resource_spans[1].scope_spans[0].spans[0];
        assert_eq!(web.kind, SpanKind::Client as i32);
    }

    #[test]
    fn zipkin_json_uses_64_bit_ids_unless_asked() {
        let json: serde_json::Value =
            serde_json::from_slice(&zipkin(&[span(Direction::Inbound, "backend")], false)).unwrap();
        let s = &json[0];
        assert_eq!(s["traceId"], "0102030405060708");
        assert_eq!(s["parentId"], "0707070707070707");
        assert_eq!(s["kind"], "SERVER");
        assert_eq!(s["timestamp"], 1_000_000);
        assert_eq!(s["duration"], 3_000);
        assert_eq!(s["localEndpoint"]["serviceName"], "backend");
        assert_eq!(s["tags"]["env"], "prod");
        let wide: serde_json::Value =
            serde_json::from_slice(&zipkin(&[span(Direction::Inbound, "b")], true)).unwrap();
        assert_eq!(wide[0]["traceId"], "00000000000000000102030405060708");
    }
}
