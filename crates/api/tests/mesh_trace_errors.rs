//! Each class of bad MeshTrace input is refused with the field path and
//! the message a user sees; Kuma's older form (no backend `type`) and
//! percentages as strings are accepted.

mod support;

use support::errors;

/// A universal MeshTrace whose `default` is `conf` (YAML, indented by four
/// spaces).
fn trace(conf: &str) -> String {
    format!(
        "type: MeshTrace\nname: t\nmesh: default\nspec:\n  targetRef: {{kind: Mesh}}\n  default:\n{conf}"
    )
}

const OTEL: &str = "    backends:\n      - type: OpenTelemetry\n        openTelemetry: {endpoint: 'collector:4317'}\n";

#[test]
fn backends_name_the_type_block_and_address() {
    assert_eq!(
        errors(&trace(
            "    backends:\n      - type: Zipkin\n        zipkin: {url: 'http://a:9411/api/v2/spans'}\n      - type: Zipkin\n        zipkin: {url: 'http://b:9411/api/v2/spans'}\n"
        )),
        ["spec.default.backends: 2 backends; a proxy sends its spans to one backend: keep one"]
    );
    assert_eq!(
        errors(&trace(
            "    backends:\n      - type: Zipkin\n        datadog: {url: 'http://a:8126'}\n"
        )),
        [
            "spec.default.backends[0].zipkin: required when type is Zipkin",
            "spec.default.backends[0].datadog: set, but type is Zipkin: set only zipkin",
        ]
    );
    assert_eq!(
        errors(&trace("    backends:\n      - type: Jaeger\n")),
        [
            "spec.default.backends[0].type: \"Jaeger\" is not a backend type; use Zipkin, \
             Datadog or OpenTelemetry"
        ]
    );
    assert_eq!(
        errors(&trace(
            "    backends:\n      - zipkin: {url: 'jaeger:9411', apiVersion: grpc}\n"
        )),
        [
            "spec.default.backends[0].zipkin.url: \"jaeger:9411\" is not an http URL, e.g. \
             http://jaeger-collector:9411/api/v2/spans",
            "spec.default.backends[0].zipkin.apiVersion: \"grpc\" is not a Zipkin API version; \
             use httpJson or httpProto",
        ]
    );
    assert_eq!(
        errors(&trace(
            "    backends:\n      - datadog: {url: 'http://agent:8126/v0.4/traces'}\n"
        )),
        [
            "spec.default.backends[0].datadog.url: \"http://agent:8126/v0.4/traces\" is not \
             http://host:port (a port, no path), e.g. http://127.0.0.1:8126"
        ]
    );
    assert_eq!(
        errors(&trace(
            "    backends:\n      - openTelemetry: {endpoint: collector}\n"
        )),
        [
            "spec.default.backends[0].openTelemetry.endpoint: \"collector\" is neither host:port \
             (OTLP/gRPC, e.g. otel-collector:4317) nor an http(s) URL (OTLP/HTTP, e.g. \
             http://otel-collector:4318)"
        ]
    );
    assert_eq!(
        errors(&trace(
            "    backends:\n      - openTelemetry: {endpoint: 'collector:4317', protocol: grpc}\n"
        )),
        [
            "spec.default.backends[0].openTelemetry.protocol: unknown field `protocol`, expected `endpoint`"
        ]
    );
}

#[test]
fn sampling_is_a_percentage_and_tags_set_one_source() {
    assert_eq!(
        errors(&trace(&format!(
            "{OTEL}    sampling: {{overall: 101, client: 'ten', random: '0.5'}}\n"
        ))),
        [
            "spec.default.sampling.overall: 101 is not a percentage between 0 and 100",
            "spec.default.sampling.client: \"ten\" is not a percentage between 0 and 100",
        ]
    );
    assert_eq!(
        errors(&trace(&format!("{OTEL}    sampling: {{overall: 0.5}}\n"))),
        [
            "spec.default.sampling.overall: 0.5 is not a percentage; use an integer 0-100 or a \
             decimal string, e.g. 80 or \"0.5\""
        ]
    );
    assert_eq!(
        errors(&trace(&format!(
            "{OTEL}    tags:\n      - name: team\n      - name: env\n        literal: prod\n        header: {{name: x-env}}\n      - name: ''\n        header: {{name: 'x env'}}\n"
        ))),
        [
            "spec.default.tags[0]: set literal (a fixed value) or header (a request header's \
             value)",
            "spec.default.tags[1]: both literal and header are set; set one (a fixed value or a \
             header's)",
            "spec.default.tags[2].name: required",
            "spec.default.tags[2].header.name: \"x env\" is not a header name",
        ]
    );
    assert_eq!(
        errors(&trace(&format!("{OTEL}    sampling: {{always: 10}}\n"))),
        [
            "spec.default.sampling.always: unknown field `always`, expected one of `overall`, \
             `client`, `random`"
        ]
    );
}

#[test]
fn a_trace_needs_its_default_and_a_top_level_target() {
    assert_eq!(
        errors("type: MeshTrace\nname: t\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n"),
        [
            "spec.default: required, e.g. default: {backends: [{type: OpenTelemetry, \
             openTelemetry: {endpoint: otel-collector:4317}}]}"
        ]
    );
    let e = errors(
        "type: MeshTrace\nname: t\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: Mesh}\n      default: {}\n",
    );
    assert_eq!(
        e,
        ["spec.to: unknown field `to`, expected `targetRef` or `default`"]
    );
}
