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
//!
//! A span records what its request was (method, path, cluster, status),
//! not strings made from it: its name and attributes are written by the
//! exporter ([`FinishedSpan::name_parts`], [`FinishedSpan::attributes`]),
//! so the data path allocates only the path it copies.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderName, Method, Request, StatusCode};

use super::trace_context::{self, Outgoing, SpanId, TraceId};
use crate::metrics::ProxyMetrics;
use crate::model::Direction;
use crate::model::trace::{Collector, SAMPLING_RESOLUTION, TagValue, Tracing};

static X_CLIENT_TRACE_ID: HeaderName = HeaderName::from_static("x-client-trace-id");

/// A finished span, as the exporters read it.
#[derive(Debug, Clone)]
pub struct FinishedSpan {
    /// The trace.
    pub trace_id: TraceId,
    /// The span.
    pub span_id: SpanId,
    /// Its parent, if any.
    pub parent_span_id: Option<SpanId>,
    /// Server (inbound) or client (outbound).
    pub direction: Direction,
    /// The request's method.
    pub method: Method,
    /// The request's path (`http.url`).
    pub path: String,
    /// The cluster it went to (empty when it never got one).
    pub cluster: String,
    /// When the request arrived.
    pub start: SystemTime,
    /// From its arrival until its response's headers were sent.
    pub duration: Duration,
    /// The service that recorded it.
    pub service_name: Arc<str>,
    /// The HTTP status answered.
    pub status: StatusCode,
    /// The custom tags (name, value).
    pub tags: Vec<(Arc<str>, Arc<str>)>,
    /// The span shares its ID with the caller's (Zipkin).
    pub shared: bool,
}

impl FinishedSpan {
    /// When its response's headers were sent.
    pub fn end(&self) -> SystemTime {
        self.start + self.duration
    }

    /// The pieces of its name, e.g. `outbound GET backend`, joined.
    pub fn name_parts(&self) -> [&str; 5] {
        [
            self.direction.as_str(),
            " ",
            self.method.as_str(),
            " ",
            &self.cluster,
        ]
    }

    /// Its name, e.g. `outbound GET backend`.
    pub fn name(&self) -> String {
        self.name_parts().concat()
    }

    /// Envoy's span tags, then the custom tags, as (key, value), in the
    /// order they are exported.
    pub fn attributes(&self) -> impl Iterator<Item = (&str, &str)> {
        let error = (self.status.as_u16() >= 500).then_some(("error", "true"));
        [
            ("http.method", self.method.as_str()),
            ("http.url", self.path.as_str()),
            ("http.status_code", self.status.as_str()),
            ("upstream_cluster", self.cluster.as_str()),
            ("component", "proxy"),
        ]
        .into_iter()
        .chain(error)
        .chain(self.tags.iter().map(|(k, v)| (&**k, &**v)))
    }
}

/// A span in progress; `None` from [`start`] when the request is not
/// traced.
#[derive(Debug)]
pub struct ActiveSpan {
    ctx: Outgoing,
    start: SystemTime,
    method: Method,
    path: String,
    tags: Vec<(Arc<str>, Arc<str>)>,
    shared: bool,
}

/// Starts the span of `request` on a listener with `tracing`, and writes
/// its context into the request's headers for the next hop. Returns
/// `None` (the context still propagated, marked not sampled) when the
/// request is not sampled.
pub fn start<B>(
    tracing: &Tracing,
    direction: Direction,
    request: &mut Request<B>,
) -> Option<ActiveSpan> {
    let headers = request.headers();
    let incoming = trace_context::extract(headers);
    let parent = incoming.and_then(|c| c.sampled);
    let client_trace_id = parent.is_none() && headers.contains_key(&X_CLIENT_TRACE_ID);
    let draw = || rand::random_range(0..SAMPLING_RESOLUTION);
    let sampled = tracing.sampling.decide(parent, client_trace_id, draw);
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
    let headers = request.headers_mut();
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
                    .map(Arc::from)
                    .or_else(|| default.clone())?,
            };
            Some((t.name.clone(), value))
        })
        .collect();
    Some(ActiveSpan {
        ctx,
        start: SystemTime::now(),
        method: request.method().clone(),
        path: request.uri().path().to_owned(),
        tags,
        shared,
    })
}

impl ActiveSpan {
    /// Ends the span with the response's `status`, `took` after the
    /// request arrived, and queues it on `tracing`'s exporter, counting
    /// it as dropped when the queue is full. `cluster` is where the
    /// request went (empty when nowhere).
    pub fn finish(
        self,
        tracing: &Tracing,
        direction: Direction,
        status: StatusCode,
        cluster: String,
        took: Duration,
        metrics: &ProxyMetrics,
    ) {
        let span = FinishedSpan {
            trace_id: self.ctx.trace_id,
            span_id: self.ctx.span_id,
            parent_span_id: self.ctx.parent_span_id,
            direction,
            method: self.method,
            path: self.path,
            cluster,
            start: self.start,
            duration: took,
            service_name: tracing.service_name.clone(),
            status,
            tags: self.tags,
            shared: self.shared,
        };
        tracing.exporter.send(span, metrics);
    }
}

/// A finished span of `service` in `direction` with fixed ids, times,
/// request and tag (tests of what exports spans).
#[cfg(test)]
pub(crate) fn sample_span(direction: Direction, service: &str) -> FinishedSpan {
    FinishedSpan {
        trace_id: [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
        span_id: [9; 8],
        parent_span_id: Some([7; 8]),
        direction,
        method: Method::GET,
        path: "/".into(),
        cluster: "backend".into(),
        start: SystemTime::UNIX_EPOCH + Duration::from_millis(1_000),
        duration: Duration::from_millis(3),
        service_name: Arc::from(service),
        status: StatusCode::SERVICE_UNAVAILABLE,
        tags: vec![("env".into(), "prod".into())],
        shared: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_and_attributes_are_envoys_then_the_custom_tags() {
        let span = FinishedSpan {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: None,
            direction: Direction::Outbound,
            method: Method::PATCH,
            path: "/a/b".into(),
            cluster: "backend_mesh_svc_80".into(),
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(5),
            duration: Duration::from_micros(1_500),
            service_name: "web".into(),
            status: StatusCode::BAD_GATEWAY,
            tags: vec![("env".into(), "prod".into())],
            shared: false,
        };
        assert_eq!(span.name(), "outbound PATCH backend_mesh_svc_80");
        assert_eq!(
            span.end(),
            SystemTime::UNIX_EPOCH + Duration::from_micros(5_001_500)
        );
        let attributes: Vec<_> = span.attributes().collect();
        assert_eq!(
            attributes,
            [
                ("http.method", "PATCH"),
                ("http.url", "/a/b"),
                ("http.status_code", "502"),
                ("upstream_cluster", "backend_mesh_svc_80"),
                ("component", "proxy"),
                ("error", "true"),
                ("env", "prod"),
            ]
        );
        let ok = FinishedSpan {
            status: StatusCode::OK,
            tags: Vec::new(),
            cluster: String::new(),
            direction: Direction::Inbound,
            ..span
        };
        assert_eq!(ok.name(), "inbound PATCH ");
        assert_eq!(ok.attributes().count(), 5);
        assert_eq!(ok.attributes().nth(2), Some(("http.status_code", "200")));
    }
}
