//! Span export: one queue and one task per collector, shared by every
//! listener that sends there. A finished span is queued with `try_send`
//! (the data path never waits): when the queue ([`QUEUE`] spans) is full
//! the span is dropped and counted (`meshlink_proxy_trace_spans_dropped`).
//!
//! The task batches: it takes up to [`MAX_BATCH`] spans, waiting at most
//! [`BATCH_DELAY`] after the first, and sends them in one request: OTLP
//! protobuf (`opentelemetry-proto`'s schema, written by
//! [`super::otlp_encode`] without building its message tree) `POST`ed
//! over HTTP/1.1 or sent as the `TraceService/Export` gRPC call, or a
//! Zipkin v2 JSON array, on a connection kept from one batch to the
//! next ([`super::kept_conn`]). While a batch fills, the task looks at the
//! queue every [`BATCH_PAUSE`] instead of waking for each span, so a
//! span costs its sender a `try_send` and no wake-up. Spans of a batch
//! the collector does not take are counted as dropped. The task starts
//! with the first span (inside the data path's runtime) and ends when the
//! last listener using the collector is gone (its queue closes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use bytes::{BufMut as _, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prometheus_client::metrics::counter::Counter;
use prost::Message as _;
use tokio::sync::mpsc;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use super::kept_conn::KeptConnection;
use super::otlp_encode::{self, nanos};
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
/// How often a filling batch takes what the queue holds.
pub const BATCH_PAUSE: Duration = Duration::from_millis(10);
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The OTLP/gRPC method spans are sent with.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

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
    let mut transport = Transport::default();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        fill(&mut rx, &mut batch).await;
        let n = batch.len() as u64;
        let sent =
            tokio::time::timeout(EXPORT_TIMEOUT, export(&collector, &batch, &mut transport)).await;
        batch.clear();
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

/// Adds what the queue holds to `batch` every [`BATCH_PAUSE`] until it
/// has [`MAX_BATCH`] spans, [`BATCH_DELAY`] has passed, or the queue is
/// closed and empty.
async fn fill(rx: &mut mpsc::Receiver<FinishedSpan>, batch: &mut Vec<FinishedSpan>) {
    let deadline = tokio::time::Instant::now() + BATCH_DELAY;
    while batch.len() < MAX_BATCH {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep_until(deadline.min(now + BATCH_PAUSE)).await;
        loop {
            match rx.try_recv() {
                Ok(span) => batch.push(span),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
            if batch.len() == MAX_BATCH {
                return;
            }
        }
    }
}

/// The connection an export task keeps to its collector, made by the
/// first batch.
#[derive(Debug, Default)]
struct Transport {
    grpc: Option<tonic::client::Grpc<tonic::transport::Channel>>,
    http: Option<KeptConnection>,
}

async fn export(
    collector: &Collector,
    batch: &[FinishedSpan],
    transport: &mut Transport,
) -> Result<(), String> {
    match collector {
        Collector::OtlpHttp { uri } => {
            let body = otlp_encode::encode_request(batch);
            post(&mut transport.http, uri, "application/x-protobuf", body).await
        }
        Collector::OtlpGrpc { target } => {
            let grpc = &mut transport.grpc;
            if grpc.is_none() {
                let channel = tonic::transport::Endpoint::from_shared(format!("http://{target}"))
                    .map_err(|e| e.to_string())?
                    .connect_lazy();
                *grpc = Some(tonic::client::Grpc::new(channel));
            }
            let client = grpc.as_mut().expect("set above");
            client.ready().await.map_err(|e| e.to_string())?;
            let body = Bytes::from(otlp_encode::encode_request(batch));
            let path = http::uri::PathAndQuery::from_static(GRPC_EXPORT);
            client
                .unary(tonic::Request::new(body), path, Encoded)
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
            let body = zipkin(batch, *trace_id_128bit);
            let uri = format!("http://{host}{path}");
            post(&mut transport.http, &uri, "application/json", body).await
        }
    }
}

/// The gRPC codec of an `ExportTraceServiceRequest` already encoded by
/// [`otlp_encode`]: its bytes are the message.
#[derive(Debug, Clone, Copy)]
struct Encoded;

impl Codec for Encoded {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = Encoded;
    type Decoder = Encoded;

    fn encoder(&mut self) -> Encoded {
        Encoded
    }

    fn decoder(&mut self) -> Encoded {
        Encoded
    }
}

impl Encoder for Encoded {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, tonic::Status> {
        ExportTraceServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(format!("the collector's answer: {e}")))
    }
}

/// `POST`s `body` to `uri` over `kept` (made on first use); a 2xx
/// answer is success.
async fn post(
    kept: &mut Option<KeptConnection>,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<(), String> {
    let conn = match kept {
        Some(conn) => conn,
        None => kept.insert(KeptConnection::new(uri)?),
    };
    let (status, _) = conn
        .exchange(http::Method::POST, Some(content_type), Bytes::from(body))
        .await?;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
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
                .attributes()
                .map(|(k, v)| (k.to_owned(), serde_json::Value::from(v)))
                .collect();
            let mut span = serde_json::json!({
                "traceId": trace,
                "id": hex::encode(s.span_id),
                "name": s.name(),
                "kind": (if s.direction == Direction::Inbound { "SERVER" } else { "CLIENT" }),
                "timestamp": micros(s.start),
                "duration": micros(s.end()).saturating_sub(micros(s.start)).max(1),
                "tags": tags,
            });
            if !s.service_name.is_empty() {
                span["localEndpoint"] = serde_json::json!({"serviceName": &*s.service_name});
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
#[path = "trace_export_tests.rs"]
mod tests;
