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
fn bad_mesh_access_logs_name_the_field_and_the_operator() {
    let from = |backends: &str| {
        policy(
            "MeshAccessLog",
            &format!(
                "  from:\n    - targetRef: {{kind: Mesh}}\n      default:\n        backends:\n{backends}"
            ),
        )
    };
    let e = errors(&from(
        "          - type: File\n            file:\n              path: /tmp/a.log\n              format: {type: Plain, plain: '%START_TIME% %UPSTREAM_HOSTNAME%'}\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "spec.from[0].default.backends[0].file.format.plain: unknown command operator \
             %UPSTREAM_HOSTNAME%; meshlink supports START_TIME, REQ,"
        ),
        "{e:?}"
    );
    assert_eq!(
        errors(&from(
            "          - type: Tcp\n            file: {path: /tmp/a.log}\n            tcp: {address: 'logs:0'}\n          - type: Syslog\n"
        )),
        [
            "spec.from[0].default.backends[0].file: set, but type is Tcp: set only tcp",
            "spec.from[0].default.backends[0].tcp.address: \"logs:0\" is not host:port, e.g. \
             127.0.0.1:5000",
            "spec.from[0].default.backends[1].type: \"Syslog\" is not a backend type; use File, \
             Tcp or OpenTelemetry",
        ]
    );
    assert_eq!(
        errors(&from(
            "          - type: File\n            file:\n              path: /tmp/a.log\n              format: {type: Json, json: [{key: code, value: '%REQ%'}]}\n"
        )),
        [
            "spec.from[0].default.backends[0].file.format.json[0].value: %REQ% needs a header \
             name, e.g. %REQ(X-REQUEST-ID)%"
        ]
    );
    let e = errors(&from(
        "          - type: File\n            file: {path: /tmp/a.log, rotate: daily}\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.from[0].default.backends[0].file.rotate: unknown field"),
        "{e:?}"
    );
}

#[test]
fn bad_load_balancing_strategies_name_the_field() {
    let to = |lb: &str| {
        policy(
            "MeshLoadBalancingStrategy",
            &format!(
                "  to:\n    - targetRef: {{kind: MeshService, name: backend}}\n      default:\n        loadBalancer:\n{lb}"
            ),
        )
    };
    // Kuma's documented Maglev example has a table size Envoy refuses.
    assert_eq!(
        errors(&to(
            "          type: Maglev\n          maglev:\n            tableSize: 1000\n            hashPolicies:\n              - {type: Header, terminal: true, header: {name: x-header}}\n"
        )),
        [
            "spec.to[0].default.loadBalancer.maglev.tableSize: 1000 is not a prime up to 5000011 (e.g. 65537)"
        ]
    );
    assert_eq!(
        errors(&to(
            "          type: RingHash\n          leastRequest: {choiceCount: 1}\n          ringHash:\n            hashFunction: CRC32\n            minRingSize: 2048\n            maxRingSize: 1024\n            hashPolicies:\n              - {type: Header}\n              - {type: Body, header: {name: x}}\n"
        )),
        [
            "spec.to[0].default.loadBalancer.leastRequest: set, but type is RingHash: set ringHash or nothing",
            "spec.to[0].default.loadBalancer.leastRequest.choiceCount: must be at least 2",
            "spec.to[0].default.loadBalancer.ringHash.hashFunction: \"CRC32\" is not a hash function; use XXHash or MurmurHash2",
            "spec.to[0].default.loadBalancer.ringHash.minRingSize: 2048 is above maxRingSize 1024",
            "spec.to[0].default.loadBalancer.ringHash.hashPolicies[0].header: required when type is Header",
            "spec.to[0].default.loadBalancer.ringHash.hashPolicies[1].type: \"Body\" is not a hash policy; use Header, Cookie, Connection, QueryParameter or FilterState",
        ]
    );
    assert_eq!(
        errors(&to("          type: Fastest\n")),
        [
            "spec.to[0].default.loadBalancer.type: \"Fastest\" is not a load balancer; use RoundRobin, LeastRequest, RingHash, Random or Maglev"
        ]
    );
}

#[test]
fn bad_health_checks_name_the_field() {
    let to = |default: &str| {
        policy(
            "MeshHealthCheck",
            &format!(
                "  to:\n    - targetRef: {{kind: MeshService, name: backend}}\n      default:\n{default}"
            ),
        )
    };
    assert_eq!(
        errors(&to(
            "        interval: 0s\n        unhealthyThreshold: 0\n        intervalJitterPercent: 150\n        tcp: {send: 'not base64!'}\n        http: {path: health, expectedStatuses: [200, 700]}\n"
        )),
        [
            "spec.to[0].default.interval: must be greater than zero (got \"0s\")",
            "spec.to[0].default.unhealthyThreshold: must be at least 1",
            "spec.to[0].default.intervalJitterPercent: must be 0 to 100",
            "spec.to[0].default.tcp.send: not base64",
            "spec.to[0].default.http.path: \"health\" must start with /",
            "spec.to[0].default.http.expectedStatuses[1]: 700 is not an HTTP status (100-599)",
        ]
    );
}

#[test]
fn bad_mesh_metrics_name_the_field() {
    let spec = "  default:\n    sidecar:\n      profiles:\n        appendProfiles: [{name: Most}]\n        exclude: [{type: Glob, match: 'envoy_*'}]\n    applications: [{port: 0, path: metrics}]\n    backends:\n      - {type: Prometheus, prometheus: {port: 5670, path: /metrics, tls: {mode: Mutual}}}\n      - {type: OpenTelemetry}\n      - {type: Statsd}\n";
    assert_eq!(
        errors(&policy("MeshMetric", spec)),
        [
            "spec.default.sidecar.profiles.appendProfiles[0].name: \"Most\" is not a profile; use All, Basic or None",
            "spec.default.sidecar.profiles.exclude[0].type: \"Glob\" is not a match type; use Prefix, Regex, Exact or Contains",
            "spec.default.applications[0].port: must be 1 to 65535",
            "spec.default.applications[0].path: \"metrics\" must start with /",
            "spec.default.backends[0].prometheus.tls.mode: \"Mutual\" is not a TLS mode; use Disabled, ProvidedTLS or ActiveMTLSBackend",
            "spec.default.backends[1].openTelemetry: required when type is OpenTelemetry",
            "spec.default.backends[2].type: \"Statsd\" is not a backend type; use Prometheus or OpenTelemetry",
        ]
    );
}

#[test]
fn bad_mesh_fault_injections_name_the_field() {
    let from = |http: &str| {
        policy(
            "MeshFaultInjection",
            &format!(
                "  from:\n    - targetRef: {{kind: Mesh}}\n      default:\n        http:\n{http}"
            ),
        )
    };
    assert_eq!(
        errors(&from(
            "          - abort: {httpStatus: 100, percentage: 101}\n            \
             delay: {value: 0s, percentage: \"x\"}\n            \
             responseBandwidth: {limit: 10bps, percentage: \"-1\"}\n          - {}\n"
        )),
        [
            "spec.from[0].default.http[0].abort.httpStatus: 100 is not a status Envoy's fault \
             filter can answer with; use 200-599",
            "spec.from[0].default.http[0].abort.percentage: 101 is not a percentage; use a number \
             from 0 to 100, e.g. 50 or \"2.5\"",
            "spec.from[0].default.http[0].delay.value: must be greater than zero (Envoy refuses a \
             zero fixed delay), e.g. 5s",
            "spec.from[0].default.http[0].delay.percentage: \"x\" is not a percentage; use a \
             number from 0 to 100, e.g. 50 or \"2.5\"",
            "spec.from[0].default.http[0].responseBandwidth.limit: \"10bps\" is not a bandwidth; \
             use a whole number and Gbps, Mbps or kbps, e.g. 50Mbps or 10kbps",
            "spec.from[0].default.http[0].responseBandwidth.percentage: \"-1\" is not a \
             percentage; use a number from 0 to 100, e.g. 50 or \"2.5\"",
            "spec.from[0].default.http[1]: set abort, delay, responseBandwidth or several of them",
        ]
    );
    // Kuma's int-or-string: an unquoted decimal is refused with the fix.
    let e = errors(&from("          - delay: {value: 5s, percentage: 50.5}\n"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.from[0].default.http[0].delay.percentage: ")
            && e[0].contains("in quotes"),
        "{e:?}"
    );
    // An unknown field is refused with its path.
    let e = errors(&from(
        "          - abort: {httpStatus: 500, percentage: 50, grpcStatus: 14}\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.from[0].default.http[0].abort.grpcStatus: unknown field"),
        "{e:?}"
    );
    // Kuma's universal "delayed by 5s" example names its Mesh, which
    // Kuma refuses too.
    let e = errors(&policy(
        "MeshFaultInjection",
        "  from:\n    - targetRef: {kind: Mesh, name: default}\n      default:\n        http:\n          \
         - delay: {percentage: \"50.5\", value: 5s}\n",
    ));
    assert_eq!(
        e,
        ["spec.from[0].targetRef.name: not allowed when kind is Mesh"]
    );
    assert_eq!(
        errors(&policy("MeshFaultInjection", "  targetRef: {kind: Mesh}\n")),
        [
            "spec: at least one of from or to is required, e.g. from: [{targetRef: {kind: Mesh}, \
             default: {http: [{abort: {httpStatus: 500, percentage: 50}}]}}]"
        ]
    );
    assert_eq!(
        errors(&policy(
            "MeshFaultInjection",
            "  from:\n    - targetRef: {kind: Mesh}\n      default: {}\n"
        )),
        [
            "spec.from[0].default.http: required: the list of HTTP faults, e.g. [{abort: \
             {httpStatus: 500, percentage: 50}}]"
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
