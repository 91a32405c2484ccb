//! The proxy's model of an HTTP connection manager's `tracing` (what
//! Kuma's MeshTrace becomes): where spans go, how requests are sampled
//! and which custom tags every span carries.
//!
//! Sampling follows Envoy's three percentages, with one rule for traces
//! that are already going: a request whose incoming context carries a
//! sampling decision (`traceparent` flags, `x-b3-sampled`, `b3`) keeps
//! it, so a trace is recorded by every sidecar or by none. A request that
//! starts a trace is sampled with `client_sampling` when it has
//! `x-client-trace-id`, else with `random_sampling`, and then only within
//! `overall_sampling` (the upper limit).

use std::sync::Arc;

use http::HeaderName;
use serde::Serialize;

use crate::http::trace_export::Exporter;

/// Percentages are drawn in millionths (Envoy's `FractionalPercent`
/// resolution).
pub const SAMPLING_RESOLUTION: u32 = 1_000_000;

/// A listener's tracing.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tracing {
    /// Where spans go.
    pub collector: Collector,
    /// The OTLP `service.name` (Zipkin's `localEndpoint.serviceName`),
    /// shared by the listener's spans.
    #[serde(serialize_with = "shared_str")]
    pub service_name: Arc<str>,
    /// The three sampling percentages.
    pub sampling: Sampling,
    /// Tags added to every span.
    pub tags: Vec<Tag>,
    /// The collector's queue, shared by every listener that sends there.
    #[serde(skip)]
    pub exporter: Arc<Exporter>,
}

impl PartialEq for Tracing {
    fn eq(&self, other: &Self) -> bool {
        self.collector == other.collector
            && self.service_name == other.service_name
            && self.sampling == other.sampling
            && self.tags == other.tags
    }
}

impl Eq for Tracing {}

/// A span collector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Collector {
    /// OTLP/HTTP: protobuf `POST`ed to this URL (`.../v1/traces`).
    OtlpHttp {
        /// `http://host:port/path`.
        uri: String,
    },
    /// OTLP/gRPC: `TraceService/Export` at `host:port`.
    OtlpGrpc {
        /// `host:port`.
        target: String,
    },
    /// Zipkin v2 JSON `POST`ed to `http://{host}{path}`.
    Zipkin {
        /// `host:port`.
        host: String,
        /// The endpoint's path, e.g. `/api/v2/spans`.
        path: String,
        /// 128-bit trace IDs (else 64-bit).
        trace_id_128bit: bool,
        /// The inbound's server span shares the caller's span ID.
        shared_span_context: bool,
    },
}

impl Collector {
    /// Whether spans go to Zipkin (which also propagates B3 headers).
    pub fn is_zipkin(&self) -> bool {
        matches!(self, Collector::Zipkin { .. })
    }
}

/// Sampling percentages, 0 to 100.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sampling {
    /// The upper limit on what is traced.
    pub overall: f64,
    /// Requests with `x-client-trace-id` that are traced.
    pub client: f64,
    /// Other requests that start a trace.
    pub random: f64,
}

impl Eq for Sampling {}

impl Sampling {
    /// Whether a request is traced. `parent` is the incoming context's
    /// decision, if it has one; `client_trace_id` whether the request has
    /// `x-client-trace-id`; `draw` yields uniform draws in
    /// `0..SAMPLING_RESOLUTION`.
    pub fn decide(
        &self,
        parent: Option<bool>,
        client_trace_id: bool,
        mut draw: impl FnMut() -> u32,
    ) -> bool {
        if let Some(sampled) = parent {
            return sampled;
        }
        let first = if client_trace_id {
            self.client
        } else {
            self.random
        };
        draws_within(first, &mut draw) && draws_within(self.overall, &mut draw)
    }
}

/// Whether a draw falls within `percent`, drawing only when the answer
/// depends on it (not at 0 % or 100 %, the common settings).
fn draws_within(percent: f64, draw: &mut impl FnMut() -> u32) -> bool {
    if percent >= 100.0 {
        true
    } else if percent <= 0.0 {
        false
    } else {
        within(percent, draw())
    }
}

/// Whether `draw` (in `0..SAMPLING_RESOLUTION`) falls within `percent`.
pub fn within(percent: f64, draw: u32) -> bool {
    let threshold = (percent.clamp(0.0, 100.0) * f64::from(SAMPLING_RESOLUTION) / 100.0).round();
    f64::from(draw) < threshold
}

/// A custom tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tag {
    /// The tag's name.
    #[serde(serialize_with = "shared_str")]
    pub name: Arc<str>,
    /// Where its value comes from.
    pub value: TagValue,
}

/// A custom tag's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TagValue {
    /// A fixed value.
    Literal(#[serde(serialize_with = "shared_str")] Arc<str>),
    /// A request header, else `default` (none: no tag).
    Header {
        /// The header.
        #[serde(serialize_with = "header_name")]
        name: HeaderName,
        /// The value when the header is missing.
        #[serde(serialize_with = "optional_shared_str")]
        default: Option<Arc<str>>,
    },
}

fn shared_str<S: serde::Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s)
}

fn optional_shared_str<S: serde::Serializer>(
    s: &Option<Arc<str>>,
    ser: S,
) -> Result<S::Ok, S::Error> {
    match s {
        Some(s) => ser.serialize_some(&**s),
        None => ser.serialize_none(),
    }
}

fn header_name<S: serde::Serializer>(name: &HeaderName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(overall: f64, client: f64, random: f64) -> Sampling {
        Sampling {
            overall,
            client,
            random,
        }
    }

    #[test]
    fn percentages_map_to_draw_thresholds() {
        assert!(!within(0.0, 0));
        assert!(within(100.0, SAMPLING_RESOLUTION - 1));
        assert!(within(50.0, 499_999));
        assert!(!within(50.0, 500_000));
        assert!(within(0.0001, 0));
        assert!(!within(0.0001, 1));
        // Out-of-range values are clamped, never wrap.
        assert!(!within(-5.0, 0));
        assert!(within(250.0, SAMPLING_RESOLUTION - 1));
        // Exactly the percentage of all draws is within it.
        let hits = (0..SAMPLING_RESOLUTION)
            .filter(|d| within(12.5, *d))
            .count();
        assert_eq!(hits, 125_000);
    }

    #[test]
    fn a_parent_decision_wins_and_overall_caps_new_traces() {
        let never = || panic!("a parent's decision draws nothing");
        assert!(sampling(0.0, 0.0, 0.0).decide(Some(true), false, never));
        assert!(!sampling(100.0, 100.0, 100.0).decide(Some(false), true, never));
        // random 60: a draw below 600000 starts a trace, overall 80 then
        // keeps it below 800000.
        let s = sampling(80.0, 40.0, 60.0);
        let mut draws = [599_999, 799_999].into_iter();
        assert!(s.decide(None, false, || draws.next().unwrap()));
        let mut draws = [599_999, 800_000].into_iter();
        assert!(!s.decide(None, false, || draws.next().unwrap()));
        let mut draws = [600_000, 0].into_iter();
        assert!(!s.decide(None, false, || draws.next().unwrap()));
        // x-client-trace-id: client 40 instead of random 60.
        let mut draws = [500_000, 0].into_iter();
        assert!(!s.decide(None, true, || draws.next().unwrap()));
        let mut draws = [399_999, 0].into_iter();
        assert!(s.decide(None, true, || draws.next().unwrap()));
        // overall 0 traces nothing new.
        let mut zero = || 0;
        assert!(!sampling(0.0, 100.0, 100.0).decide(None, false, &mut zero));
        // 100 % (and 0 %) need no draw.
        assert!(sampling(100.0, 0.0, 100.0).decide(None, false, never));
        assert!(!sampling(100.0, 0.0, 100.0).decide(None, true, never));
        assert!(!sampling(0.0, 100.0, 100.0).decide(None, false, never));
        let mut draws = [0].into_iter();
        assert!(sampling(100.0, 100.0, 0.5).decide(None, false, || draws.next().unwrap()));
    }
}
