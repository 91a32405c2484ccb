//! An inbound's `name`: a MeshTrafficPermission `targetRef.sectionName`
//! selects the inbound by name (then by port), and proxies whose inbounds
//! differ only by name do not share an RBAC memo entry. An inbound's
//! `serviceAddress` is where its local cluster sends traffic.

mod translate_fixtures;

use envoy_types::pb::envoy::config::rbac::v3::rbac::Action;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, Memo, MeshView, translate, translate_shared};
use serde_json::{Value, json};
use translate_fixtures::{MESH, dataplane, mesh, proxy, rbac_of_listener, render};

const WEB1: &str = "inbound:10.0.0.1:8080";
const WEB2: &str = "inbound:10.0.0.4:8080";
const BACKEND: &str = "spiffe://example.org/backend";

/// `r` with its first inbound named `name`.
fn named(r: Resource, name: &str) -> Resource {
    let mut v = r.to_json();
    v["spec"]["networking"]["inbound"][0]["name"] = json!(name);
    Resource::from_json(v).unwrap_or_else(|e| panic!("{e:?}"))
}

/// A permission for the inbounds `target` selects, allowing backend.
fn mtp(target: Value) -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": "p", "mesh": MESH},
        "spec": {"targetRef": target, "from": [{
            "targetRef": {"kind": "MeshService", "name": "backend"},
            "default": {"action": "Allow"},
        }]},
    }))
    .unwrap_or_else(|e| panic!("{e:?}"))
}

/// web-1's inbound is named `http`, web-2's `metrics`; both listen on 8080.
fn rbac_of_both(target: Value) -> [Vec<(Action, Vec<MatchPattern>)>; 2] {
    let view = MeshView::new(
        mesh(true),
        vec![
            named(dataplane("web-1", "10.0.0.1", "web", 8080, &[]), "http"),
            named(dataplane("web-2", "10.0.0.4", "web", 8080, &[]), "metrics"),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        vec![mtp(target)],
    );
    // One memo for both, as the hub shares it.
    let mut memo = Memo::default();
    let encoded = Default::default();
    let mut one = |name: &str, listener: &str| {
        let snap = translate_shared(&proxy(name, ClientKind::Envoy), &view, &mut memo, &encoded);
        rbac_of_listener(&snap, listener)
    };
    [one("web-1", WEB1), one("web-2", WEB2)]
}

fn allow(ids: &[&str]) -> (Action, Vec<MatchPattern>) {
    (
        Action::Allow,
        ids.iter()
            .map(|i| MatchPattern::Exact((*i).into()))
            .collect(),
    )
}

#[test]
fn section_name_selects_an_inbound_by_its_name() {
    let [web1, web2] = rbac_of_both(json!({"kind": "Dataplane", "sectionName": "http"}));
    assert_eq!(web1, vec![allow(&[BACKEND])]);
    assert_eq!(web2, vec![allow(&[])], "web-2's inbound is named metrics");
}

#[test]
fn section_name_falls_back_to_the_port_for_named_inbounds() {
    let [web1, web2] = rbac_of_both(json!({"kind": "Dataplane", "sectionName": "8080"}));
    assert_eq!(web1, vec![allow(&[BACKEND])]);
    assert_eq!(web2, vec![allow(&[BACKEND])]);
}

#[test]
fn dataplane_name_with_section_name_selects_one_named_inbound() {
    let target = json!({"kind": "Dataplane", "name": "web-2", "sectionName": "metrics"});
    let [web1, web2] = rbac_of_both(target);
    assert_eq!(web1, vec![allow(&[])]);
    assert_eq!(web2, vec![allow(&[BACKEND])]);
}

#[test]
fn service_address_is_the_local_cluster_endpoint() {
    let with = |address: Option<&str>| {
        let mut web = dataplane("web-1", "10.0.0.1", "web", 8080, &[]).to_json();
        if let Some(a) = address {
            web["spec"]["networking"]["inbound"][0]["serviceAddress"] = json!(a);
        }
        let view = MeshView::new(
            mesh(false),
            vec![Resource::from_json(web).unwrap_or_else(|e| panic!("{e:?}"))],
            vec![],
        );
        render(&translate(&proxy("web-1", ClientKind::Envoy), &view))
    };
    let moved = with(Some("127.0.0.9"));
    assert!(moved.contains("127.0.0.9"), "{moved}");
    let default = with(None);
    assert!(!default.contains("127.0.0.9"), "{default}");
    assert!(default.contains("127.0.0.1"), "{default}");
}
