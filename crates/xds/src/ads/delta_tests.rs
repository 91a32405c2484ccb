//! Unit tests of the delta engine, driven directly with requests and
//! states: wildcard and named subscriptions, `initial_resource_versions`
//! on resume, unsubscribe, ACK/NACK bookkeeping, the empty first answer,
//! and updates in type order with removals last in reverse order.

use std::collections::HashMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;

use super::DeltaEngine;
use crate::ads::test_state::state;
use crate::translate::{CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE};

fn subscribe(type_url: &str, names: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names_subscribe: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

fn ack(r: &DeltaDiscoveryResponse) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: r.type_url.clone(),
        response_nonce: r.nonce.clone(),
        ..Default::default()
    }
}

fn names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources.iter().map(|r| r.name.as_str()).collect()
}

/// `"<Type> +[updated] -[removed]"`, for comparing push sequences.
fn summary(r: &DeltaDiscoveryResponse) -> String {
    let t = r.type_url.rsplit('.').next().unwrap_or_default();
    format!(
        "{t} +[{}] -[{}]",
        names(r).join(","),
        r.removed_resources.join(",")
    )
}

fn engine() -> DeltaEngine {
    DeltaEngine::new("cp-test".into())
}

#[test]
fn wildcard_subscription_gets_everything_then_only_changes() {
    let mut e = engine();
    let v1 = state(&[], &["a", "b"], &[], &[], "v1");
    let out = e
        .on_request(&subscribe(CLUSTER_TYPE, &[]), Some(&v1))
        .unwrap();
    let [first] = out.responses.as_slice() else {
        panic!("one response: {out:?}")
    };
    assert_eq!(names(first), ["a", "b"]);
    assert!(first.removed_resources.is_empty());
    assert_eq!(first.control_plane.as_ref().unwrap().identifier, "cp-test");
    let acked = e.on_request(&ack(first), Some(&v1)).unwrap();
    assert_eq!(acked.acks.len(), 1);
    assert!(acked.responses.is_empty());
    assert_eq!(
        e.types()[CLUSTER_TYPE].report.last_acked_version.as_deref(),
        Some(first.system_version_info.as_str())
    );

    // Only `b` changes: only `b` is sent.
    let mut v2 = state(&[], &["a"], &[], &[], "v1");
    v2.snapshot.insert(
        "b".into(),
        &Cluster {
            name: "b".into(),
            alt_stat_name: "v2".into(),
            ..Default::default()
        },
    );
    let pushed = e.on_state(Some(&v1), &v2);
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["b"]);
    // Nothing changed: nothing sent.
    assert!(e.on_state(Some(&v2), &v2).is_empty());
    // Equal content in new sets (a full recompute): nothing sent either.
    let again = state(&[], &["a"], &[], &[], "v1");
    let mut v3 = state(&[], &[], &[], &[], "v1");
    v3.snapshot = again
        .snapshot
        .with_resource("b", v2.snapshot.resources(CLUSTER_TYPE)["b"].clone());
    assert!(e.on_state(Some(&v2), &v3).is_empty());
}

#[test]
fn resume_sends_only_what_the_client_lacks_and_removes_what_is_gone() {
    let mut e = engine();
    let s = state(&[], &["a", "b"], &[], &[], "v1");
    let a_version = s.snapshot.get(CLUSTER_TYPE, "a").unwrap().version.clone();
    let req = DeltaDiscoveryRequest {
        initial_resource_versions: HashMap::from([
            ("a".to_owned(), a_version),
            ("gone".to_owned(), "old".to_owned()),
        ]),
        ..subscribe(CLUSTER_TYPE, &[])
    };
    let out = e.on_request(&req, Some(&s)).unwrap();
    let [r] = out.responses.as_slice() else {
        panic!("one response: {out:?}")
    };
    assert_eq!(names(r), ["b"], "a is held at its current version");
    assert_eq!(r.removed_resources, ["gone"]);
}

#[test]
fn unsubscribed_names_are_no_longer_pushed() {
    let mut e = engine();
    let v1 = state(&[], &[], &[], &["x", "y"], "v1");
    let r = e
        .on_request(&subscribe(ENDPOINT_TYPE, &["x", "y"]), Some(&v1))
        .unwrap()
        .responses;
    assert_eq!(names(&r[0]), ["x", "y"]);
    e.on_request(&ack(&r[0]), Some(&v1)).unwrap();
    let unsub = DeltaDiscoveryRequest {
        resource_names_unsubscribe: vec!["y".into()],
        ..subscribe(ENDPOINT_TYPE, &[])
    };
    e.on_request(&unsub, Some(&v1)).unwrap();
    // y disappears from the snapshot: the client no longer cares, so no
    // removal is sent for it.
    let v2 = state(&[], &[], &[], &["x"], "v1");
    assert!(e.on_state(Some(&v1), &v2).is_empty());
}

#[test]
fn a_type_with_nothing_yet_gets_an_empty_first_answer_then_the_resource() {
    let mut e = engine();
    let without = state(&[], &[], &[], &[], "v1");
    let out = e
        .on_request(&subscribe(ROUTE_TYPE, &[]), Some(&without))
        .unwrap();
    assert_eq!(out.responses.len(), 1, "the client learns there is nothing");
    assert!(out.responses[0].resources.is_empty());

    let named = e
        .on_request(&subscribe(ENDPOINT_TYPE, &["db"]), Some(&without))
        .unwrap();
    assert_eq!(named.responses.len(), 1);
    assert!(named.responses[0].resources.is_empty());
    let with = state(&[], &[], &[], &["db"], "v1");
    let pushed = e.on_state(Some(&without), &with);
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["db"]);
}

#[test]
fn a_request_before_any_state_is_answered_when_it_arrives() {
    let mut e = engine();
    assert!(
        e.on_request(&subscribe(CLUSTER_TYPE, &[]), None)
            .unwrap()
            .responses
            .is_empty()
    );
    let pushed = e.on_state(None, &state(&[], &["a"], &[], &[], "v1"));
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["a"]);
}

#[test]
fn a_nack_is_recorded_with_its_detail_and_version() {
    let mut e = engine();
    let s = state(&[], &["a"], &[], &[], "v1");
    let r = e
        .on_request(&subscribe(CLUSTER_TYPE, &[]), Some(&s))
        .unwrap()
        .responses;
    let nack = DeltaDiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 3,
            message: "Cluster \"a\": lb_policy: unsupported".into(),
            details: Vec::new(),
        }),
        ..ack(&r[0])
    };
    let out = e.on_request(&nack, Some(&s)).unwrap();
    assert_eq!(out.nacks.len(), 1);
    assert!(out.acks.is_empty() && out.responses.is_empty());
    let last = e.types()[CLUSTER_TYPE].report.last_nack.clone().unwrap();
    assert_eq!(last.version, r[0].system_version_info);
    assert!(last.detail.contains("lb_policy"), "{last:?}");
}

#[test]
fn updates_go_in_type_order_and_removals_last_in_reverse() {
    let mut e = engine();
    let before = state(&["s"], &["a", "b"], &["la", "lb"], &[], "v1");
    for t in [SECRET_TYPE, CLUSTER_TYPE, LISTENER_TYPE] {
        let r = e
            .on_request(&subscribe(t, &[]), Some(&before))
            .unwrap()
            .responses;
        e.on_request(&ack(&r[0]), Some(&before)).unwrap();
    }
    // The secret and `a`/`la` change; `b` and `lb` go.
    let after = state(&["s"], &["a"], &["la"], &[], "v2");
    let pushed: Vec<String> = e
        .on_state(Some(&before), &after)
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        pushed,
        [
            "Secret +[s] -[]",
            "Cluster +[a] -[]",
            "Listener +[la] -[]",
            "Listener +[] -[lb]",
            "Cluster +[] -[b]",
        ]
    );
}

#[test]
fn a_type_shared_with_the_last_state_is_skipped_and_only_the_patched_one_is_sent() {
    let mut e = engine();
    let v1 = state(&["s"], &["a"], &[], &["db", "web"], "v1");
    for t in [SECRET_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE] {
        let names: &[&str] = if t == ENDPOINT_TYPE {
            &["db", "web"]
        } else {
            &[]
        };
        let r = e
            .on_request(&subscribe(t, names), Some(&v1))
            .unwrap()
            .responses;
        e.on_request(&ack(&r[0]), Some(&v1)).unwrap();
    }
    // Only `db`'s load assignment is replaced; every other set is shared.
    let db = std::sync::Arc::new(crate::translate::Versioned::encode(
        &envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment {
            cluster_name: "db-moved".into(),
            ..Default::default()
        },
    ));
    let mut v2 = state(&[], &[], &[], &[], "v2");
    v2.snapshot = v1.snapshot.with_resource("db", db.clone());
    assert!(v2.snapshot.shares_type(&v1.snapshot, CLUSTER_TYPE));
    assert!(!v2.snapshot.shares_type(&v1.snapshot, ENDPOINT_TYPE));
    let pushed = e.on_state(Some(&v1), &v2);
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["db"]);
    assert_eq!(pushed[0].resources[0].version, db.version);
    assert_eq!(
        pushed[0].system_version_info,
        v2.snapshot.version_of(ENDPOINT_TYPE)
    );
}
