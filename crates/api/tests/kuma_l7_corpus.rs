//! Kuma's documented examples of its routes and of its resilience and
//! observability policies (one file each in `kuma_l7_corpus/`, including the default
//! policies Kuma creates in every mesh, in universal and Kubernetes form)
//! apply as they would through `meshlink apply`: each parses and validates
//! with no warning but the documented one for a Kubernetes
//! `metadata.namespace`, is stored as the canonical resource in
//! `kuma_l7_corpus/stored/`, and that canonical YAML (what `get -o yaml`
//! prints) parses back to the same resource.
//!
//! `UPDATE_CORPUS=1 cargo test -p meshlink-api --test kuma_l7_corpus`
//! rewrites the stored files; review the diff.

mod support;

use std::path::PathBuf;

use meshlink_api::policy::{PolicyInput, Section, merge};
use meshlink_api::spec::{RetryConf, TimeoutConf};
use meshlink_api::{Kind, Resource};

fn corpus_dir() -> PathBuf {
    support::manifest_dir().join("tests/kuma_l7_corpus")
}

/// Kubernetes namespaces are not modelled yet (a documented warning).
const ALLOWED_WARNINGS: [&str; 1] = ["metadata.namespace: not implemented yet"];

/// The one resource `text` holds, parsed and validated as `apply` does.
fn apply(name: &str, text: &str) -> Resource {
    support::corpus::apply(name, text, &ALLOWED_WARNINGS)
}

fn read(name: &str) -> Resource {
    apply(
        name,
        &std::fs::read_to_string(corpus_dir().join(name)).unwrap(),
    )
}

#[test]
fn every_documented_l7_policy_applies_and_its_canonical_yaml_reapplies_unchanged() {
    let kinds: Vec<Kind> = support::corpus::check_all(&corpus_dir(), 66, &ALLOWED_WARNINGS)
        .iter()
        .map(Resource::kind)
        .collect();
    for kind in [
        Kind::MeshHTTPRoute,
        Kind::MeshTCPRoute,
        Kind::MeshTimeout,
        Kind::MeshRetry,
        Kind::MeshRateLimit,
        Kind::MeshAccessLog,
        Kind::MeshLoadBalancingStrategy,
        Kind::MeshHealthCheck,
        Kind::MeshMetric,
        Kind::MeshFaultInjection,
        Kind::MeshCircuitBreaker,
        Kind::MeshTrace,
    ] {
        assert!(kinds.contains(&kind), "no {kind} in the corpus");
    }
}

#[test]
fn kubernetes_and_universal_defaults_are_the_same_resource() {
    for kind in ["mtimeout", "mretry", "mcb"] {
        let uni = read(&format!("{kind}-all-default.universal.yaml"));
        let kube = read(&format!("{kind}-all-default.kubernetes.yaml"));
        assert_eq!(uni.mesh(), Some("default"));
        assert!(uni.same_desired_state(&kube), "{kind}: {uni:?} != {kube:?}");
    }
}

#[test]
fn shadow_label_is_kept_and_marks_the_policy() {
    let r = read("mretry-every-field.universal.yaml");
    assert_eq!(
        r.labels().get("kuma.io/effect").map(String::as_str),
        Some("shadow")
    );
    let input = PolicyInput::from_resource(&r).unwrap();
    assert!(input.is_shadow());
    assert!(r.to_yaml().contains("kuma.io/effect: shadow"));
}

/// Kuma's two default policies and a user policy for one service merge as
/// Kuma documents: the service's entry wins where it sets a field, the
/// defaults fill the rest.
#[test]
fn defaults_merge_under_a_users_policy() {
    let default_retry =
        PolicyInput::from_resource(&read("mretry-all-default.universal.yaml")).unwrap();
    let user = PolicyInput::from_resource(&read("mretry-http.universal.yaml")).unwrap();
    let merged = merge(Kind::MeshRetry, &[user, default_retry], Section::To);
    let backend = merged
        .applied
        .merged_where(|e| e.key["kind"] == "Mesh" || e.key["name"] == "backend")
        .unwrap();
    let conf: RetryConf = backend.typed().unwrap();
    let http = conf.http.unwrap();
    assert_eq!(http.num_retries, Some(10));
    assert_eq!(http.per_try_timeout.as_deref(), Some("16s"));
    assert_eq!(http.retry_on, Some(vec!["5xx".to_string()]));
    assert_eq!(
        backend.origins["/http/numRetries"].policy,
        "frontend-to-backend-retry-http"
    );
    assert_eq!(
        backend.origins["/http/perTryTimeout"].policy,
        "mesh-retry-all-default"
    );
    assert_eq!(conf.tcp.unwrap().max_connect_attempt, Some(5));

    let timeout = PolicyInput::from_resource(&read("mtimeout-all-default.universal.yaml")).unwrap();
    let inbound = merge(Kind::MeshTimeout, &[timeout], Section::From);
    let conf: TimeoutConf = inbound.applied.by_key()[0].1.typed().unwrap();
    assert_eq!(conf.idle_timeout.as_deref(), Some("2h"));
}

/// The documented defaults meshlink exposes are those of Kuma's default
/// policies.
#[test]
fn exposed_defaults_match_kumas_default_policies() {
    use meshlink_api::spec::{
        GrpcRetryOn, TimeoutDefaults, default_grpc_retry_on, default_http_retry_on,
        parse_kuma_duration,
    };
    let timeout = PolicyInput::from_resource(&read("mtimeout-all-default.universal.yaml")).unwrap();
    let to = merge(Kind::MeshTimeout, &[timeout], Section::To);
    let conf: TimeoutConf = to.applied.by_key()[0].1.typed().unwrap();
    let d = |v: Option<&str>| parse_kuma_duration(v.unwrap()).unwrap();
    let http = conf.http.clone().unwrap();
    assert_eq!(
        TimeoutDefaults::KUMA,
        TimeoutDefaults {
            connection_timeout: d(conf.connection_timeout.as_deref()),
            idle_timeout: d(conf.idle_timeout.as_deref()),
            request_timeout: d(http.request_timeout.as_deref()),
            stream_idle_timeout: d(http.stream_idle_timeout.as_deref()),
        }
    );
    assert_eq!(
        default_http_retry_on(),
        ["GatewayError", "ConnectFailure", "RefusedStream"]
    );
    assert_eq!(
        default_grpc_retry_on(),
        [
            GrpcRetryOn::Canceled,
            GrpcRetryOn::ResourceExhausted,
            GrpcRetryOn::Unavailable
        ]
    );
    // Written out, the defaults are a valid policy.
    let text = format!(
        "type: MeshRetry\nname: d\nmesh: default\nspec:\n  to:\n    - targetRef: {{kind: Mesh}}\n      default:\n        http: {{retryOn: {:?}}}\n        grpc: {{retryOn: {:?}}}\n",
        default_http_retry_on(),
        default_grpc_retry_on()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    apply("defaults", &text);
}
