//! One request's span: started when the request arrives (continuing the
//! caller's trace or starting one, with the listener's sampling), its
//! context written into the request before it goes on, and finished when
//! the response's headers are sent, then queued for export (never
//! blocking; see [`super::trace_export`]).
//!
//! An inbound's span is a server span, an outbound's a client span; the
//! caller's span is the parent, so web's outbound span is the parent of
//! backend's inbound span. With Zipkin's shared span context (its
//! default), an inbound's server span takes the caller's span ID instead,
//! as Envoy does.

use std::time::SystemTime;

use http::{HeaderMap, Method, Response};

use super::metrics::RequestLabels;
use super::respond::ResponseBody;
use super::trace_context::{self, Outgoing, SpanId, TraceId};
use crate::metrics::ProxyMetrics;
use crate::model::Direction;
use crate::model::trace::{Collector, SAMPLING_RESOLUTION, TagValue, Tracing};

/// A finished span, as the exporters read it.
#[derive(Debug, Clone)]
pub struct FinishedSpan {
    /// The trace.
    pub trace_id: TraceId,
    /// The span.
    pub span_id: SpanId,
    /// Its parent, if any.
    pub parent_span_id: Option<SpanId>,
    /// e.g. `outbound GET backend`.
    pub name: String,
    /// Server (inbound) or client (outbound).
    pub direction: Direction,
    /// When the request arrived.
    pub start: SystemTime,
    /// When its response's headers were sent.
    pub end: SystemTime,
    /// The service that recorded it.
    pub service_name: String,
    /// The HTTP status answered.
    pub status: u16,
    /// Envoy's span tags and the custom tags.
    pub attributes: Vec<(String, String)>,
    /// The span shares its ID with the caller's (Zipkin).
    pub shared: bool,
}

/// A span in progress; `None` from [`start`] when the request is not
/// traced.
#[derive(Debug)]
pub struct ActiveSpan {
    ctx: Outgoing,
    start: SystemTime,
    method: Method,
    path: String,
    tags: Vec<(String, String)>,
    shared: bool,
}

/// Starts the span of a request with `headers` on a listener with
/// `tracing`, and writes its context into `headers` for the next hop.
/// Returns `None` (the context still propagated, marked not sampled) when
/// the request is not sampled.
pub fn start(
    tracing: &Tracing,
    direction: Direction,
    method: &Method,
    path: &str,
    headers: &mut HeaderMap,
) -> Option<ActiveSpan> {
    let incoming = trace_context::extract(headers);
    let client_trace_id = headers.contains_key("x-client-trace-id");
    let draw = || rand::random_range(0..SAMPLING_RESOLUTION);
    let sampled = tracing
        .sampling
        .decide(incoming.and_then(|c| c.sampled), client_trace_id, draw);
    let (wide, shared_context) = match &tracing.collector {
        Collector::Zipkin {
            trace_id_128bit,
            shared_span_context,
            ..
        } => (*trace_id_128bit, *shared_span_context),
        _ => (true, false),
    };
    let shared = shared_context && direction == Direction::Inbound && incoming.is_some();
    let ctx = match incoming {
        Some(c) if shared => Outgoing {
            trace_id: c.trace_id,
            span_id: c.span_id,
            parent_span_id: c.parent_span_id,
            sampled,
        },
        Some(c) => Outgoing {
            trace_id: c.trace_id,
            span_id: trace_context::new_span_id(),
            parent_span_id: Some(c.span_id),
            sampled,
        },
        None => Outgoing {
            trace_id: trace_context::new_trace_id(wide),
            span_id: trace_context::new_span_id(),
            parent_span_id: None,
            sampled,
        },
    };
    trace_context::inject(headers, &ctx, tracing.collector.is_zipkin());
    if !sampled {
        return None;
    }
    let tags = tracing
        .tags
        .iter()
        .filter_map(|t| {
            let value = match &t.value {
                TagValue::Literal(v) => v.clone(),
                TagValue::Header { name, default } => headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .or_else(|| default.clone())?,
            };
            Some((t.name.clone(), value))
        })
        .collect();
    Some(ActiveSpan {
        ctx,
        start: SystemTime::now(),
        method: method.clone(),
        path: path.to_owned(),
        tags,
        shared,
    })
}

impl ActiveSpan {
    /// Ends the span with `response` and queues it on `tracing`'s
    /// exporter, counting it as dropped when the queue is full.
    pub fn finish(
        self,
        tracing: &Tracing,
        direction: Direction,
        response: &Response<ResponseBody>,
        labels: &RequestLabels,
        metrics: &ProxyMetrics,
    ) {
        let status = response.status().as_u16();
        let mut attributes = vec![
            ("http.method".to_owned(), self.method.to_string()),
            ("http.url".to_owned(), self.path),
            ("http.status_code".to_owned(), status.to_string()),
            ("upstream_cluster".to_owned(), labels.cluster.clone()),
            ("component".to_owned(), "proxy".to_owned()),
        ];
        if status >= 500 {
            attributes.push(("error".to_owned(), "true".to_owned()));
        }
        attributes.extend(self.tags);
        let span = FinishedSpan {
            trace_id: self.ctx.trace_id,
            span_id: self.ctx.span_id,
            parent_span_id: self.ctx.parent_span_id,
            name: format!("{} {} {}", direction.as_str(), self.method, labels.cluster),
            direction,
            start: self.start,
            end: SystemTime::now(),
            service_name: tracing.service_name.clone(),
            status,
            attributes,
            shared: self.shared,
        };
        tracing.exporter.send(span, metrics);
    }
}
