//! The router's mesh ingress (issue 10 §5): one MeshIngress per mTLS mesh
//! whose Dataplanes have routing-key outbounds, SNI per key, default-deny
//! authorization (only the identities that declare an outbound to a key),
//! sent with its two Secrets only once the router's certificate exists.

mod router_fixtures;

use meshlink_api::Resource;
use meshlink_xds::certify::MeshIngress;
use meshlink_xds::router::{
    MeshRouterIdentity, ca_secret_name, certificate_secret_name, translate_router,
};
use meshlink_xds::translate::{MESH_INGRESS_TYPE, SECRET_TYPE, names};
use prost::Message;
use router_fixtures::{SITE, site};
use serde_json::json;

fn mesh(name: &str, mtls: bool) -> Resource {
    let mut spec = json!({"trustDomain": format!("{name}.example")});
    if mtls {
        spec["mtls"] =
            json!({"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]});
    }
    Resource::from_json(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

fn client(mesh: &str, name: &str, service: &str, keys: &[&str]) -> Resource {
    let outbound: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| json!({"port": 15000 + i, "routingKey": k}))
        .collect();
    Resource::from_json(
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": mesh},
        "spec": {"networking": {"address": "10.0.0.1",
            "inbound": [{"port": 8080, "tags": {"kuma.io/service": service}}],
            "outbound": outbound}}}),
    )
    .unwrap()
}

fn view() -> meshlink_xds::router::SiteView {
    let mut v = meshlink_xds::router::SiteView::default();
    v.upsert(site(false));
    v.upsert(mesh("default", true));
    v.upsert(mesh("plain", false));
    v.upsert(client(
        "default",
        "web-1",
        "web",
        &["db/primary:5432", "cache"],
    ));
    v.upsert(client("default", "web-2", "web", &["cache"]));
    v.upsert(client("default", "batch-1", "batch", &["cache"]));
    v.upsert(client("default", "other-1", "other", &[]));
    v.upsert(client("plain", "legacy-1", "legacy", &["cache"]));
    v
}

fn identity() -> MeshRouterIdentity {
    MeshRouterIdentity {
        chain_pem: "-----BEGIN CERTIFICATE-----\nrouter\n-----END CERTIFICATE-----\n".into(),
        key_pem: "-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n".into(),
        bundle_pem: "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n".into(),
        spiffe_id: names::router_spiffe_id("default.example", SITE),
    }
}

#[test]
fn without_the_routers_certificate_the_ingress_is_withheld() {
    let config = translate_router(&view());
    assert!(config.snapshot.get(MESH_INGRESS_TYPE, "default").is_none());
    let w = config
        .withheld
        .iter()
        .find(|w| w.kind == "MeshIngress")
        .expect("withheld");
    assert_eq!(w.name, "default");
    assert!(
        w.reason
            .contains("spiffe://default.example/meshlink.dev/router/dmz-a"),
        "{}",
        w.reason
    );
    // A certificate for another SPIFFE ID (the site was renamed) is not used.
    let mut v = view();
    let mut stale = identity();
    stale.spiffe_id = names::router_spiffe_id("default.example", "old-name");
    v.mesh_identities.insert("default".into(), stale);
    assert!(
        translate_router(&v)
            .snapshot
            .get(MESH_INGRESS_TYPE, "default")
            .is_none()
    );
}

#[test]
fn each_key_allows_only_the_identities_that_declare_an_outbound_to_it() {
    let mut v = view();
    v.mesh_identities.insert("default".into(), identity());
    let config = translate_router(&v);
    assert!(
        config.withheld.iter().all(|w| w.kind != "MeshIngress"),
        "{:?}",
        config.withheld
    );
    let any = &config
        .snapshot
        .get(MESH_INGRESS_TYPE, "default")
        .expect("the mTLS mesh's ingress")
        .resource;
    let ingress = MeshIngress::decode(any.value.as_slice()).unwrap();
    assert_eq!(ingress.spiffe_id, identity().spiffe_id);
    let keys: Vec<(&str, &str, Vec<&str>)> = ingress
        .keys
        .iter()
        .map(|k| {
            (
                k.routing_key.as_str(),
                k.sni.as_str(),
                k.allowed.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let (cache, db) = (
        names::network_sni("cache"),
        names::network_sni("db/primary:5432"),
    );
    assert_eq!(
        keys,
        [
            (
                "cache",
                cache.as_str(),
                vec![
                    "spiffe://default.example/batch",
                    "spiffe://default.example/web"
                ]
            ),
            (
                "db/primary:5432",
                db.as_str(),
                vec!["spiffe://default.example/web"]
            ),
        ]
    );
    // The mesh without mTLS keeps the plain path: no ingress.
    assert!(config.snapshot.get(MESH_INGRESS_TYPE, "plain").is_none());
    // I2: both Secrets it names are in the same snapshot.
    for name in [
        certificate_secret_name(&ingress.tls_credentials),
        ca_secret_name(&ingress.tls_credentials),
    ] {
        assert!(config.snapshot.get(SECRET_TYPE, &name).is_some(), "{name}");
    }
}

#[test]
fn no_routing_key_outbound_no_ingress() {
    let mut v = meshlink_xds::router::SiteView::default();
    v.upsert(site(false));
    v.upsert(mesh("default", true));
    v.upsert(client("default", "other-1", "other", &[]));
    v.mesh_identities.insert("default".into(), identity());
    let config = translate_router(&v);
    assert!(config.snapshot.get(MESH_INGRESS_TYPE, "default").is_none());
    assert!(config.withheld.is_empty(), "{:?}", config.withheld);
}
