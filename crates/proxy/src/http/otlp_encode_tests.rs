//! The hand-written encoding against the message tree it stands for:
//! [`reference`] builds that tree with `opentelemetry-proto`'s types (the
//! exporter's former path), and every batch must decode to it and match
//! `prost`'s own bytes for it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{Method, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span::SpanKind, status::StatusCode as OtlpStatus,
};
use prost::Message as _;

use super::*;
use crate::http::trace::sample_span as span;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..Default::default()
    }
}

/// `batch` as `opentelemetry-proto`'s message tree: one `ResourceSpans`
/// per service, in name order.
fn reference(batch: &[FinishedSpan]) -> ExportTraceServiceRequest {
    let mut by_service: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for s in batch {
        let span = Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: s.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            flags: 0x01,
            name: s.name(),
            kind: match s.direction {
                Direction::Inbound => SpanKind::Server,
                Direction::Outbound => SpanKind::Client,
            } as i32,
            start_time_unix_nano: nanos(s.start),
            end_time_unix_nano: nanos(s.end()),
            attributes: s.attributes().map(|(k, v)| kv(k, v)).collect(),
            status: Some(Status {
                code: if s.status.as_u16() >= 500 {
                    OtlpStatus::Error
                } else {
                    OtlpStatus::Unset
                } as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        by_service
            .entry(s.service_name.to_string())
            .or_default()
            .push(span);
    }
    ExportTraceServiceRequest {
        resource_spans: by_service
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", &service)],
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

/// Encodes `batch` both ways and checks they agree.
fn check(batch: &[FinishedSpan]) -> ExportTraceServiceRequest {
    let bytes = encode_request(batch);
    let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
    let expected = reference(batch);
    assert_eq!(decoded, expected);
    assert_eq!(bytes, expected.encode_to_vec(), "prost's own bytes");
    decoded
}

#[test]
fn spans_are_grouped_by_service_with_kinds_times_and_status() {
    let req = check(&[
        span(Direction::Outbound, "web"),
        span(Direction::Inbound, "backend"),
    ]);
    assert_eq!(req.resource_spans.len(), 2);
    let backend = &req.resource_spans[0];
    assert_eq!(
        backend.resource.as_ref().unwrap().attributes[0],
        kv("service.name", "backend")
    );
    let s = &backend.scope_spans[0].spans[0];
    assert_eq!(s.name, "inbound GET backend");
    assert_eq!(s.kind, SpanKind::Server as i32);
    assert_eq!(s.parent_span_id, vec![7; 8]);
    assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 3_000_000);
    assert_eq!(s.status.as_ref().unwrap().code, OtlpStatus::Error as i32);
    assert_eq!(s.attributes[2], kv("http.status_code", "503"));
    assert_eq!(s.attributes[5], kv("error", "true"));
    assert_eq!(s.attributes[6], kv("env", "prod"));
    let web = &req.resource_spans[1].scope_spans[0].spans[0];
    assert_eq!(web.kind, SpanKind::Client as i32);
}

#[test]
fn defaults_and_edge_values_encode_as_prost_does() {
    assert!(encode_request(&[]).is_empty());
    check(&[]);
    let base = span(Direction::Outbound, "web");
    check(&[FinishedSpan {
        parent_span_id: None,
        cluster: String::new(),
        service_name: "".into(),
        status: StatusCode::OK,
        tags: vec![("".into(), "".into()), ("empty".into(), "".into())],
        path: String::new(),
        ..base.clone()
    }]);
    // Before the epoch: zero times, which proto3 leaves out.
    check(&[FinishedSpan {
        start: SystemTime::UNIX_EPOCH - Duration::from_secs(1),
        duration: Duration::ZERO,
        ..base.clone()
    }]);
    // Long values: lengths of two and three varint bytes.
    check(&[FinishedSpan {
        path: "/".repeat(200),
        cluster: "c".repeat(20_000),
        method: Method::from_bytes(b"PURGE").unwrap(),
        service_name: Arc::from("s".repeat(300)),
        ..base
    }]);
}

#[test]
fn a_mixed_batch_keeps_batch_order_within_each_service() {
    let services = ["web", "backend", "web", "db", "backend", "web"];
    let statuses = [200, 503, 404, 500, 204, 302];
    let batch: Vec<FinishedSpan> = (0..600u32)
        .map(|i| {
            let n = i as usize;
            FinishedSpan {
                span_id: u64::from(i + 1).to_be_bytes(),
                parent_span_id: (i % 3 != 0).then_some([i as u8; 8]),
                direction: if i % 2 == 0 {
                    Direction::Inbound
                } else {
                    Direction::Outbound
                },
                path: format!("/item/{i}"),
                start: SystemTime::UNIX_EPOCH
                    + Duration::from_nanos(1_700_000_000_000_000_000 + u64::from(i)),
                duration: Duration::from_micros(u64::from(i) * 37),
                service_name: services[n % services.len()].into(),
                status: StatusCode::from_u16(statuses[n % statuses.len()]).unwrap(),
                tags: (0..n % 3)
                    .map(|t| (Arc::from(format!("tag{t}")), Arc::from(format!("v{i}"))))
                    .collect(),
                ..span(Direction::Inbound, "x")
            }
        })
        .collect();
    let req = check(&batch);
    let names: Vec<_> = req
        .resource_spans
        .iter()
        .map(|r| r.scope_spans[0].spans.len())
        .collect();
    assert_eq!(names, [200, 100, 300], "backend, db, web");
}
