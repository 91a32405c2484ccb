//! Each class of bad MeshHTTPRoute, MeshTCPRoute, MeshTimeout and MeshRetry
//! input is refused with the field path and the message a user sees.

mod support;

use support::errors;

/// A Kuma universal policy of `kind` whose `spec` is `spec` (YAML, indented
/// by two spaces).
fn policy(kind: &str, spec: &str) -> String {
    format!("type: {kind}\nname: p\nmesh: default\nspec:\n{spec}")
}

#[test]
fn misplaced_num_retries_gets_did_you_mean() {
    // Kuma's documented producer example: numRetries directly under
    // default, which Kuma silently ignores.
    let text = "apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata:
  namespace: backend-ns
  name: backend-producer-timeouts
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: MeshService
        name: backend
        namespace: backend-ns
      default:
        numRetries: 3
";
    assert_eq!(
        errors(text),
        [
            "spec.to[0].default.numRetries: unknown field numRetries; did you mean \
          default.http.numRetries? (or default.grpc.numRetries for gRPC)"
        ]
    );
    // A field only one block has gets one suggestion.
    let text = policy(
        "MeshRetry",
        "  to:\n    - targetRef: {kind: Mesh}\n      default:\n        maxConnectAttempt: 5\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].default.maxConnectAttempt: unknown field maxConnectAttempt; did you mean \
          default.tcp.maxConnectAttempt?"
        ]
    );
    // The same for MeshTimeout's http block.
    let text = policy(
        "MeshTimeout",
        "  to:\n    - targetRef: {kind: Mesh}\n      default:\n        requestTimeout: 5s\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].default.requestTimeout: unknown field requestTimeout; did you mean \
          default.http.requestTimeout?"
        ]
    );
}

#[test]
fn unknown_fields_name_their_path() {
    let text = policy(
        "MeshHTTPRoute",
        "  to:\n    - targetRef: {kind: MeshService, name: b}\n      rules:\n        - matches: [{path: {type: Exact, name: /orders}}]\n          default: {}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].rules[0].matches[0].path.name: unknown field `name`, expected `type` or `value`"
        ]
    );
}

#[test]
fn bad_durations_are_refused() {
    let text = policy(
        "MeshTimeout",
        "  to:\n    - targetRef: {kind: Mesh}\n      default:\n        idleTimeout: 1 hour\n        connectionTimeout: 0s\n        http: {requestTimeout: 5sec}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].default.connectionTimeout: must be greater than zero (got \"0s\")",
            "spec.to[0].default.idleTimeout: unparsable duration \"1 hour\"; use a number and a unit (ns, us, ms, s, m, h), e.g. 5s, 1h30m, 250ms or 0s",
            "spec.to[0].default.http.requestTimeout: unparsable duration \"5sec\"; use a number and a unit (ns, us, ms, s, m, h), e.g. 5s, 1h30m, 250ms or 0s",
        ]
    );
}

#[test]
fn regex_bomb_and_bad_regex_are_refused_at_apply_time() {
    let route = |value: &str| {
        policy(
            "MeshHTTPRoute",
            &format!(
                "  to:\n    - targetRef: {{kind: MeshService, name: b}}\n      rules:\n        - matches: [{{path: {{type: RegularExpression, value: '{value}'}}}}]\n          default: {{}}\n"
            ),
        )
    };
    assert_eq!(
        errors(&route("(a{1000}){1000}")),
        [
            "spec.to[0].rules[0].matches[0].path.value: regular expression \"(a{1000}){1000}\" is too large once compiled (over 64 KiB); simplify it, e.g. use fewer or smaller repetition counts"
        ]
    );
    assert_eq!(
        errors(&route("/api/(v1")),
        [
            "spec.to[0].rules[0].matches[0].path.value: invalid regular expression \"/api/(v1\": unclosed group (RE2 syntax)"
        ]
    );
}

#[test]
fn out_of_range_values_are_refused() {
    let text = policy(
        "MeshTCPRoute",
        "  to:\n    - targetRef: {kind: MeshService, name: b}\n      rules:\n        - default:\n            backendRefs:\n              - {kind: MeshService, name: b, weight: -1}\n              - {kind: MeshService, name: c, weight: 4294967296, port: 70000}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].rules[0].default.backendRefs[0].weight: must be between 0 and 4294967295 (got -1)",
            "spec.to[0].rules[0].default.backendRefs[1].port: 70000 is out of range 1-65535",
            "spec.to[0].rules[0].default.backendRefs[1].weight: must be between 0 and 4294967295 (got 4294967296)",
        ]
    );
    let text = policy(
        "MeshRetry",
        "  to:\n    - targetRef: {kind: Mesh}\n      default:\n        http: {numRetries: -2, retryOn: [\"200\", \"5xxx\"]}\n        tcp: {maxConnectAttempt: 0}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].default.tcp.maxConnectAttempt: must be between 1 and 4294967295 (got 0)",
            "spec.to[0].default.http.numRetries: must be between 0 and 4294967295 (got -2)",
            "spec.to[0].default.http.retryOn[0]: status code 200 is out of range; retryOn takes codes from 300 to 599",
            "spec.to[0].default.http.retryOn[1]: unknown HTTP retryOn value \"5xxx\"; expected 5xx, 5XX, GatewayError, Reset, Retriable4xx, ConnectFailure, EnvoyRatelimited, RefusedStream, Http3PostConnectFailure, HttpMethodConnect, HttpMethodDelete, HttpMethodGet, HttpMethodHead, HttpMethodOptions, HttpMethodPatch, HttpMethodPost, HttpMethodPut or HttpMethodTrace or a status code such as \"503\"",
        ]
    );
    let text = policy(
        "MeshHTTPRoute",
        "  to:\n    - targetRef: {kind: MeshService, name: b}\n      rules:\n        - matches: [{path: {type: PathPrefix, value: /a}}]\n          default:\n            filters:\n              - type: RequestMirror\n                requestMirror: {percentage: 150, backendRef: {kind: MeshService, name: m}}\n              - type: RequestRedirect\n                requestRedirect: {statusCode: 200}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].rules[0].default.filters[0].requestMirror.percentage: must be between 0 and 100 (got 150)",
            "spec.to[0].rules[0].default.filters[1].requestRedirect.statusCode: must be 301, 302, 303, 307 or 308 (got 200)",
        ]
    );
}

#[test]
fn target_refs_are_checked_per_position() {
    let text = policy(
        "MeshHTTPRoute",
        "  to:\n    - targetRef: {kind: Mesh}\n      rules: []\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].targetRef.kind: Mesh is not allowed here (as in Kuma); expected MeshService, MeshExternalService or MeshMultiZoneService"
        ]
    );
    let text = policy(
        "MeshRetry",
        "  to:\n    - targetRef: {kind: MeshGateway}\n      default: {tcp: {maxConnectAttempt: 1}}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].targetRef.kind: unknown targetRef kind \"MeshGateway\"; expected Mesh, MeshService, MeshExternalService, MeshMultiZoneService or MeshHTTPRoute"
        ]
    );
    let text = policy(
        "MeshRetry",
        "  to:\n    - targetRef: {kind: MeshService}\n      default: {tcp: {maxConnectAttempt: 1}}\n",
    );
    assert_eq!(
        errors(&text),
        [
            "spec.to[0].targetRef.name: required when kind is MeshService: its name (or select by labels)"
        ]
    );
}

#[test]
fn a_misplaced_block_or_empty_policy_says_what_is_needed() {
    assert_eq!(
        errors(&policy("MeshRetry", "  targetRef: {kind: Mesh}\n")),
        [
            "spec.to: at least one entry is required (as in Kuma), e.g. to: [{targetRef: {kind: Mesh}, default: {http: {numRetries: 3}}}]"
        ]
    );
    assert_eq!(
        errors(&policy("MeshTimeout", "  targetRef: {kind: Mesh}\n")),
        [
            "spec: at least one of to, from or rules is required, e.g. to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1h}}]"
        ]
    );
}

#[test]
fn bad_mesh_rate_limits_name_the_field() {
    let from = |default: &str| {
        policy(
            "MeshRateLimit",
            &format!("  from:\n    - targetRef: {{kind: Mesh}}\n      default:\n{default}"),
        )
    };
    assert_eq!(
        errors(&from(
            "        local:\n          http:\n            requestRate: {num: 0, interval: 10ms}\n            onRateLimit: {status: 200}\n"
        )),
        [
            "spec.from[0].default.local.http.requestRate.num: must be at least 1",
            "spec.from[0].default.local.http.requestRate.interval: \"10ms\" is shorter than 50ms, \
             the least Envoy accepts",
            "spec.from[0].default.local.http.onRateLimit.status: 200 is not an error status; use \
             400-599 (default 429)",
        ]
    );
    assert_eq!(
        errors(&from("        local:\n          http: {}\n")),
        [
            "spec.from[0].default.local.http.requestRate: required unless disabled: true, e.g. \
             {num: 5, interval: 10s}"
        ]
    );
    // Disabling needs no rate; an unknown field is refused with its path.
    assert!(errors(&from("        local:\n          http: {disabled: true}\n")).is_empty());
    let e = errors(&from(
        "        local:\n          http:\n            requestRate: {num: 5, interval: 10s, burst: 2}\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.from[0].default.local.http.requestRate.burst: unknown field"),
        "{e:?}"
    );
    assert_eq!(
        errors(&policy("MeshRateLimit", "  targetRef: {kind: Mesh}\n")),
        [
            "spec: at least one of from, to or rules is required, e.g. from: [{targetRef: {kind: \
             Mesh}, default: {local: {http: {requestRate: {num: 5, interval: 10s}}}}}]"
        ]
    );
}

#[test]
fn bad_mesh_circuit_breakers_name_the_field() {
    let to = |default: &str| {
        policy(
            "MeshCircuitBreaker",
            &format!("  to:\n    - targetRef: {{kind: Mesh}}\n      default:\n{default}"),
        )
    };
    assert_eq!(
        errors(&to(
            "        connectionLimits: {maxRequests: 0, maxConnectionPools: 4}\n        \
             outlierDetection:\n          interval: 0s\n          maxEjectionPercent: 120\n          \
             healthyPanicThreshold: \"x\"\n          detectors:\n            totalFailures: \
             {consecutive: 0}\n            successRate: {standardDeviationFactor: \"-1\"}\n            \
             failurePercentage: {threshold: 101}\n"
        )),
        [
            "spec.to[0].default.connectionLimits.maxRequests: must be greater than zero",
            "spec.to[0].default.connectionLimits.maxConnectionPools: not supported: meshlink-proxy \
             keeps one connection pool per endpoint; remove it (maxConnections bounds the \
             connections)",
            "spec.to[0].default.outlierDetection.interval: must be greater than zero, e.g. 10s",
            "spec.to[0].default.outlierDetection.maxEjectionPercent: 120 is not a percentage; use \
             0-100",
            "spec.to[0].default.outlierDetection.healthyPanicThreshold: must be a percentage from \
             0 to 100, e.g. 50",
            "spec.to[0].default.outlierDetection.detectors.totalFailures.consecutive: must be \
             greater than zero",
            "spec.to[0].default.outlierDetection.detectors.successRate.standardDeviationFactor: \
             must be a number greater than zero, e.g. 1.9",
            "spec.to[0].default.outlierDetection.detectors.failurePercentage.threshold: 101 is not \
             a percentage; use 0-100",
        ]
    );
    assert_eq!(
        errors(&to("        outlierDetection: {interval: 5s}\n")),
        [
            "spec.to[0].default.outlierDetection.detectors: required: set at least one of \
             totalFailures, gatewayFailures, localOriginFailures, successRate, failurePercentage"
        ]
    );
    assert_eq!(
        errors(&to("        {}\n")),
        [
            "spec.to[0].default: set connectionLimits, outlierDetection or both, e.g. \
             connectionLimits: {maxRequests: 1024}"
        ]
    );
    // An unknown field is refused with its path; from[] takes Mesh only.
    let e = errors(&to("        connectionLimits: {maxRequest: 5}\n"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.to[0].default.connectionLimits.maxRequest: unknown field"),
        "{e:?}"
    );
    let e = errors(&policy(
        "MeshCircuitBreaker",
        "  from:\n    - targetRef: {kind: MeshService, name: web}\n      default: \
         {connectionLimits: {maxRequests: 5}}\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("spec.from[0].targetRef.kind:"), "{e:?}");
    assert_eq!(
        errors(&policy("MeshCircuitBreaker", "  targetRef: {kind: Mesh}\n")),
        [
            "spec: at least one of to, from or rules is required, e.g. to: [{targetRef: {kind: \
             Mesh}, default: {connectionLimits: {maxRequests: 1024}}}]"
        ]
    );
}
