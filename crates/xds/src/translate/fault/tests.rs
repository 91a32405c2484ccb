//! The per-caller fold and the Envoy fault filters it becomes.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault as PbHttpFault;
use meshlink_api::Kind;
use meshlink_api::spec::{Tags, TargetRef, TargetRefKind};
use prost::{Message, Name};
use serde_json::{Value, json};

use super::*;

const TD: &str = "default";

fn input(name: &str, from: Value) -> PolicyInput {
    let mut top = TargetRef::of_kind(TargetRefKind::MeshService);
    top.name = Some("backend".into());
    PolicyInput::new(
        Kind::MeshFaultInjection,
        name,
        "default",
        BTreeMap::new(),
        Some(top),
        json!({ "from": from }),
    )
}

fn backend_chains(policies: &[PolicyInput]) -> Vec<(Callers, Vec<HttpFault>)> {
    let tags = Tags::from_iter([("kuma.io/service".to_owned(), "backend".to_owned())]);
    let labels = BTreeMap::new();
    let inbound = InboundTarget {
        dataplane: "backend-1",
        labels: &labels,
        port: 8080,
        name: None,
        tags: &tags,
    };
    chains(policies.iter(), TD, &inbound)
}

fn abort(status: i64) -> Value {
    json!([{ "abort": { "httpStatus": status, "percentage": 50 } }])
}

fn statuses(list: &[HttpFault]) -> Vec<i64> {
    list.iter()
        .filter_map(|f| f.abort.as_ref().map(|a| a.http_status))
        .collect()
}

fn ids(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| format!("spiffe://{TD}/{s}")).collect()
}

#[test]
fn a_mesh_entry_applies_to_every_caller_without_a_matcher() {
    let p = input(
        "all",
        json!([{ "targetRef": { "kind": "Mesh" }, "default": { "http": abort(500) } }]),
    );
    let chains = backend_chains(&[p]);
    assert_eq!(chains.len(), 1);
    assert_eq!(chains[0].0, Callers::All);
    assert_eq!(statuses(&chains[0].1), [500]);
}

#[test]
fn a_named_caller_gets_its_own_list_and_the_rest_get_the_mesh_list() {
    let p = input(
        "p",
        json!([
            { "targetRef": { "kind": "Mesh" }, "default": { "http": abort(500) } },
            { "targetRef": { "kind": "MeshService", "name": "web" },
              "default": { "http": abort(503) } },
            { "targetRef": { "kind": "MeshSubset", "tags": { "kuma.io/service": "frontend" } },
              "default": { "http": abort(503) } },
            { "targetRef": { "kind": "MeshSubset", "tags": { "version": "v1" } },
              "default": { "http": abort(418) } },
        ]),
    );
    let chains = backend_chains(&[p]);
    assert_eq!(chains.len(), 2, "{chains:?}");
    // web and frontend get the same list: one group.
    assert_eq!(chains[0].0, Callers::Only(ids(&["frontend", "web"])));
    assert_eq!(statuses(&chains[0].1), [503]);
    assert_eq!(chains[1].0, Callers::Except(ids(&["frontend", "web"])));
    assert_eq!(statuses(&chains[1].1), [500]);
}

#[test]
fn only_named_callers_leaves_everyone_else_untouched() {
    let p = input(
        "p",
        json!([{ "targetRef": { "kind": "MeshService", "name": "web" },
                 "default": { "http": abort(503) } }]),
    );
    let chains = backend_chains(&[p]);
    assert_eq!(chains.len(), 1);
    assert_eq!(chains[0].0, Callers::Only(ids(&["web"])));
}

#[test]
fn percentages_become_the_smallest_exact_fraction() {
    let f = |v: Value| {
        let p = fraction(&serde_json::from_value(v).unwrap());
        (p.numerator, p.denominator)
    };
    assert_eq!(f(json!(50)), (50, DenominatorType::Hundred as i32));
    assert_eq!(f(json!("2.5")), (250, DenominatorType::TenThousand as i32));
    assert_eq!(
        f(json!("50.5")),
        (5050, DenominatorType::TenThousand as i32)
    );
    assert_eq!(f(json!("0.0001")), (1, DenominatorType::Million as i32));
}

#[test]
fn each_step_is_one_filter_with_its_three_faults() {
    let step: HttpFault = serde_json::from_value(json!({
        "abort": { "httpStatus": 500, "percentage": "2.5" },
        "delay": { "value": "5s", "percentage": 5 },
        "responseBandwidth": { "limit": "50Mbps", "percentage": 50 },
    }))
    .unwrap();
    let f = filter(&step, &Callers::All);
    assert_eq!(f.name, FAULT_FILTER);
    let Some(http_filter::ConfigType::TypedConfig(any)) = f.config_type else {
        panic!("typed config");
    };
    let pb = PbHttpFault::decode(any.value.as_slice()).unwrap();
    let abort = pb.abort.unwrap();
    assert_eq!(
        abort.error_type,
        Some(fault_abort::ErrorType::HttpStatus(500))
    );
    assert_eq!(abort.percentage.unwrap().numerator, 250);
    let delay = pb.delay.unwrap();
    assert!(matches!(
        delay.fault_delay_secifier,
        Some(fault_delay::FaultDelaySecifier::FixedDelay(d)) if d.seconds == 5
    ));
    let limit = pb.response_rate_limit.unwrap();
    assert!(matches!(
        limit.limit_type,
        Some(fault_rate_limit::LimitType::FixedLimit(l)) if l.limit_kbps == 6_104
    ));

    // Named callers: wrapped in a matcher, the fault filter inside.
    let f = filter(&step, &Callers::Only(ids(&["web"])));
    let Some(http_filter::ConfigType::TypedConfig(any)) = f.config_type else {
        panic!("typed config");
    };
    assert_eq!(any.type_url, ExtensionWithMatcher::type_url());
}

#[test]
fn a_proxyless_client_gets_uniquely_named_filters_without_a_rate_limit() {
    let steps: Vec<HttpFault> = serde_json::from_value(json!([
        { "abort": { "httpStatus": 503, "percentage": 50 },
          "responseBandwidth": { "limit": "50Mbps", "percentage": 50 } },
        { "responseBandwidth": { "limit": "1Mbps", "percentage": 100 } },
        { "delay": { "value": "1s", "percentage": 100 } },
    ]))
    .unwrap();
    let filters = client_filters(&steps);
    let names: Vec<&str> = filters.iter().map(|f| f.name.as_str()).collect();
    // The bandwidth-only step is gone: gRPC has no response rate limit.
    assert_eq!(
        names,
        ["envoy.filters.http.fault.0", "envoy.filters.http.fault.1"]
    );
    let decoded: Vec<PbHttpFault> = filters
        .iter()
        .map(|f| {
            let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type else {
                panic!("typed config");
            };
            assert_eq!(any.type_url, PbHttpFault::type_url());
            PbHttpFault::decode(any.value.as_slice()).unwrap()
        })
        .collect();
    assert_eq!(
        decoded[0].abort.as_ref().unwrap().error_type,
        Some(fault_abort::ErrorType::HttpStatus(503))
    );
    assert!(decoded[0].response_rate_limit.is_none());
    assert!(decoded[0].delay.is_none());
    assert!(decoded[1].abort.is_none());
    assert!(matches!(
        decoded[1].delay.as_ref().unwrap().fault_delay_secifier,
        Some(fault_delay::FaultDelaySecifier::FixedDelay(d)) if d.seconds == 1
    ));
    assert!(client_filters(&[]).is_empty());
}
