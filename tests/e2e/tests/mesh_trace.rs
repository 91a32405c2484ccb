//! MeshTrace (issue 36) with real binaries, curl and a collector that
//! decodes what it receives with the real schemas. Kuma's full
//! OpenTelemetry example, applied unchanged but for the collector's
//! endpoint (OTLP/HTTP here) and its sampling block, makes a request
//! through web → backend one trace: web's sidecar records a client span
//! that is the parent of backend's server span, the app receives the
//! W3C context of backend's span, and both spans carry the literal tag
//! and the tags taken from the request's headers (or their default).
//! `sampling.overall: 0` records nothing, and marks the propagated
//! context not sampled. Kuma's Zipkin example (unchanged but for the
//! URL) exports Zipkin v2 JSON with B3 headers propagated.

use std::time::Duration;

use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::span_collector::{ServiceSpan, SpanCollector};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

const READY: Duration = Duration::from_secs(30);

/// Kuma's full OpenTelemetry example; `endpoint` and `sampling` vary.
fn otel_policy(endpoint: &str, sampling: &str) -> String {
    format!(
        "\
type: MeshTrace
name: default
mesh: default
spec:
  targetRef:
    kind: Mesh
  default:
    backends:
      - type: OpenTelemetry
        openTelemetry:
          endpoint: {endpoint}
    tags:
      - name: team
        literal: core
      - name: env
        header:
          name: x-env
          default: prod
      - name: version
        header:
          name: x-version
{sampling}"
    )
}

/// The W3C context the app received: (trace ID, span ID, sampled).
fn app_context(seen: &meshlink_e2e::curl::Seen) -> (String, String, bool) {
    let body = seen.json();
    let tp = body["headers"]["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("the app got no traceparent: {body}"))
        .to_owned();
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    (parts[1].to_owned(), parts[2].to_owned(), parts[3] == "01")
}

/// The spans of trace `trace` (hex) the collector has.
fn spans_of(collector: &SpanCollector, trace: &str) -> Vec<ServiceSpan> {
    collector
        .otlp_spans()
        .into_iter()
        .filter(|s| hex::encode(&s.span.trace_id) == trace)
        .collect()
}

/// Both sidecars' spans of `trace`: (web's client span, backend's server
/// span), once the collector has them.
fn trace_pair(collector: &SpanCollector, trace: &str) -> (ServiceSpan, ServiceSpan) {
    let spans = eventually("both spans of the trace", READY, || {
        let s = spans_of(collector, trace);
        (s.len() >= 2).then_some(s)
    });
    assert_eq!(spans.len(), 2, "one span per sidecar: {spans:#?}");
    let web = spans
        .iter()
        .find(|s| s.service == "web")
        .expect("web's span");
    let backend = spans
        .iter()
        .find(|s| s.service == "backend")
        .expect("backend's span");
    (web.clone(), backend.clone())
}

#[test]
fn a_request_through_web_and_backend_is_one_trace_with_tags_from_headers() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let _app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let collector = SpanCollector::start();
    let endpoint = format!("http://127.0.0.1:{}", collector.port());
    cp.cli_stdin(&["apply", "-f", "-"], Some(&otel_policy(&endpoint, "")))
        .success();
    let listed = cp
        .cli(&["get", "meshtraces", "-m", "default"])
        .success()
        .stdout;
    assert!(
        listed.contains(&format!("OpenTelemetry {endpoint}")),
        "{listed}"
    );

    // Tracing is on in both sidecars once a request's trace has a span
    // from each.
    let mut warm_ups = Vec::new();
    eventually("a trace with both sidecars' spans", READY, || {
        let seen = curl(ports.web_outbound, "/warm-up", &[]);
        if seen.json()["headers"]["traceparent"].is_string() {
            warm_ups.push(app_context(&seen).0);
        }
        warm_ups
            .iter()
            .any(|t| spans_of(&collector, t).len() >= 2)
            .then_some(())
    });
    let seen = curl(ports.web_outbound, "/orders/7", &["-H", "x-env: staging"]);
    assert_eq!(seen.status, 200);
    let (trace, app_parent, sampled) = app_context(&seen);
    assert!(sampled, "100 % by default");
    let (web_span, backend_span) = trace_pair(&collector, &trace);

    // web's client span starts the trace and is backend's server span's
    // parent; the app's context is backend's span.
    assert_eq!(web_span.span.kind, SpanKind::Client as i32);
    assert!(web_span.span.parent_span_id.is_empty(), "a new trace");
    assert_eq!(backend_span.span.kind, SpanKind::Server as i32);
    assert_eq!(backend_span.span.parent_span_id, web_span.span.span_id);
    assert_eq!(hex::encode(&backend_span.span.span_id), app_parent);
    for s in [&web_span, &backend_span] {
        assert_eq!(s.attribute("team"), Some("core"), "{s:#?}");
        assert_eq!(s.attribute("env"), Some("staging"), "{s:#?}");
        assert_eq!(s.attribute("version"), None, "no header, no default");
        assert_eq!(s.attribute("http.url"), Some("/orders/7"));
        assert_eq!(s.attribute("http.status_code"), Some("200"));
        assert!(s.span.end_time_unix_nano >= s.span.start_time_unix_nano);
    }
    let exports = collector.exports();
    assert!(
        exports.iter().all(|e| e.method == "POST"
            && e.path == "/v1/traces"
            && e.content_type == "application/x-protobuf"),
        "{exports:?}"
    );

    // A caller's context is continued; the header tag's default applies.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let seen = curl(
        ports.web_outbound,
        "/status/404",
        &[
            "-H",
            &format!("traceparent: 00-{caller_trace}-{caller_span}-01"),
            "-H",
            "x-version: v2",
        ],
    );
    assert_eq!(seen.status, 404);
    let (web_span, backend_span) = trace_pair(&collector, caller_trace);
    assert_eq!(hex::encode(&web_span.span.parent_span_id), caller_span);
    assert_eq!(backend_span.span.parent_span_id, web_span.span.span_id);
    assert_eq!(backend_span.attribute("env"), Some("prod"));
    assert_eq!(backend_span.attribute("version"), Some("v2"));
    assert_eq!(backend_span.attribute("http.status_code"), Some("404"));
    assert_eq!(web.metric("meshlink_proxy_trace_spans_dropped_total"), 0.0);
    assert_eq!(
        backend.metric("meshlink_proxy_trace_spans_dropped_total"),
        0.0
    );
    assert!(backend.metric("meshlink_proxy_trace_spans_exported_total") >= 2.0);

    // overall: 0 records nothing: the context still reaches the app,
    // marked not sampled, and no span of those traces is exported.
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&otel_policy(&endpoint, "    sampling:\n      overall: 0\n")),
    )
    .success();
    eventually("sampling to stop", READY, || {
        let (_, _, sampled) = app_context(&curl(ports.web_outbound, "/off", &[]));
        (!sampled).then_some(())
    });
    let unsampled: Vec<String> = (0..10)
        .map(|i| {
            let seen = curl(
                ports.web_outbound,
                &format!("/off/{i}"),
                &["-H", "x-env: qa"],
            );
            let (trace, _, sampled) = app_context(&seen);
            assert!(!sampled, "overall 0 samples nothing");
            trace
        })
        .collect();
    // A barrier: sampling back on, and one traced request's spans
    // arrive after anything the earlier requests could have queued.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&otel_policy(&endpoint, "")))
        .success();
    let barrier = eventually("sampling to resume", READY, || {
        let (trace, _, sampled) = app_context(&curl(ports.web_outbound, "/on", &[]));
        sampled.then_some(trace)
    });
    trace_pair(&collector, &barrier);
    for trace in &unsampled {
        assert!(
            spans_of(&collector, trace).is_empty(),
            "{trace} was exported"
        );
    }
}

#[test]
fn kumas_zipkin_example_exports_zipkin_json_with_b3_propagation() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let _app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (_web, _backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let collector = SpanCollector::start();
    // Kuma's simple Zipkin example, the collector's URL changed.
    let policy = format!(
        "\
type: MeshTrace
name: default
mesh: default
spec:
  targetRef:
    kind: Mesh
  default:
    backends:
      - type: Zipkin
        zipkin:
          url: http://127.0.0.1:{}/api/v2/spans
",
        collector.port()
    );
    cp.cli_stdin(&["apply", "-f", "-"], Some(&policy)).success();
    // Tracing is on in both sidecars once a request's trace has a span
    // from each; the app received B3 headers with it.
    let spans_of = |trace: &str| -> Vec<serde_json::Value> {
        collector
            .zipkin_spans()
            .into_iter()
            .filter(|s| s["traceId"] == trace)
            .collect()
    };
    let mut seen_headers = Vec::new();
    let (headers, spans) = eventually("a trace with both sidecars' spans", READY, || {
        let headers = curl(ports.web_outbound, "/zipkin", &[]).json()["headers"].clone();
        if headers["x-b3-traceid"].is_string() {
            seen_headers.push(headers);
        }
        seen_headers.iter().find_map(|h| {
            let spans = spans_of(h["x-b3-traceid"].as_str()?);
            (spans.len() >= 2).then(|| (h.clone(), spans))
        })
    });
    let trace = headers["x-b3-traceid"].as_str().expect("x-b3-traceid");
    assert_eq!(trace.len(), 16, "64-bit trace IDs by default");
    assert_eq!(headers["x-b3-sampled"], "1");
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let client = spans
        .iter()
        .find(|s| s["kind"] == "CLIENT")
        .expect("client");
    let server = spans
        .iter()
        .find(|s| s["kind"] == "SERVER")
        .expect("server");
    // Zipkin's shared span context (Kuma's default): backend's server
    // span shares web's span ID.
    assert_eq!(server["id"], client["id"]);
    assert_eq!(server["shared"], true);
    assert_eq!(headers["x-b3-spanid"], server["id"]);
    assert_eq!(client["tags"]["http.url"], "/zipkin");
}
