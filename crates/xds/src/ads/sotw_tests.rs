//! Unit tests of the SotW engine, driven directly with requests and
//! states (no stream, no server): ACK/NACK, stale nonces, wildcard and
//! named subscriptions, silence until a wanted EDS/SDS resource exists,
//! and the make-before-break order of removals.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;

use super::SotwEngine;
use crate::ads::test_state;

/// A state without secrets (see [`test_state::state`]).
fn state(clusters: &[&str], listeners: &[&str], endpoints: &[&str], tag: &str) -> ProxyState {
    test_state::state(&[], clusters, listeners, endpoints, tag)
}
use crate::ads::ProxyState;
use crate::translate::{CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE};

fn request(type_url: &str, names: &[&str], ack_of: Option<&DiscoveryResponse>) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        response_nonce: ack_of.map(|r| r.nonce.clone()).unwrap_or_default(),
        version_info: ack_of.map(|r| r.version_info.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

fn nack(type_url: &str, of: &DiscoveryResponse, detail: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 3,
            message: detail.to_owned(),
            details: Vec::new(),
        }),
        ..request(type_url, &[], Some(of))
    }
}

/// The names in a response (Clusters and Listeners carry their own name).
fn names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|a| match r.type_url.as_str() {
            CLUSTER_TYPE => Cluster::decode(a.value.as_slice()).unwrap().name,
            LISTENER_TYPE => Listener::decode(a.value.as_slice()).unwrap().name,
            _ => {
                ClusterLoadAssignment::decode(a.value.as_slice())
                    .unwrap()
                    .cluster_name
            }
        })
        .collect()
}

fn engine() -> SotwEngine {
    SotwEngine::new("cp-test".into())
}

#[test]
fn wildcard_request_gets_everything_and_an_ack_is_recorded() {
    let mut e = engine();
    let s = state(&["a", "b"], &[], &[], "v1");
    let out = e
        .on_request(&request(CLUSTER_TYPE, &[], None), Some(&s))
        .unwrap();
    let [resp] = out.responses.as_slice() else {
        panic!("one response: {out:?}")
    };
    assert_eq!(names(resp), ["a", "b"]);
    assert_eq!(resp.control_plane.as_ref().unwrap().identifier, "cp-test");
    assert!(!resp.version_info.is_empty() && !resp.nonce.is_empty());

    let ack = e
        .on_request(&request(CLUSTER_TYPE, &[], Some(resp)), Some(&s))
        .unwrap();
    assert!(ack.responses.is_empty(), "an ACK is not answered: {ack:?}");
    assert_eq!(ack.acks.len(), 1);
    assert_eq!(ack.acks[0].0, CLUSTER_TYPE);
    let report = &e.types()[CLUSTER_TYPE].report;
    assert_eq!(
        report.last_acked_version.as_deref(),
        Some(resp.version_info.as_str())
    );
    assert_eq!(report.resources, 2);

    // The same state again sends nothing: the client holds it.
    assert!(e.on_state(Some(&s), &s).is_empty());
}

#[test]
fn a_request_before_any_state_is_answered_when_the_state_arrives() {
    let mut e = engine();
    let out = e
        .on_request(&request(CLUSTER_TYPE, &[], None), None)
        .unwrap();
    assert!(out.responses.is_empty());
    let pushed = e.on_state(None, &state(&["a"], &[], &[], "v1"));
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["a"]);
    // Types nobody asked for are not pushed.
    assert_eq!(pushed[0].type_url, CLUSTER_TYPE);
}

#[test]
fn named_subscription_gets_only_those_names() {
    let mut e = engine();
    let s = state(&["a", "b", "c"], &[], &[], "v1");
    let out = e
        .on_request(&request(CLUSTER_TYPE, &["b", "zz"], None), Some(&s))
        .unwrap();
    assert_eq!(names(&out.responses[0]), ["b"]);
}

#[test]
fn a_stale_nonce_is_ignored() {
    let mut e = engine();
    let s1 = state(&["a"], &[], &[], "v1");
    let s2 = state(&["a"], &[], &[], "v2");
    let first = e
        .on_request(&request(CLUSTER_TYPE, &[], None), Some(&s1))
        .unwrap()
        .responses;
    let second = e.on_state(Some(&s1), &s2);
    assert_eq!(second.len(), 1);
    assert_ne!(first[0].nonce, second[0].nonce);
    // A NACK of the first (replaced) response changes nothing.
    let out = e
        .on_request(&nack(CLUSTER_TYPE, &first[0], "old"), Some(&s2))
        .unwrap();
    assert!(
        out.nacks.is_empty() && out.acks.is_empty() && out.responses.is_empty(),
        "{out:?}"
    );
    assert!(e.types()[CLUSTER_TYPE].report.last_nack.is_none());
}

#[test]
fn a_nacked_version_is_never_resent_and_a_fix_is_pushed() {
    let mut e = engine();
    let good = state(&["a"], &[], &[], "good");
    let bad = state(&["a"], &[], &[], "bad");
    let fixed = state(&["a"], &[], &[], "fixed");
    let r = e
        .on_request(&request(CLUSTER_TYPE, &[], None), Some(&good))
        .unwrap()
        .responses;
    e.on_request(&request(CLUSTER_TYPE, &[], Some(&r[0])), Some(&good))
        .unwrap();
    let pushed = e.on_state(Some(&good), &bad);
    let out = e
        .on_request(
            &nack(CLUSTER_TYPE, &pushed[0], "cluster a: bad"),
            Some(&bad),
        )
        .unwrap();
    assert_eq!(out.nacks, vec![(CLUSTER_TYPE, "cluster a: bad".to_owned())]);
    let report = &e.types()[CLUSTER_TYPE].report;
    assert_eq!(
        report.last_nack.as_ref().unwrap().version,
        pushed[0].version_info
    );
    assert_eq!(report.last_nack.as_ref().unwrap().detail, "cluster a: bad");
    // Re-publishing the rejected state, or re-requesting, sends nothing.
    assert!(e.on_state(Some(&bad), &bad).is_empty());
    assert!(out.responses.is_empty());
    // The fix goes out.
    let fix = e.on_state(Some(&bad), &fixed);
    assert_eq!(fix.len(), 1);
    assert_ne!(fix[0].version_info, pushed[0].version_info);
}

#[test]
fn eds_stays_silent_until_a_wanted_resource_exists() {
    let mut e = engine();
    let without = state(&[], &[], &["other"], "v1");
    let out = e
        .on_request(&request(ENDPOINT_TYPE, &["db"], None), Some(&without))
        .unwrap();
    assert!(
        out.responses.is_empty(),
        "nothing wanted exists yet: {out:?}"
    );
    let with = state(&[], &[], &["other", "db"], "v1");
    let pushed = e.on_state(Some(&without), &with);
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["db"]);
}

#[test]
fn clusters_and_listeners_answer_even_when_empty() {
    let mut e = engine();
    let empty = state(&[], &[], &[], "v1");
    let out = e
        .on_request(&request(LISTENER_TYPE, &[], None), Some(&empty))
        .unwrap();
    assert_eq!(out.responses.len(), 1, "a full-state type says 'none'");
    assert!(out.responses[0].resources.is_empty());
}

#[test]
fn removals_keep_resources_for_one_round_then_drop_them_in_reverse_order() {
    let mut e = engine();
    let before = state(&["a", "b"], &["la", "lb"], &[], "v1");
    let after = state(&["a"], &["la"], &[], "v2");
    for t in [CLUSTER_TYPE, LISTENER_TYPE] {
        let r = e
            .on_request(&request(t, &[], None), Some(&before))
            .unwrap()
            .responses;
        e.on_request(&request(t, &[], Some(&r[0])), Some(&before))
            .unwrap();
    }
    let pushed: Vec<(String, Vec<String>)> = e
        .on_state(Some(&before), &after)
        .iter()
        .map(|r| (r.type_url.clone(), names(r)))
        .collect();
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        pushed,
        vec![
            // Make: the going resources are still listed ...
            (CLUSTER_TYPE.to_owned(), v(&["a", "b"])),
            (LISTENER_TYPE.to_owned(), v(&["la", "lb"])),
            // ... break: listeners drop theirs before clusters do.
            (LISTENER_TYPE.to_owned(), v(&["la"])),
            (CLUSTER_TYPE.to_owned(), v(&["a"])),
        ]
    );
}

#[test]
fn an_unknown_type_is_refused_naming_the_served_types() {
    let mut e = engine();
    let err = e
        .on_request(&request("type.googleapis.com/nope", &[], None), None)
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("nope") && err.message().contains(CLUSTER_TYPE),
        "{err}"
    );
}
