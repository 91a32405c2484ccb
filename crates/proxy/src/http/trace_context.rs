//! Trace context propagation: reading the caller's context from W3C
//! `traceparent`, B3 single (`b3`) or B3 multi (`x-b3-*`) headers, and
//! writing a span's context for the next hop (`traceparent` always; the
//! B3 headers too when spans go to Zipkin).
//!
//! Owns the header formats only; what a span records is
//! [`super::trace`]'s. Never fails on input: a malformed header is as if
//! it were absent.

use http::{HeaderMap, HeaderName, HeaderValue};

// The headers as `HeaderName`s made once: a lookup by `&str` parses the
// name first, on every request.
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static B3: HeaderName = HeaderName::from_static("b3");
static B3_TRACE_ID: HeaderName = HeaderName::from_static("x-b3-traceid");
static B3_SPAN_ID: HeaderName = HeaderName::from_static("x-b3-spanid");
static B3_PARENT_SPAN_ID: HeaderName = HeaderName::from_static("x-b3-parentspanid");
static B3_SAMPLED: HeaderName = HeaderName::from_static("x-b3-sampled");
static B3_FLAGS: HeaderName = HeaderName::from_static("x-b3-flags");

/// A trace ID (16 bytes; a 64-bit one has its high 8 bytes zero).
pub type TraceId = [u8; 16];
/// A span ID.
pub type SpanId = [u8; 8];

/// The context a request arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incoming {
    /// The trace.
    pub trace_id: TraceId,
    /// The caller's span.
    pub span_id: SpanId,
    /// The caller's parent span (B3 only).
    pub parent_span_id: Option<SpanId>,
    /// The caller's sampling decision, if it sent one.
    pub sampled: Option<bool>,
}

/// A span's context as written for the next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    /// The trace.
    pub trace_id: TraceId,
    /// This span.
    pub span_id: SpanId,
    /// Its parent span.
    pub parent_span_id: Option<SpanId>,
    /// Whether the trace is recorded.
    pub sampled: bool,
}

/// The incoming context: `traceparent`, else `b3`, else `x-b3-*`.
pub fn extract(headers: &HeaderMap) -> Option<Incoming> {
    let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(v) = headers.get(&TRACEPARENT) {
        let ctx = match canonical_traceparent(v.as_bytes()) {
            Some(ctx) => ctx,
            None => v.to_str().ok().and_then(traceparent),
        };
        if ctx.is_some() {
            return ctx;
        }
    }
    if let Some(ctx) = text(&B3).and_then(b3_single) {
        return Some(ctx);
    }
    let trace_id = text(&B3_TRACE_ID).and_then(parse_trace_id)?;
    let span_id = text(&B3_SPAN_ID).and_then(parse_span_id)?;
    let debug = text(&B3_FLAGS) == Some("1");
    let sampled = match text(&B3_SAMPLED) {
        Some("1" | "true") => Some(true),
        Some("0" | "false") => Some(false),
        _ => None,
    };
    Some(Incoming {
        trace_id,
        span_id,
        parent_span_id: text(&B3_PARENT_SPAN_ID).and_then(parse_span_id),
        sampled: if debug { Some(true) } else { sampled },
    })
}

/// `00-<trace-id>-<parent-id>-<flags>` (later versions: the same first
/// four fields).
fn traceparent(v: &str) -> Option<Incoming> {
    let mut parts = v.trim().split('-');
    let version = parts.next()?;
    let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version.eq_ignore_ascii_case("ff") || trace.len() != 32 {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let flags = u8::from_str_radix(flags.get(..2)?, 16).ok()?;
    Some(Incoming {
        trace_id: parse_trace_id(trace)?,
        span_id: parse_span_id(span)?,
        parent_span_id: None,
        sampled: Some(flags & 1 == 1),
    })
}

/// A `traceparent` of the usual shape (what every sidecar sends): 55
/// bytes, four fields of hex digits between dashes at 2, 35 and 52,
/// read without splitting or checking it as text first. `None` when it
/// has another shape ([`traceparent`] decides); `Some(None)` when it has
/// this shape and is not valid. Reads every value as [`traceparent`]
/// does.
fn canonical_traceparent(v: &[u8]) -> Option<Option<Incoming>> {
    if v.len() != 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let (mut version, mut trace_id, mut span_id, mut flags) =
        ([0u8; 1], [0u8; 16], [0u8; 8], [0u8; 1]);
    hex::decode_to_slice(&v[..2], &mut version).ok()?;
    hex::decode_to_slice(&v[3..35], &mut trace_id).ok()?;
    hex::decode_to_slice(&v[36..52], &mut span_id).ok()?;
    hex::decode_to_slice(&v[53..], &mut flags).ok()?;
    if version[0] == 0xff || trace_id == [0; 16] || span_id == [0; 8] {
        return Some(None);
    }
    Some(Some(Incoming {
        trace_id,
        span_id,
        parent_span_id: None,
        sampled: Some(flags[0] & 1 == 1),
    }))
}

/// `{trace}-{span}[-{sampled}[-{parent}]]` (a lone decision carries no
/// context and is ignored).
fn b3_single(v: &str) -> Option<Incoming> {
    let mut parts = v.trim().split('-');
    let trace_id = parse_trace_id(parts.next()?)?;
    let span_id = parse_span_id(parts.next()?)?;
    let sampled = match parts.next() {
        Some("1" | "d") => Some(true),
        Some("0") => Some(false),
        None => None,
        Some(_) => return None,
    };
    Some(Incoming {
        trace_id,
        span_id,
        parent_span_id: parts.next().and_then(parse_span_id),
        sampled,
    })
}

/// A 16 or 32 hex digit trace ID, not all zero.
fn parse_trace_id(hex_id: &str) -> Option<TraceId> {
    let mut id = [0u8; 16];
    match hex_id.len() {
        32 => hex::decode_to_slice(hex_id, &mut id).ok()?,
        16 => hex::decode_to_slice(hex_id, &mut id[8..]).ok()?,
        _ => return None,
    }
    (id != [0; 16]).then_some(id)
}

/// A 16 hex digit span ID, not all zero.
fn parse_span_id(hex_id: &str) -> Option<SpanId> {
    let mut id = [0u8; 8];
    hex::decode_to_slice(hex_id, &mut id).ok()?;
    (id != [0; 8]).then_some(id)
}

/// A new trace ID: 128 random bits, or 64 (`wide` false).
pub fn new_trace_id(wide: bool) -> TraceId {
    let mut id = rand::random::<u128>().max(1).to_be_bytes();
    if !wide {
        id[..8].fill(0);
        if id[8..] == [0; 8] {
            id[15] = 1;
        }
    }
    id
}

/// A new span ID.
pub fn new_span_id() -> SpanId {
    rand::random::<u64>().max(1).to_be_bytes()
}

/// Writes `ctx` for the next hop: `traceparent`, and with `b3` the B3
/// single and multi headers (replacing what the request carried).
pub fn inject(headers: &mut HeaderMap, ctx: &Outgoing, b3: bool) {
    let mut trace = [0u8; 32];
    let mut span = [0u8; 16];
    hex::encode_to_slice(ctx.trace_id, &mut trace).expect("32 hex digits");
    hex::encode_to_slice(ctx.span_id, &mut span).expect("16 hex digits");
    // Hex digits and dashes only: always a valid header value. Marked
    // sensitive, so HTTP/2 sends it as a never-indexed literal: a value
    // new on every request would only evict the HPACK table's useful
    // entries (and make every later header cost more to encode).
    // Each value is joined on the stack (the longest, `b3`, is 68 bytes)
    // and copied once, into the header value.
    let mut set = |name: &HeaderName, parts: &[&[u8]]| {
        let mut joined = [0u8; 80];
        let mut len = 0;
        for part in parts {
            joined[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        if let Ok(mut v) = HeaderValue::from_bytes(&joined[..len]) {
            v.set_sensitive(true);
            headers.insert(name.clone(), v);
        }
    };
    let flag: &[u8] = if ctx.sampled { b"01" } else { b"00" };
    set(&TRACEPARENT, &[b"00-", &trace, b"-", &span, b"-", flag]);
    if !b3 {
        return;
    }
    let trace: &[u8] = if ctx.trace_id[..8] == [0; 8] {
        &trace[16..]
    } else {
        &trace
    };
    let sampled: &[u8] = if ctx.sampled { b"1" } else { b"0" };
    let mut parent_hex = [0u8; 16];
    let parent = match ctx.parent_span_id {
        Some(p) => {
            hex::encode_to_slice(p, &mut parent_hex).expect("16 hex digits");
            Some(&parent_hex[..])
        }
        None => None,
    };
    match parent {
        Some(p) => set(&B3, &[trace, b"-", &span, b"-", sampled, b"-", p]),
        None => set(&B3, &[trace, b"-", &span, b"-", sampled]),
    }
    set(&B3_TRACE_ID, &[trace]);
    set(&B3_SPAN_ID, &[&span]);
    set(&B3_SAMPLED, &[sampled]);
    match parent {
        Some(p) => set(&B3_PARENT_SPAN_ID, &[p]),
        None => {
            headers.remove(&B3_PARENT_SPAN_ID);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn traceparent_is_read_and_malformed_ones_ignored() {
        let ctx = extract(&headers(&[(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )]))
        .expect("a context");
        assert_eq!(
            hex::encode(ctx.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(hex::encode(ctx.span_id), "00f067aa0ba902b7");
        assert_eq!(ctx.sampled, Some(true));
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        ] {
            assert_eq!(extract(&headers(&[("traceparent", bad)])), None, "{bad}");
        }
        // A later version may add fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        let ctx = extract(&headers(&[("traceparent", later)])).expect("a context");
        assert_eq!(ctx.sampled, Some(false));
    }

    #[test]
    fn the_usual_traceparent_shape_reads_as_the_general_reading_does() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut cases = vec![good.to_owned(), good.to_uppercase()];
        // Every byte replaced by a few others: dashes, non-hex, upper and
        // lower case, zeros, `ff` versions, whitespace at the ends.
        for i in 0..good.len() {
            for c in ['-', 'g', 'F', 'f', '0', ' ', '+'] {
                let mut v = good.as_bytes().to_vec();
                v[i] = c as u8;
                cases.push(String::from_utf8(v).unwrap());
            }
        }
        cases.push(good.replace("4bf92f3577b34da6a3ce929d0e0e4736", &"0".repeat(32)));
        cases.push(good.replace("00f067aa0ba902b7", &"0".repeat(16)));
        cases.push(good.replacen("00", "ff", 1));
        cases.push(good.replacen("00", "FF", 1));
        for v in &cases {
            if let Some(fast) = canonical_traceparent(v.as_bytes()) {
                assert_eq!(fast, traceparent(v), "{v:?}");
            }
        }
        assert!(canonical_traceparent(good.as_bytes()).unwrap().is_some());
        assert!(
            canonical_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ")
                .is_none()
        );
    }

    #[test]
    fn b3_single_and_multi_are_read_with_64_bit_ids() {
        let ctx = extract(&headers(&[(
            "b3",
            "80f198ee56343ba8-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90",
        )]))
        .expect("b3");
        assert_eq!(
            hex::encode(ctx.trace_id),
            "000000000000000080f198ee56343ba8"
        );
        assert_eq!(ctx.sampled, Some(true));
        assert_eq!(
            ctx.parent_span_id.map(hex::encode).as_deref(),
            Some("05e3ac9a4f6e3b90")
        );
        let ctx = extract(&headers(&[
            ("x-b3-traceid", "463ac35c9f6413ad48485a3953bb6124"),
            ("x-b3-spanid", "a2fb4a1d1a96d312"),
            ("x-b3-sampled", "0"),
        ]))
        .expect("x-b3");
        assert_eq!(ctx.sampled, Some(false));
        assert_eq!(ctx.parent_span_id, None);
        let debug = extract(&headers(&[
            ("x-b3-traceid", "463ac35c9f6413ad"),
            ("x-b3-spanid", "a2fb4a1d1a96d312"),
            ("x-b3-flags", "1"),
        ]))
        .expect("debug");
        assert_eq!(debug.sampled, Some(true));
        assert_eq!(extract(&headers(&[("b3", "1")])), None);
        assert_eq!(
            extract(&headers(&[("x-b3-traceid", "463ac35c9f6413ad")])),
            None
        );
    }

    #[test]
    fn injected_headers_read_back_as_the_same_context() {
        let out = Outgoing {
            trace_id: new_trace_id(false),
            span_id: new_span_id(),
            parent_span_id: Some(new_span_id()),
            sampled: true,
        };
        assert_eq!(out.trace_id[..8], [0; 8]);
        let mut h = headers(&[("x-b3-parentspanid", "a2fb4a1d1a96d312")]);
        inject(&mut h, &out, true);
        let tp = extract(&h).expect("traceparent");
        assert_eq!(
            (tp.trace_id, tp.span_id, tp.sampled),
            (out.trace_id, out.span_id, Some(true))
        );
        h.remove("traceparent");
        let single = extract(&h).expect("b3");
        assert_eq!(single.parent_span_id, out.parent_span_id);
        h.remove("b3");
        let multi = extract(&h).expect("x-b3");
        assert_eq!(multi.parent_span_id, out.parent_span_id);
        assert_eq!(h["x-b3-traceid"].to_str().unwrap().len(), 16);

        let mut plain = HeaderMap::new();
        let unsampled = Outgoing {
            sampled: false,
            parent_span_id: None,
            ..out
        };
        inject(&mut plain, &unsampled, false);
        assert!(plain["traceparent"].to_str().unwrap().ends_with("-00"));
        assert!(plain.get("b3").is_none());
    }
}
