use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, TlsCertificate,
};
use envoy_types::pb::envoy::service::discovery::v3::Resource;
use prost::Name;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

use super::*;

fn any<M: prost::Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn response(
    type_url: &str,
    items: Vec<(&str, &str, Any)>,
    removed: &[&str],
) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        type_url: type_url.into(),
        resources: items
            .into_iter()
            .map(|(name, version, a)| Resource {
                name: name.into(),
                version: version.into(),
                resource: Some(a),
                ..Default::default()
            })
            .collect(),
        removed_resources: removed.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    }
}

fn inline(s: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(Specifier::InlineString(s.into())),
        ..Default::default()
    })
}

fn credential_secrets(name: &str) -> DeltaDiscoveryResponse {
    let cert = Secret {
        name: format!("tls:{name}"),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline("<chain>"),
            private_key: inline("<key>"),
            ..Default::default()
        })),
    };
    let ca = Secret {
        name: format!("ca:{name}"),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: inline("<ca>"),
                ..Default::default()
            },
        )),
    };
    response(
        SECRET_TYPE,
        vec![
            (&format!("tls:{name}"), "1", any(&cert)),
            (&format!("ca:{name}"), "1", any(&ca)),
        ],
        &[],
    )
}

fn link(name: &str, port: u32) -> pb::Link {
    pb::Link {
        name: name.into(),
        endpoints: vec![
            pb::LinkEndpoint {
                name: "inter-router".into(),
                host: "10.0.0.1".into(),
                port,
                group: String::new(),
            },
            pb::LinkEndpoint {
                name: "edge".into(),
                host: "10.0.0.1".into(),
                port: 45671,
                group: String::new(),
            },
        ],
        cost: 3,
        tls_credentials: "client".into(),
    }
}

#[test]
fn credentials_links_roles_listeners_and_connectors_map_to_the_link_config() {
    let mut r = RouterResources::default();
    assert!(r.apply(&credential_secrets("client")).rejected.is_empty());
    assert!(r.apply(&credential_secrets("server")).rejected.is_empty());
    let access = pb::RouterAccess {
        name: "skupper-router".into(),
        roles: vec![
            pb::RouterRole {
                name: "inter-router".into(),
                port: 55671,
                bind_host: String::new(),
            },
            pb::RouterRole {
                name: "edge".into(),
                port: 45671,
                bind_host: "10.9.9.9".into(),
            },
        ],
        tls_credentials: "server".into(),
    };
    let listener = |name: &str, host: &str| pb::Listener {
        name: name.into(),
        routing_key: "db".into(),
        host: host.into(),
        port: 5432,
        ..Default::default()
    };
    let weighted = pb::Listener {
        name: "multikeylistener/db".into(),
        host: "db".into(),
        port: 5433,
        keys: [("db-a", 3), ("db-b", 1)]
            .map(|(k, w)| pb::RoutingKeyWeight {
                routing_key: k.into(),
                weight: w,
            })
            .to_vec(),
        weighted: true,
        ..Default::default()
    };
    let connector = pb::Connector {
        name: "db".into(),
        routing_key: "db".into(),
        targets: vec!["10.0.0.7:5432".into(), "[fd00::7]:5432".into()],
    };
    for resp in [
        response(
            ROUTER_ACCESS_TYPE,
            vec![("skupper-router", "1", any(&access))],
            &[],
        ),
        response(
            LINK_TYPE,
            vec![("to-b", "1", any(&link("to-b", 55671)))],
            &[],
        ),
        response(
            ROUTER_LISTENER_TYPE,
            vec![
                ("by-ip", "1", any(&listener("by-ip", "127.0.0.9"))),
                ("by-name", "1", any(&listener("by-name", "backend"))),
                ("multikeylistener/db", "1", any(&weighted)),
            ],
            &[],
        ),
        response(CONNECTOR_TYPE, vec![("db", "1", any(&connector))], &[]),
    ] {
        let applied = r.apply(&resp);
        assert!(
            applied.changed && applied.rejected.is_empty(),
            "{:?}",
            applied.rejected
        );
    }

    let c = r.link_config("127.0.0.2", 15671, false);
    assert_eq!(c.credentials.len(), 2);
    assert_eq!(c.credentials["client"].tls_key, "<key>");
    assert_eq!(c.credentials["client"].ca_crt, "<ca>");
    let roles: Vec<_> = c
        .roles
        .iter()
        .map(|x| (x.name.as_str(), x.host.as_str(), x.port))
        .collect();
    assert_eq!(
        roles,
        [
            ("skupper-router/inter-router", "127.0.0.2", 55671),
            ("skupper-router/edge", "10.9.9.9", 45671)
        ]
    );
    assert_eq!(
        (c.links[0].host.as_str(), c.links[0].port, c.links[0].cost),
        ("10.0.0.1", 55671, 3)
    );
    // An edge router dials the edge endpoint.
    assert_eq!(r.link_config("127.0.0.2", 15671, true).links[0].port, 45671);
    let listeners: Vec<_> = c
        .listeners
        .iter()
        .map(|l| (l.name.as_str(), l.host.as_str()))
        .collect();
    assert_eq!(
        listeners,
        [("by-ip", "127.0.0.9"), ("by-name", "127.0.0.2")]
    );
    // A MultiKeyListener becomes a multi-key listener with its weights.
    let mkl = &c.multi_key_listeners[0];
    assert_eq!(
        (mkl.name.as_str(), mkl.host.as_str(), mkl.port),
        ("multikeylistener/db", "127.0.0.2", 5433)
    );
    assert_eq!(
        mkl.strategy,
        meshlink_link::KeyStrategy::Weighted(vec![("db-a".into(), 3), ("db-b".into(), 1)])
    );
    let targets: Vec<_> = c.connectors[0]
        .targets
        .iter()
        .map(|t| (t.host.as_str(), t.port))
        .collect();
    assert_eq!(targets, [("10.0.0.7", 5432), ("fd00::7", 5432)]);
    assert!(c.validate().is_empty(), "{:?}", c.validate());
}

#[test]
fn a_bad_resource_is_rejected_with_its_field_and_the_last_good_one_stays() {
    let mut r = RouterResources::default();
    r.apply(&response(
        LINK_TYPE,
        vec![("to-b", "1", any(&link("to-b", 55671)))],
        &[],
    ));
    let applied = r.apply(&response(
        LINK_TYPE,
        vec![("to-b", "2", any(&link("to-b", 0)))],
        &[],
    ));
    assert_eq!(applied.rejected.len(), 1);
    let e = applied.rejected[0].to_string();
    assert!(e.contains("endpoints[0].port") && e.contains("to-b"), "{e}");
    assert_eq!(r.links["to-b"].version, "1");
    assert_eq!(
        r.held_versions(LINK_TYPE)["to-b"],
        "1",
        "a rejected version is never claimed"
    );
    // A resource sent under another name than its own.
    let applied = r.apply(&response(
        LINK_TYPE,
        vec![("other", "1", any(&link("to-b", 1)))],
        &[],
    ));
    assert!(
        applied.rejected[0].error.contains("name"),
        "{:?}",
        applied.rejected
    );
    // An unknown type is refused as a whole.
    let applied = r.apply(&response(
        "type.googleapis.com/envoy.config.listener.v3.Listener",
        vec![],
        &[],
    ));
    assert!(applied.rejected[0].error.contains("router mode"));
    // Removal.
    let applied = r.apply(&response(LINK_TYPE, vec![], &["to-b"]));
    assert!(applied.changed && r.links.is_empty());
}

#[test]
fn a_credential_is_usable_only_with_both_its_secrets() {
    let mut r = RouterResources::default();
    let mut half = credential_secrets("client");
    half.resources.truncate(1);
    r.apply(&half);
    assert!(
        r.link_config("0.0.0.0", 15671, false)
            .credentials
            .is_empty()
    );
    r.apply(&credential_secrets("client"));
    assert_eq!(r.link_config("0.0.0.0", 15671, false).credentials.len(), 1);
}

#[test]
fn the_site_says_what_the_router_waits_for() {
    let mut r = RouterResources::default();
    assert!(
        r.site()
            .unwrap_err()
            .contains("waiting for the control plane")
    );
    r.apply(&response(SITE_TYPE, vec![], &[]));
    assert!(r.site().unwrap_err().contains("apply a Site"));
    let site = |id: &str| pb::Site {
        id: id.into(),
        name: "west".into(),
        edge: false,
        require_router_identity: false,
    };
    r.apply(&response(
        SITE_TYPE,
        vec![("west", "1", any(&site("")))],
        &[],
    ));
    assert!(r.site().unwrap_err().contains("no id yet"));
    r.apply(&response(
        SITE_TYPE,
        vec![("west", "2", any(&site("abc")))],
        &[],
    ));
    assert_eq!(
        r.site().unwrap(),
        SiteIdentity {
            id: "abc".into(),
            name: "west".into(),
            edge: false
        }
    );
}

#[test]
fn a_mesh_ingress_binds_the_mesh_port_and_waits_for_its_credential() {
    let mut r = RouterResources::default();
    let ingress = pb::MeshIngress {
        name: "default".into(),
        spiffe_id: "spiffe://default/meshlink.dev/router/a".into(),
        tls_credentials: "mesh-ingress.default".into(),
        keys: vec![pb::MeshIngressKey {
            sni: "k-0123456789abcdef.network.meshlink".into(),
            routing_key: "db/primary".into(),
            allowed: vec!["spiffe://default/web".into()],
        }],
    };
    assert!(
        r.link_config("10.0.0.5", 15671, false)
            .mesh_ingress
            .is_none()
    );
    let applied = r.apply(&response(
        MESH_INGRESS_TYPE,
        vec![("default", "1", any(&ingress))],
        &[],
    ));
    assert!(applied.rejected.is_empty(), "{:?}", applied.rejected);
    let m = r
        .link_config("10.0.0.5", 15671, false)
        .mesh_ingress
        .expect("an ingress");
    assert_eq!((m.host.as_str(), m.port), ("10.0.0.5", 15671));
    assert!(m.meshes[0].credential.is_none(), "warming until it arrives");
    assert_eq!(m.meshes[0].keys[0].routing_key, "db/primary");
    assert_eq!(m.meshes[0].keys[0].allowed, ["spiffe://default/web"]);
    r.apply(&credential_secrets("mesh-ingress.default"));
    let m = r.link_config("10.0.0.5", 0, false).mesh_ingress.unwrap();
    assert_eq!(m.port, 0);
    assert!(m.meshes[0].credential.is_some());
    // A key without a name is refused with its field; the last good stays.
    let mut bad = ingress.clone();
    bad.keys[0].sni.clear();
    let applied = r.apply(&response(
        MESH_INGRESS_TYPE,
        vec![("default", "2", any(&bad))],
        &[],
    ));
    assert!(
        applied.rejected[0].error.contains("keys[0].sni"),
        "{:?}",
        applied.rejected
    );
    assert_eq!(r.mesh_ingresses["default"].version, "1");
}
