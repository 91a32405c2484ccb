//! MeshMetric (issue 36) with real binaries: backend-1's sidecar serves
//! every family of its own before the policy; a MeshMetric (Kuma's shape:
//! the `Basic` profile, an `exclude` and an `include`, an application and
//! a Prometheus backend) makes its `/metrics` keep only the Basic
//! families, honour the rules, and carry the application's lines
//! verbatim, on the admin port and on the backend's port and path.
//! Moving the backend's port and path moves the endpoint; an application
//! that stops answering costs the scrape nothing but its own lines (a
//! comment and a counter say why); a TLS mode meshlink-proxy cannot serve
//! is NACKed with the field; deleting the policy brings everything back.
//! An OpenTelemetry backend is pushed the same families and the
//! application's metrics, decoded here with the OTLP schema.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::Duration;

use meshlink_e2e::app::http_get;
use meshlink_e2e::curl::curl;
use meshlink_e2e::http_backend::HttpBackend;
use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::span_collector::SpanCollector;
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message as _;

const READY: Duration = Duration::from_secs(30);

/// The application's own metrics, as it serves them.
const APP_METRICS: &str = "\
# HELP shop_orders_total Orders placed.
# TYPE shop_orders_total counter
shop_orders_total{region=\"eu\"} 42
";

/// Families of the Basic profile the test's traffic moves.
const BASIC: [&str; 4] = [
    "meshlink_proxy_connections_total{",
    "meshlink_proxy_http_requests_total{",
    "meshlink_proxy_listener_rx_bytes_total{",
    "meshlink_proxy_cert_expiry_seconds ",
];

/// Families Basic hides (docs/operations.md#metrics).
const HIDDEN: [&str; 4] = [
    "meshlink_proxy_xds_updates_total{",
    "meshlink_proxy_cert_rotations_total ",
    "meshlink_proxy_listeners_warming ",
    "meshlink_proxy_trace_spans_dropped_total ",
];

/// An application serving [`APP_METRICS`] on every request, on a thread
/// that lives as long as the test (dropping the returned listener's
/// clone is not needed: the test ends with the process).
fn metrics_app() -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the app");
    let port = listener.local_addr().expect("addr").port();
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = down.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let answer = if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{APP_METRICS}",
                    APP_METRICS.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, down)
}

/// The MeshMetric for backend-1: Basic, less the request-duration
/// histogram, plus `include` (`extra_include`: more entries), the
/// application on `app`, the Prometheus backend on `port` and `path`.
fn policy(app: u16, port: u16, path: &str, extra_include: &str, tls: &str) -> String {
    format!(
        "\
type: MeshMetric
mesh: default
name: metrics-for-backend
spec:
  targetRef:
    kind: Dataplane
    name: backend-1
  default:
    sidecar:
      includeUnused: true
      profiles:
        appendProfiles:
          - name: Basic
        exclude:
          - type: Regex
            match: \"meshlink_proxy_http_request_duration_seconds.*\"
        include:
          - type: Exact
            match: \"meshlink_proxy_xds_rejected_total\"{extra_include}
    applications:
      - path: \"/metrics\"
        port: {app}
    backends:
      - type: Prometheus
        prometheus:
          port: {port}
          path: \"{path}\"{tls}
"
    )
}

fn scrape(sidecar: &Sidecar) -> String {
    sidecar.admin_get("/metrics").1
}

fn has_all(text: &str, series: &[&str]) -> bool {
    series.iter().all(|s| text.contains(s))
}

fn has_none(text: &str, series: &[&str]) -> bool {
    series.iter().all(|s| !text.contains(s))
}

/// The HTTP pair with traffic through it, and the metrics app.
struct Mesh {
    cp: ControlPlane,
    backend: Sidecar,
    app_port: u16,
    app_down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    _web: Sidecar,
    _backend_app: HttpBackend,
    _tokens: tempfile::TempDir,
}

fn mesh() -> Mesh {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    let yaml = proxy::pair_yaml_speaking(&ports, "1h", "http", &["web", "backend"]);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml)).success();
    let backend_app = HttpBackend::start("backend", ports.backend_app);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let (app_port, app_down) = metrics_app();
    for i in 0..5 {
        assert_eq!(curl(ports.web_outbound, &format!("/r{i}"), &[]).status, 200);
    }
    Mesh {
        cp,
        backend,
        app_port,
        app_down,
        _web: web,
        _backend_app: backend_app,
        _tokens: tokens,
    }
}

#[test]
fn basic_hides_what_the_docs_say_and_applications_are_served_beside_the_sidecar() {
    let mesh = mesh();
    let (cp, backend, app_port) = (&mesh.cp, &mesh.backend, mesh.app_port);

    // Before the policy: every family, the application's lines nowhere.
    let before = eventually("every family before the policy", READY, || {
        let text = scrape(backend);
        (has_all(&text, &BASIC) && has_all(&text, &HIDDEN)).then_some(text)
    });
    assert!(before.contains("meshlink_proxy_http_request_duration_seconds_bucket{"));
    assert!(!before.contains("shop_orders_total"));

    let prom = free_port();
    let applied = policy(app_port, prom, "/metrics", "", "");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&applied))
        .success();
    let after = eventually("the Basic profile on /metrics", READY, || {
        let text = scrape(backend);
        (has_none(&text, &HIDDEN) && text.contains("shop_orders_total")).then_some(text)
    });
    assert!(has_all(&after, &BASIC), "Basic families missing:\n{after}");
    assert!(
        !after.contains("meshlink_proxy_http_request_duration_seconds"),
        "exclude not honoured:\n{after}"
    );
    assert!(
        after.contains("meshlink_proxy_xds_rejected_total{type=\"Listener\"}"),
        "include not honoured:\n{after}"
    );
    assert!(
        after.contains(APP_METRICS),
        "the app's lines verbatim:\n{after}"
    );

    // The Prometheus backend serves the same text on its port and path.
    let served = eventually("the Prometheus endpoint", READY, || {
        http_get(prom, "/metrics").ok().filter(|r| r.status == 200)
    });
    let text = served.text();
    assert!(
        text.contains(APP_METRICS) && has_none(&text, &HIDDEN),
        "{text}"
    );
    assert_eq!(http_get(prom, "/other").expect("404").status, 404);

    // Moving the backend moves the endpoint; the app stops answering:
    // the scrape keeps the sidecar's families, says why, and counts it.
    let (moved, path) = (free_port(), "/stats/prometheus");
    let scrape_errors = "\n          - type: Prefix\n            match: meshlink_proxy_app_scrape_";
    let applied = policy(app_port, moved, path, scrape_errors, "");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&applied))
        .success();
    mesh.app_down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let text = eventually("the moved endpoint", READY, || {
        http_get(moved, path).ok().filter(|r| r.status == 200)
    })
    .text();
    eventually("the old port closed", READY, || {
        http_get(prom, "/metrics").is_err().then_some(())
    });
    let failed = eventually("the failed scrape reported", READY, || {
        let text = http_get(moved, path).ok()?.text();
        text.contains("meshlink_proxy_app_scrape_errors_total{")
            .then_some(text)
    });
    assert!(has_all(&failed, &BASIC), "{failed}");
    assert!(!failed.contains("shop_orders_total{"), "{failed}");
    assert!(
        failed.contains(&format!(
            "# meshlink: application \"127.0.0.1:{app_port}\" (http://127.0.0.1:{app_port}/metrics) not scraped: it answered 503"
        )),
        "{failed}"
    );
    assert!(text.contains("meshlink_proxy_connections_total{"), "{text}");
    assert!(backend.metric("meshlink_proxy_app_scrape_errors_total{") >= 1.0);

    // A TLS mode meshlink-proxy cannot serve is refused with the field,
    // and the last good policy stays.
    let tls = "\n          tls:\n            mode: ProvidedTLS";
    let applied = policy(app_port, moved, path, scrape_errors, tls);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&applied))
        .success();
    let rejected = eventually("the NACK", READY, || {
        let dump = backend.config_dump();
        let text = dump["xds"].to_string();
        text.contains("tls_mode").then_some(text)
    });
    assert!(rejected.contains("use Disabled"), "{rejected}");
    assert_eq!(http_get(moved, path).expect("still served").status, 200);

    // Deleting the policy brings every family back and closes the port.
    cp.cli(&[
        "delete",
        "meshmetric",
        "metrics-for-backend",
        "-m",
        "default",
    ])
    .success();
    let back = eventually("every family after the delete", READY, || {
        let text = scrape(backend);
        has_all(&text, &HIDDEN).then_some(text)
    });
    assert!(has_all(&back, &BASIC), "{back}");
    assert!(back.contains("meshlink_proxy_http_request_duration_seconds_bucket{"));
    assert!(!back.contains("shop_orders_total"), "{back}");
    eventually("the endpoint closed", READY, || {
        http_get(moved, path).is_err().then_some(())
    });
}

/// Kuma's OpenTelemetry example (its endpoint a URL, so OTLP/HTTP, and a
/// short `refreshInterval`), with the Basic profile and the application.
fn otel_policy(app: u16, endpoint: &str) -> String {
    format!(
        "\
type: MeshMetric
mesh: default
name: otel-for-backend
spec:
  targetRef:
    kind: Dataplane
    name: backend-1
  default:
    sidecar:
      profiles:
        appendProfiles:
          - name: Basic
    applications:
      - path: \"/metrics\"
        port: {app}
    backends:
      - type: OpenTelemetry
        openTelemetry:
          endpoint: {endpoint}
          refreshInterval: 1s
"
    )
}

#[test]
fn an_opentelemetry_backend_is_pushed_the_profile_and_the_applications() {
    let mesh = mesh();
    let collector = SpanCollector::start();
    let endpoint = format!("http://127.0.0.1:{}", collector.port());
    let applied = otel_policy(mesh.app_port, &endpoint);
    mesh.cp
        .cli_stdin(&["apply", "-f", "-"], Some(&applied))
        .success();
    let request = eventually("an OTLP metrics push with the app's metrics", READY, || {
        collector
            .exports()
            .into_iter()
            .filter(|e| e.path == "/v1/metrics")
            .filter_map(|e| ExportMetricsServiceRequest::decode(e.body.as_slice()).ok())
            .find(|r| format!("{r:?}").contains("shop_orders_total"))
    });
    let resource = &request.resource_metrics[0];
    assert!(
        format!("{:?}", resource.resource).contains("default.backend-1"),
        "service.name: {:?}",
        resource.resource
    );
    let metrics = &resource.scope_metrics[0].metrics;
    let named = |name: &str| metrics.iter().find(|m| m.name == name);
    let requests = named("meshlink_proxy_http_requests").expect("Basic's requests");
    let Some(metric::Data::Sum(sum)) = &requests.data else {
        panic!("a counter is a Sum: {requests:?}");
    };
    let total: f64 = sum
        .data_points
        .iter()
        .filter_map(|p| match p.value {
            Some(number_data_point::Value::AsDouble(v)) => Some(v),
            _ => None,
        })
        .sum();
    assert_eq!(total, 5.0, "the five requests: {sum:?}");
    let duration = named("meshlink_proxy_http_request_duration_seconds").expect("latency");
    let Some(metric::Data::Histogram(h)) = &duration.data else {
        panic!("a histogram: {duration:?}");
    };
    assert_eq!(h.data_points[0].count, 5, "{h:?}");
    assert!(
        named("meshlink_proxy_xds_updates").is_none(),
        "Basic hides it"
    );
    // Without includeUnused, a Basic family whose every series is 0 (no
    // endpoint was ejected) is left out.
    assert!(
        named("meshlink_proxy_outlier_ejections").is_none(),
        "{:?}",
        named("meshlink_proxy_outlier_ejections")
    );
    let orders = named("shop_orders_total").expect("the app's metric");
    assert!(format!("{orders:?}").contains("42.0"), "{orders:?}");
}
