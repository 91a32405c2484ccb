//! A batch of spans as an OTLP `ExportTraceServiceRequest`
//! (`opentelemetry-proto`'s schema), encoded straight from the
//! [`FinishedSpan`] records with `prost`'s wire primitives into one
//! buffer of exactly the right size: no message tree is built, nothing
//! is encoded twice, and the name and attributes are written from the
//! span's fields without being formatted into strings first.
//!
//! The bytes are those `prost` writes for the message tree the spans
//! stand for (one `ResourceSpans` per service, services in name order,
//! spans in batch order; fields in tag order, proto3 defaults left out);
//! the tests decode them with `opentelemetry-proto` and compare them with
//! that tree, byte for byte. Owns the wire format only; what a span
//! records is [`super::trace`]'s, where it goes [`super::trace_export`]'s.

use std::time::SystemTime;

use prost::encoding::{WireType, encoded_len_varint, key_len};

use super::trace::FinishedSpan;
use crate::model::Direction;

/// `InstrumentationScope.name` of every batch.
pub const SCOPE_NAME: &str = "meshlink-proxy";
/// `InstrumentationScope.version` of every batch.
pub const SCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// `Span.flags`: the W3C trace flags' sampled bit (every exported span
/// was sampled).
const SPAN_FLAGS: u32 = 0x01;
/// `SpanKind`'s `SPAN_KIND_SERVER` and `SPAN_KIND_CLIENT`.
const KIND_SERVER: u64 = 2;
const KIND_CLIENT: u64 = 3;
/// `Status.code`'s `STATUS_CODE_ERROR` (`STATUS_CODE_UNSET` is 0, left
/// out).
const STATUS_ERROR: u64 = 2;

/// `batch` as an encoded `ExportTraceServiceRequest`.
pub fn encode_request(batch: &[FinishedSpan]) -> Vec<u8> {
    let mut services: Vec<&str> = batch.iter().map(|s| &*s.service_name).collect();
    services.sort_unstable();
    services.dedup();
    // Pass 1: every span's length, then each service's.
    let span_lens: Vec<usize> = batch.iter().map(span_len).collect();
    let groups: Vec<(&str, usize)> = services
        .iter()
        .map(|service| {
            let spans = spans_of(batch, service)
                .map(|i| field_len(2, span_lens[i]))
                .sum();
            (*service, resource_spans_len(service, spans))
        })
        .collect();
    let total = groups.iter().map(|(_, len)| field_len(1, *len)).sum();
    // Pass 2: the bytes, into a buffer of exactly that size.
    let mut buf = Vec::with_capacity(total);
    for (service, len) in groups {
        // ExportTraceServiceRequest.resource_spans
        message_header(1, len, &mut buf);
        write_resource_spans(batch, service, &span_lens, &mut buf);
    }
    debug_assert_eq!(buf.len(), total);
    buf
}

/// The indices of `batch`'s spans of `service`, in batch order.
fn spans_of<'a>(batch: &'a [FinishedSpan], service: &'a str) -> impl Iterator<Item = usize> + 'a {
    batch
        .iter()
        .enumerate()
        .filter(move |(_, s)| &*s.service_name == service)
        .map(|(i, _)| i)
}

// === lengths ===

/// A length-delimited field of `len` bytes, with its key and length.
fn field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// A string field; proto3 leaves an empty one out.
fn string_len(tag: u32, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(tag, s.len())
    }
}

/// `AnyValue { string_value }` (a oneof: written even when empty).
fn any_string_len(value: &str) -> usize {
    field_len(1, value.len())
}

/// `KeyValue { key, value: AnyValue { string_value } }`.
fn key_value_len(key: &str, value: &str) -> usize {
    string_len(1, key) + field_len(2, any_string_len(value))
}

/// `ResourceSpans` of `service` whose `ScopeSpans.spans` fields take
/// `spans` bytes.
fn resource_spans_len(service: &str, spans: usize) -> usize {
    field_len(1, resource_len(service)) + field_len(2, scope_spans_len(spans))
}

/// `Resource { attributes: [service.name] }`.
fn resource_len(service: &str) -> usize {
    field_len(1, key_value_len("service.name", service))
}

/// `ScopeSpans { scope, spans }`.
fn scope_spans_len(spans: usize) -> usize {
    field_len(1, scope_len()) + spans
}

/// `InstrumentationScope { name, version }`.
fn scope_len() -> usize {
    string_len(1, SCOPE_NAME) + string_len(2, SCOPE_VERSION)
}

fn name_len(s: &FinishedSpan) -> usize {
    s.name_parts().iter().map(|p| p.len()).sum()
}

fn status_len(s: &FinishedSpan) -> usize {
    if s.status.as_u16() >= 500 {
        key_len(3) + encoded_len_varint(STATUS_ERROR)
    } else {
        0
    }
}

/// A fixed64 field; proto3 leaves a zero out.
fn fixed64_len(tag: u32, v: u64) -> usize {
    if v == 0 { 0 } else { key_len(tag) + 8 }
}

/// `Span`, without its own key and length.
fn span_len(s: &FinishedSpan) -> usize {
    let name = name_len(s);
    field_len(1, s.trace_id.len())
        + field_len(2, s.span_id.len())
        + s.parent_span_id.map_or(0, |p| field_len(4, p.len()))
        + if name == 0 { 0 } else { field_len(5, name) }
        + key_len(6)
        + encoded_len_varint(kind(s))
        + fixed64_len(7, nanos(s.start))
        + fixed64_len(8, nanos(s.end()))
        + s.attributes()
            .map(|(k, v)| field_len(9, key_value_len(k, v)))
            .sum::<usize>()
        + field_len(15, status_len(s))
        + key_len(16)
        + 4
}

// === writing ===
//
// prost's `encode_key` and `encode_varint` are out-of-line calls through
// `BufMut`; a span has about 60 keys and lengths, most of them one byte,
// so these push into the buffer (sized exactly by pass 1) inline.

#[inline]
fn encode_varint(mut v: u64, buf: &mut Vec<u8>) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn encode_key(tag: u32, wire_type: WireType, buf: &mut Vec<u8>) {
    encode_varint(u64::from((tag << 3) | wire_type as u32), buf);
}

#[inline]
fn message_header(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

#[inline]
fn write_bytes(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    message_header(tag, bytes.len(), buf);
    buf.extend_from_slice(bytes);
}

#[inline]
fn write_string(tag: u32, s: &str, buf: &mut Vec<u8>) {
    if !s.is_empty() {
        write_bytes(tag, s.as_bytes(), buf);
    }
}

#[inline]
fn write_fixed64(tag: u32, v: u64, buf: &mut Vec<u8>) {
    if v != 0 {
        encode_key(tag, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

#[inline]
fn write_key_value(tag: u32, key: &str, value: &str, buf: &mut Vec<u8>) {
    message_header(tag, key_value_len(key, value), buf);
    write_string(1, key, buf);
    message_header(2, any_string_len(value), buf);
    write_bytes(1, value.as_bytes(), buf);
}

fn write_resource_spans(
    batch: &[FinishedSpan],
    service: &str,
    span_lens: &[usize],
    buf: &mut Vec<u8>,
) {
    // ResourceSpans.resource
    message_header(1, resource_len(service), buf);
    write_key_value(1, "service.name", service, buf);
    // ResourceSpans.scope_spans
    let spans = spans_of(batch, service)
        .map(|i| field_len(2, span_lens[i]))
        .sum();
    message_header(2, scope_spans_len(spans), buf);
    message_header(1, scope_len(), buf);
    write_string(1, SCOPE_NAME, buf);
    write_string(2, SCOPE_VERSION, buf);
    for i in spans_of(batch, service) {
        message_header(2, span_lens[i], buf);
        let at = buf.len();
        write_span(&batch[i], buf);
        debug_assert_eq!(buf.len() - at, span_lens[i], "span {i}'s length");
    }
}

/// `Span`'s fields, in tag order.
fn write_span(s: &FinishedSpan, buf: &mut Vec<u8>) {
    write_bytes(1, &s.trace_id, buf);
    write_bytes(2, &s.span_id, buf);
    if let Some(parent) = &s.parent_span_id {
        write_bytes(4, parent, buf);
    }
    let name = name_len(s);
    if name > 0 {
        message_header(5, name, buf);
        for part in s.name_parts() {
            buf.extend_from_slice(part.as_bytes());
        }
    }
    encode_key(6, WireType::Varint, buf);
    encode_varint(kind(s), buf);
    write_fixed64(7, nanos(s.start), buf);
    write_fixed64(8, nanos(s.end()), buf);
    for (key, value) in s.attributes() {
        write_key_value(9, key, value, buf);
    }
    message_header(15, status_len(s), buf);
    if s.status.as_u16() >= 500 {
        encode_key(3, WireType::Varint, buf);
        encode_varint(STATUS_ERROR, buf);
    }
    encode_key(16, WireType::ThirtyTwoBit, buf);
    buf.extend_from_slice(&SPAN_FLAGS.to_le_bytes());
}

fn kind(s: &FinishedSpan) -> u64 {
    match s.direction {
        Direction::Inbound => KIND_SERVER,
        Direction::Outbound => KIND_CLIENT,
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "otlp_encode_tests.rs"]
mod tests;
