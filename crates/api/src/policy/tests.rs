//! The engine's semantics, each as a user of `inspect --rules` would see
//! them: ordering, merge patch (null deletion, array replacement), route
//! rules merged by matches, shadow policies, provenance, and independence
//! from the input order.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::Kind;
use crate::spec::{TargetRef, TargetRefKind};

fn policy(kind: Kind, name: &str, top: Option<Value>, spec: Value) -> PolicyInput {
    let top: Option<TargetRef> = top.map(|t| serde_json::from_value(t).unwrap());
    PolicyInput::new(kind, name, "default", BTreeMap::new(), top, spec)
}

fn retry(name: &str, top: Option<Value>, default: Value) -> PolicyInput {
    let spec = json!({"to": [{"targetRef": {"kind": "Mesh"}, "default": default}]});
    policy(Kind::MeshRetry, name, top, spec)
}

fn only_conf(m: &Merged) -> MergedConf {
    let by_key = m.applied.by_key();
    assert_eq!(by_key.len(), 1, "{by_key:?}");
    by_key.into_iter().next().unwrap().1
}

fn who(conf: &MergedConf) -> Vec<(String, String)> {
    conf.origins
        .iter()
        .map(|(k, o)| (k.clone(), format!("{} {}", o.policy, o.entry)))
        .collect()
}

#[test]
fn more_specific_top_level_target_wins_then_inverted_name() {
    let dp_labels = json!({"kind": "Dataplane", "labels": {"app": "web"}});
    let dp_name = json!({"kind": "Dataplane", "name": "web-1"});
    let policies = [
        retry("named", Some(dp_name), json!({"http": {"numRetries": 4}})),
        retry(
            "zzz",
            None,
            json!({"http": {"numRetries": 1, "perTryTimeout": "1s"}}),
        ),
        retry("aaa", None, json!({"http": {"numRetries": 2}})),
        retry(
            "labels",
            Some(dp_labels),
            json!({"http": {"numRetries": 3, "retryOn": ["5xx"]}}),
        ),
    ];
    let conf = only_conf(&merge(Kind::MeshRetry, &policies, Section::To));
    assert_eq!(
        conf.conf,
        json!({"http": {"numRetries": 4, "perTryTimeout": "1s", "retryOn": ["5xx"]}})
    );
    assert_eq!(
        who(&conf),
        [
            ("/http/numRetries".into(), "named to[0]".into()),
            ("/http/perTryTimeout".into(), "zzz to[0]".into()),
            ("/http/retryOn".into(), "labels to[0]".into()),
        ]
    );
    // Among Mesh-wide policies "aaa" sorts last (Kuma's inverted order).
    let two = [policies[1].clone(), policies[2].clone()];
    let conf = only_conf(&merge(Kind::MeshRetry, &two, Section::To));
    assert_eq!(conf.conf["http"]["numRetries"], 2);
}

#[test]
fn display_name_label_orders_before_the_name() {
    let mut a = retry("a", None, json!({"tcp": {"maxConnectAttempt": 1}}));
    let b = retry("b", None, json!({"tcp": {"maxConnectAttempt": 2}}));
    a.labels.insert(DISPLAY_NAME_LABEL.into(), "zzz".into());
    let conf = only_conf(&merge(Kind::MeshRetry, &[a, b], Section::To));
    assert_eq!(conf.conf["tcp"]["maxConnectAttempt"], 2);
}

#[test]
fn merge_patch_deletes_with_null_and_replaces_arrays() {
    let low = retry(
        "b",
        None,
        json!({"http": {"retryOn": ["5xx", "Reset"], "numRetries": 3}, "tcp": {"maxConnectAttempt": 5}}),
    );
    let high = retry(
        "a",
        None,
        json!({"http": {"retryOn": ["503"], "numRetries": null}, "tcp": null}),
    );
    let conf = only_conf(&merge(Kind::MeshRetry, &[high, low], Section::To));
    assert_eq!(conf.conf, json!({"http": {"retryOn": ["503"]}}));
    assert_eq!(who(&conf), [("/http/retryOn".into(), "a to[0]".into())]);
}

#[test]
fn to_entries_fold_per_target_and_by_entry_rank() {
    let spec = json!({"to": [
        {"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {"idleTimeout": "1m"}},
        {"targetRef": {"kind": "Mesh"}, "default": {"idleTimeout": "1h", "connectionTimeout": "5s"}},
    ]});
    let p = policy(Kind::MeshTimeout, "t", None, spec);
    let merged = merge(Kind::MeshTimeout, &[p], Section::To);
    let keys: Vec<String> = merged
        .applied
        .keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    // Mesh ranks below MeshService, whatever the order in the policy.
    assert_eq!(
        keys,
        [
            r#"{"kind":"Mesh"}"#,
            r#"{"kind":"MeshService","name":"backend"}"#
        ]
    );
    let backend = merged
        .applied
        .merged_where(|e| {
            e.target_ref.as_ref().is_some_and(|t| {
                t.kind == TargetRefKind::Mesh || t.name.as_deref() == Some("backend")
            })
        })
        .unwrap();
    assert_eq!(
        backend.conf,
        json!({"idleTimeout": "1m", "connectionTimeout": "5s"})
    );
    assert_eq!(
        who(&backend),
        [
            ("/connectionTimeout".into(), "t to[1]".into()),
            ("/idleTimeout".into(), "t to[0]".into()),
        ]
    );
}

fn route(name: &str, rules: Value) -> PolicyInput {
    let spec =
        json!({"to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "rules": rules}]});
    policy(Kind::MeshHTTPRoute, name, None, spec)
}

#[test]
fn http_route_rules_merge_by_identical_matches() {
    let api = json!([{"path": {"type": "PathPrefix", "value": "/api"}}]);
    let v2 = json!([{"headers": [{"name": "version", "value": "v2"}]}]);
    // "b" has less priority than "a" (inverted name order).
    let low = route(
        "b",
        json!([
            {"matches": api, "default": {"backendRefs": [{"kind": "MeshService", "name": "v1"}],
                                         "filters": [{"type": "RequestHeaderModifier"}]}},
            {"matches": v2, "default": {"backendRefs": [{"kind": "MeshService", "name": "v2"}]}},
        ]),
    );
    let high = route(
        "a",
        json!([
            {"matches": api, "default": {"backendRefs": [{"kind": "MeshService", "name": "v3"}]}},
        ]),
    );
    let conf = only_conf(&merge(Kind::MeshHTTPRoute, &[low, high], Section::To));
    assert_eq!(
        conf.conf,
        json!({"rules": [
            {"matches": api, "default": {"backendRefs": [{"kind": "MeshService", "name": "v3"}],
                                         "filters": [{"type": "RequestHeaderModifier"}]}},
            {"matches": v2, "default": {"backendRefs": [{"kind": "MeshService", "name": "v2"}]}},
        ]})
    );
    assert_eq!(
        who(&conf),
        [
            (
                "/rules/0/default/backendRefs".into(),
                "a to[0].rules[0]".into()
            ),
            ("/rules/0/default/filters".into(), "b to[0].rules[0]".into()),
            ("/rules/0/matches".into(), "a to[0].rules[0]".into()),
            (
                "/rules/1/default/backendRefs".into(),
                "b to[0].rules[1]".into()
            ),
            ("/rules/1/matches".into(), "b to[0].rules[1]".into()),
        ]
    );
}

#[test]
fn shadow_policies_are_computed_apart() {
    let applied = retry("base", None, json!({"http": {"numRetries": 1}}));
    let mut trial = retry("aaa-trial", None, json!({"http": {"numRetries": 9}}));
    trial.labels.insert(EFFECT_LABEL.into(), SHADOW.into());
    let merged = merge(Kind::MeshRetry, &[applied.clone(), trial], Section::To);
    assert_eq!(only_conf(&merged).conf["http"]["numRetries"], 1);
    let shadow = merged.shadow.as_ref().expect("a shadow result").by_key();
    assert_eq!(shadow[0].1.conf["http"]["numRetries"], 9);
    assert_eq!(shadow[0].1.origins["/http/numRetries"].policy, "aaa-trial");
    assert_eq!(merge(Kind::MeshRetry, &[applied], Section::To).shadow, None);
}

#[test]
fn other_kinds_and_sections_are_left_out() {
    let timeout = policy(
        Kind::MeshTimeout,
        "t",
        None,
        json!({"from": [{"targetRef": {"kind": "Mesh"}, "default": {"idleTimeout": "2h"}}],
               "rules": [{"default": {"idleTimeout": "3h"}}]}),
    );
    let r = retry("r", None, json!({"http": {"numRetries": 1}}));
    let ps = [timeout, r];
    assert!(
        merge(Kind::MeshTimeout, &ps, Section::To)
            .applied
            .entries
            .is_empty()
    );
    let from = merge(Kind::MeshTimeout, &ps, Section::From);
    assert_eq!(only_conf(&from).conf, json!({"idleTimeout": "2h"}));
    let rules = merge(Kind::MeshTimeout, &ps, Section::Rules);
    assert_eq!(rules.applied.keys(), [&Value::Null]);
    assert_eq!(only_conf(&rules).origins["/idleTimeout"].entry, "rules[0]");
}

#[test]
fn tcp_route_without_rules_sends_to_its_target() {
    let p = policy(
        Kind::MeshTCPRoute,
        "tcp",
        None,
        json!({"to": [{"targetRef": {"kind": "MeshService", "name": "redis"}}]}),
    );
    let conf = only_conf(&merge(Kind::MeshTCPRoute, &[p], Section::To));
    assert_eq!(
        conf.conf,
        json!({"default": {"backendRefs": [{"kind": "MeshService", "name": "redis", "weight": 1}]}})
    );
}

/// Property: for many random sets of policies, every permutation of the
/// input gives the same result (applied, shadow and provenance).
#[test]
fn result_does_not_depend_on_input_order() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let tops = [
        None,
        Some(json!({"kind": "Dataplane"})),
        Some(json!({"kind": "Dataplane", "labels": {"app": "web"}})),
        Some(json!({"kind": "MeshService", "name": "web"})),
    ];
    let names = ["a", "b", "c", "d", "e"];
    for _ in 0..200 {
        let count = 2 + next(4) as usize;
        let mut policies: Vec<PolicyInput> = (0..count)
            .map(|i| {
                let mut p = retry(
                    names[i],
                    tops[next(4) as usize].clone(),
                    json!({"http": {"numRetries": next(5), "retryOn": [format!("50{}", next(4))]},
                           "tcp": if next(3) == 0 { Value::Null } else { json!({"maxConnectAttempt": next(9) + 1}) }}),
                );
                if next(4) == 0 {
                    p.labels.insert(EFFECT_LABEL.into(), SHADOW.into());
                }
                p
            })
            .collect();
        let want = merge(Kind::MeshRetry, &policies, Section::To);
        for _ in 0..6 {
            for i in (1..policies.len()).rev() {
                let j = next(i as u64 + 1) as usize;
                policies.swap(i, j);
            }
            let got = merge(Kind::MeshRetry, &policies, Section::To);
            assert_eq!(got.applied.by_key(), want.applied.by_key());
            assert_eq!(
                got.shadow.map(|s| s.by_key()),
                want.shadow.as_ref().map(RuleSet::by_key)
            );
        }
    }
}
