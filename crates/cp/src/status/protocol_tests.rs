//! Unit tests of the Dataplane `ProtocolAgreed` condition, checked against
//! the translator's own rule.

use meshlink_api::Resource;
use meshlink_xds::translate::MeshView;
use meshlink_xds::translate::protocol::service;
use serde_json::json;

use super::*;

fn dp(name: &str, inbounds: &[(&str, Option<&str>)]) -> Resource {
    let inbound: Vec<serde_json::Value> = inbounds
        .iter()
        .enumerate()
        .map(|(i, (service, proto))| {
            let mut tags = json!({"kuma.io/service": service});
            if let Some(p) = proto {
                tags[PROTOCOL_TAG] = (*p).into();
            }
            json!({"port": 8080 + i, "tags": tags})
        })
        .collect();
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": "m"},
        "spec": {"networking": {"address": "10.0.0.1", "inbound": inbound}},
    }))
    .expect("a valid Dataplane")
}

fn key(name: &str) -> ProxyKey {
    ProxyKey::new("m", name)
}

fn add(index: &mut ServiceProtocols, r: &Resource) {
    index.upsert(&key(r.name()), r.spec.as_dataplane().expect("a Dataplane"));
}

/// The translator's protocol for `svc` over `dps`.
fn translated(dps: &[Resource], svc: &str) -> Protocol {
    let mesh = Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": "m"}, "spec": {},
    }))
    .expect("a valid Mesh");
    service(&MeshView::new(mesh, dps.to_vec(), Vec::new()), svc)
}

#[test]
fn disagreeing_inbounds_put_a_condition_on_each_dataplane_naming_the_others() {
    let mut index = ServiceProtocols::default();
    let a = dp("api-1", &[("api", Some("http")), ("db", None)]);
    let b = dp("api-2", &[("api", None)]);
    add(&mut index, &a);
    add(&mut index, &b);
    let mut work = index.take_work();
    work.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(work, [key("api-1"), key("api-2")]);

    assert_eq!(translated(&[a.clone(), b.clone()], "api"), Protocol::Tcp);
    let c = index.condition(&key("api-1")).expect("a mismatch");
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, MISMATCH)
    );
    assert!(
        c.message
            .contains("inbound 8080 of service api declares http")
            && c.message.contains("api-2 (tcp)")
            && c.message.contains("served as TCP")
            && c.message.contains("kuma.io/protocol"),
        "{}",
        c.message
    );
    assert!(!c.message.contains("db"), "db agrees: {}", c.message);
    let c = index.condition(&key("api-2")).expect("a mismatch");
    assert!(c.message.contains("api-1 (http)"), "{}", c.message);

    // The fix: api-2 declares http too.
    let fixed = dp("api-2", &[("api", Some("http"))]);
    add(&mut index, &fixed);
    assert_eq!(translated(&[a, fixed], "api"), Protocol::Http);
    let mut work = index.take_work();
    work.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(work, [key("api-1"), key("api-2")]);
    assert!(index.condition(&key("api-1")).is_none());
    assert!(index.condition(&key("api-2")).is_none());
}

#[test]
fn unchanged_declarations_cost_nothing_and_deletion_clears_the_others() {
    let mut index = ServiceProtocols::default();
    let a = dp("a", &[("api", Some("grpc"))]);
    let b = dp("b", &[("api", Some("http"))]);
    add(&mut index, &a);
    add(&mut index, &b);
    index.take_work();
    add(&mut index, &a);
    assert!(index.take_work().is_empty(), "same declarations: no work");
    assert!(index.condition(&key("a")).is_some());

    index.remove(&key("b"));
    assert_eq!(index.take_work(), [key("a")]);
    assert!(index.condition(&key("a")).is_none(), "a is alone now");
}

#[test]
fn exclusive_meshes_have_no_tag_destinations_and_no_condition() {
    let mut index = ServiceProtocols::default();
    add(&mut index, &dp("a", &[("api", Some("http"))]));
    add(&mut index, &dp("b", &[("api", Some("tcp"))]));
    index.take_work();
    index.set_exclusive("m", true);
    assert_eq!(index.take_work().len(), 2);
    assert!(index.condition(&key("a")).is_none());
    index.set_exclusive("m", false);
    assert!(index.condition(&key("a")).is_some());
}

#[test]
fn the_list_of_others_is_bounded() {
    let mut index = ServiceProtocols::default();
    add(&mut index, &dp("h", &[("api", Some("http"))]));
    for i in 0..8 {
        add(&mut index, &dp(&format!("t{i}"), &[("api", None)]));
    }
    let c = index.condition(&key("h")).expect("a mismatch");
    assert!(
        c.message.contains("t0 (tcp), t1 (tcp)") && c.message.contains("(and 3 more)"),
        "{}",
        c.message
    );
    assert!(!c.message.contains("t7"), "{}", c.message);
}
