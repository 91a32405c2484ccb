//! Kuma's targetRef matching and merge order on a sidecar's inbound: which
//! permissions apply to web-1 (by Dataplane labels, name, inbound port), and
//! which verdict wins when several match (most specific top-level target,
//! then the name that sorts first, then the last matching `from[]` entry).

mod translate_fixtures;

use envoy_types::pb::envoy::config::rbac::v3::rbac::Action;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, Memo, MeshView, translate, translate_shared};
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, proxy, rbac_of_listener};

const WEB1: &str = "inbound:10.0.0.1:8080";
const WEB2: &str = "inbound:10.0.0.4:8080";
const BACKEND: &str = "spiffe://example.org/backend";
const TRUST_DOMAIN: &str = "spiffe://example.org/";

/// `r` with `labels` as its metadata labels.
fn labelled(r: Resource, labels: Value) -> Resource {
    let mut v = r.to_json();
    v["metadata"]["labels"] = labels;
    Resource::from_json(v).unwrap()
}

/// A permission installed by `target` with `from` entries `(source, action)`
/// where a source of `"*"` is `kind: Mesh`, else a MeshService name.
fn mtp(name: &str, target: Value, from: &[(&str, &str)]) -> Resource {
    let from: Vec<Value> = from
        .iter()
        .map(|(source, action)| {
            let target = if *source == "*" {
                json!({"kind": "Mesh"})
            } else {
                json!({"kind": "MeshService", "name": source})
            };
            json!({"targetRef": target, "default": {"action": action}})
        })
        .collect();
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": name, "mesh": MESH},
        "spec": {"targetRef": target, "from": from},
    }))
    .unwrap_or_else(|e| panic!("{e:?}"))
}

/// web-1 (labelled app: web) and web-2 (unlabelled) serve `web` on port
/// 8080; backend-1 serves `backend`.
fn view(permissions: Vec<Resource>) -> MeshView {
    MeshView::new(
        mesh(true),
        vec![
            labelled(
                dataplane("web-1", "10.0.0.1", "web", 8080, &[]),
                json!({"app": "web"}),
            ),
            dataplane("web-2", "10.0.0.4", "web", 8080, &[]),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        permissions,
    )
}

fn rbac(permissions: Vec<Resource>) -> Vec<(Action, Vec<MatchPattern>)> {
    rbac_of_listener(
        &translate(&proxy("web-1", ClientKind::Envoy), &view(permissions)),
        WEB1,
    )
}

fn allow(ids: &[&str]) -> (Action, Vec<MatchPattern>) {
    (Action::Allow, ids.iter().map(|i| exact(i)).collect())
}

fn exact(id: &str) -> MatchPattern {
    MatchPattern::Exact(id.to_owned())
}

fn everyone() -> (Action, Vec<MatchPattern>) {
    (
        Action::Allow,
        vec![MatchPattern::Prefix(TRUST_DOMAIN.into())],
    )
}

fn labels_web() -> Value {
    json!({"kind": "Dataplane", "labels": {"app": "web"}})
}

#[test]
fn dataplane_labels_select_only_the_labelled_dataplanes() {
    let p = || vec![mtp("web", labels_web(), &[("backend", "Allow")])];
    assert_eq!(rbac(p()), vec![allow(&[BACKEND])]);
    let web2 = translate(&proxy("web-2", ClientKind::Envoy), &view(p()));
    // web-2 has no app label: nothing applies, so it denies everyone.
    let rbac2 = rbac_of_listener(&web2, WEB2);
    assert_eq!(rbac2, vec![allow(&[])]);
}

#[test]
fn dataplane_name_and_section_name_select_one_inbound() {
    let target =
        |section: &str| json!({"kind": "Dataplane", "name": "web-1", "sectionName": section});
    assert_eq!(
        rbac(vec![mtp("p", target("8080"), &[("backend", "Allow")])]),
        vec![allow(&[BACKEND])]
    );
    assert_eq!(
        rbac(vec![mtp("p", target("9090"), &[("backend", "Allow")])]),
        vec![allow(&[])]
    );
}

#[test]
fn the_more_specific_target_wins_whatever_the_action() {
    // A mesh-wide Allow with a Dataplane-labels Deny of backend.
    let mesh_allow = mtp("a-mesh", json!({"kind": "Mesh"}), &[("*", "Allow")]);
    let deny_backend = mtp("z-web", labels_web(), &[("backend", "Deny")]);
    assert_eq!(
        rbac(vec![mesh_allow, deny_backend]),
        vec![(Action::Deny, vec![exact(BACKEND)]), everyone()]
    );
    // A mesh-wide Deny of backend is overridden by a Dataplane-labels
    // Allow of everyone: Kuma does not let Deny win by itself.
    let mesh_deny = mtp("a-mesh", json!({"kind": "Mesh"}), &[("backend", "Deny")]);
    let web_allow = mtp("z-web", labels_web(), &[("*", "Allow")]);
    assert_eq!(rbac(vec![mesh_deny, web_allow]), vec![everyone()]);
    // A Dataplane by name outranks one by labels.
    let by_name = mtp(
        "z-name",
        json!({"kind": "Dataplane", "name": "web-1"}),
        &[("*", "Deny")],
    );
    let by_labels = mtp("a-labels", labels_web(), &[("*", "Allow")]);
    assert_eq!(rbac(vec![by_labels, by_name]), vec![allow(&[])]);
}

#[test]
fn equal_targets_let_the_name_that_sorts_first_win() {
    let allow_all = |n| mtp(n, labels_web(), &[("*", "Allow")]);
    let deny_all = |n| mtp(n, labels_web(), &[("*", "Deny")]);
    assert_eq!(
        rbac(vec![allow_all("aaa"), deny_all("bbb")]),
        vec![everyone()]
    );
    assert_eq!(
        rbac(vec![deny_all("aaa"), allow_all("bbb")]),
        vec![allow(&[])]
    );
}

#[test]
fn the_last_matching_from_entry_wins() {
    let p = mtp("p", labels_web(), &[("backend", "Allow"), ("*", "Deny")]);
    assert_eq!(rbac(vec![p]), vec![allow(&[])]);
    let p = mtp("p", labels_web(), &[("*", "Deny"), ("backend", "Allow")]);
    assert_eq!(rbac(vec![p]), vec![allow(&[BACKEND])]);
    let p = mtp(
        "p",
        labels_web(),
        &[
            ("*", "Allow"),
            ("backend", "Deny"),
            ("backend", "AllowWithShadowDeny"),
        ],
    );
    assert_eq!(rbac(vec![p]), vec![everyone()]);
}

#[test]
fn a_shared_memo_keeps_dataplanes_with_different_labels_apart() {
    let view = view(vec![mtp("web", labels_web(), &[("backend", "Allow")])]);
    let mut memo = Memo::default();
    let encoded = Default::default();
    let web1 = translate_shared(
        &proxy("web-1", ClientKind::Envoy),
        &view,
        &mut memo,
        &encoded,
    );
    let web2 = translate_shared(
        &proxy("web-2", ClientKind::Envoy),
        &view,
        &mut memo,
        &encoded,
    );
    assert_eq!(rbac_of_listener(&web1, WEB1), vec![allow(&[BACKEND])]);
    assert_eq!(rbac_of_listener(&web2, WEB2), vec![allow(&[])]);
}
