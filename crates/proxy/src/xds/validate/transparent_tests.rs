//! What the translator sends a transparent proxy is accepted, and the
//! capture form's bad shapes are refused naming the field.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::{Listener, ListenerFilter};
use envoy_types::pb::google::protobuf::BoolValue;
use envoy_types::util::pack_any;
use meshlink_api::Resource;
use meshlink_xds::translate::{ClientKind, MeshView, ProxyContext, SecretsInput, translate};
use prost::Message as _;
use serde_json::json;

use super::*;
use crate::xds::apply::{CLUSTER, LISTENER};

fn resource(v: serde_json::Value) -> Resource {
    Resource::from_json_unvalidated(v).unwrap_or_else(|e| panic!("{e:?}"))
}

/// web-1 (transparent, `ipFamilyMode` as given) and backend-1 and
/// backend-2 (one IPv4, one IPv6 address), backend with a VIP; mTLS on.
fn snapshot(passthrough: bool, mode: &str) -> meshlink_xds::translate::Snapshot {
    let mesh = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": "default"},
        "spec": {"mtls": {"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]},
                 "networking": {"outbound": {"passthrough": passthrough}}},
        "status": {"vips": {"backend": "240.0.0.7"}},
    }));
    let dp = |name: &str, addr: &str, svc: &str, protocol: &str, tp: bool| {
        let mut networking = json!({"address": addr, "inbound": [{"port": 8080,
            "tags": {"kuma.io/service": svc, "kuma.io/protocol": protocol}}]});
        if tp {
            networking["transparentProxying"] = json!({"ipFamilyMode": mode});
        }
        resource(
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": name, "mesh": "default"}, "spec": {"networking": networking}}),
        )
    };
    let view = MeshView::new(
        mesh,
        vec![
            dp("web-1", "10.0.0.1", "web", "tcp", true),
            dp("backend-1", "10.0.0.2", "backend", "http", false),
            dp("backend-2", "fd77::2", "backend", "http", false),
        ],
        Vec::new(),
    );
    let proxy = ProxyContext {
        mesh: "default".into(),
        name: "web-1".into(),
        client: ClientKind::MeshlinkProxy,
        secrets: SecretsInput {
            identity: None,
            trust_bundle_pem: None,
            identity_policy: true,
        },
    };
    translate(&proxy, &view)
}

#[test]
fn everything_a_transparent_proxy_is_sent_is_accepted() {
    for (passthrough, mode) in [
        (true, "DualStack"),
        (false, "DualStack"),
        (true, "IPv4"),
        (false, "IPv4"),
    ] {
        let dual = mode == "DualStack";
        let snap = snapshot(passthrough, mode);
        let mut listeners = std::collections::BTreeMap::new();
        let mut dns = Vec::new();
        for (name, r) in snap.resources(LISTENER) {
            if meshlink_proto::dns_listener::LISTENER_NAMES.contains(&name.as_str()) {
                let spec = super::dns_listener(&r.resource).expect("mesh DNS");
                assert_eq!(spec.table.len(), 1, "backend.mesh");
                dns.push((name.clone(), spec.bind.to_string()));
                continue;
            }
            let l = listener(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
            listeners.insert(
                name.clone(),
                (l.bind, l.original_dst, l.address.to_string()),
            );
        }
        let want = |bind, original_dst, addr: &str| (bind, original_dst, addr.to_owned());
        let mut expected = vec![
            ("inbound:10.0.0.1:8080", want(false, false, "10.0.0.1:8080")),
            (
                "inbound:passthrough:ipv4",
                want(true, true, "0.0.0.0:15006"),
            ),
            (
                "outbound:10.0.0.2:8080",
                want(false, false, "10.0.0.2:8080"),
            ),
            ("outbound:240.0.0.7:80", want(false, false, "240.0.0.7:80")),
            (
                "outbound:fd77::2:8080",
                want(false, false, "[fd77::2]:8080"),
            ),
            (
                "outbound:passthrough:ipv4",
                want(true, true, "0.0.0.0:15001"),
            ),
        ];
        let mut expected_dns = vec![("meshlink:dns", "127.0.0.1:15053")];
        if dual {
            expected.extend([
                ("inbound:passthrough:ipv6", want(true, true, "[::]:15006")),
                ("outbound:passthrough:ipv6", want(true, true, "[::]:15001")),
            ]);
            expected_dns.push(("meshlink:dns:ipv6", "[::1]:15053"));
        }
        assert_eq!(
            listeners,
            expected
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
            "{mode}"
        );
        assert_eq!(
            dns,
            expected_dns
                .into_iter()
                .map(|(n, a)| (n.to_owned(), a.to_owned()))
                .collect::<Vec<_>>(),
            "{mode}"
        );
        let mut discovery = std::collections::BTreeMap::new();
        for (name, r) in snap.resources(CLUSTER) {
            let c = cluster(&r.resource).unwrap_or_else(|e| panic!("{name}: {e}"));
            discovery.insert(name.clone(), c.discovery);
        }
        let families: &[&str] = if dual { &["ipv4", "ipv6"] } else { &["ipv4"] };
        for family in families {
            assert_eq!(
                discovery[&format!("inbound:passthrough:{family}")],
                Discovery::OriginalDst
            );
            let outbound = format!("outbound:passthrough:{family}");
            if passthrough {
                assert_eq!(discovery[&outbound], Discovery::OriginalDst);
            } else {
                assert!(!discovery.contains_key(&outbound), "{outbound}");
            }
        }
        if !dual {
            assert!(!discovery.contains_key("inbound:passthrough:ipv6"));
            assert!(!discovery.contains_key("outbound:passthrough:ipv6"));
        }
        if !passthrough {
            assert_eq!(
                discovery["outbound:passthrough:disabled"],
                Discovery::Static(Vec::new())
            );
        }
    }
}

fn capture_listener() -> Listener {
    let snap = snapshot(true, "DualStack");
    let r = snap
        .resources(LISTENER)
        .get("outbound:passthrough:ipv4")
        .expect("the capture listener")
        .clone();
    Listener::decode(r.resource.value.as_slice()).unwrap()
}

fn refused(l: Listener) -> String {
    listener(&pack_any(l)).unwrap_err().to_string()
}

#[test]
fn bad_capture_shapes_are_refused_naming_the_field() {
    let mut l = capture_listener();
    l.listener_filters.clear();
    assert!(
        refused(l).starts_with("listener_filters: use_original_dst needs the"),
        "a capture listener without its filter"
    );
    let mut l = capture_listener();
    l.use_original_dst = None;
    assert!(refused(l).starts_with("use_original_dst: the envoy.filters.listener.original_dst"));
    let mut l = capture_listener();
    l.listener_filters[0].name = "envoy.filters.listener.tls_inspector".into();
    assert!(refused(l).starts_with(
        "listener_filters[0]: listener filter \"envoy.filters.listener.tls_inspector\" is not supported"
    ));
    let mut l = capture_listener();
    l.listener_filters.push(ListenerFilter {
        name: "second".into(),
        ..Default::default()
    });
    assert!(refused(l).starts_with("listener_filters: 2 listener filters"));
    let mut l = capture_listener();
    l.bind_to_port = Some(BoolValue { value: false });
    assert!(refused(l).starts_with("bind_to_port: a capture listener"));
}

#[test]
fn an_ipv6_listener_that_would_take_ipv4_too_is_refused() {
    use envoy_types::pb::envoy::config::core::v3::address;
    let snap = snapshot(true, "DualStack");
    let r = snap.resources(LISTENER)["outbound:passthrough:ipv6"].clone();
    let mut l = Listener::decode(r.resource.value.as_slice()).unwrap();
    let Some(address::Address::SocketAddress(sa)) =
        l.address.as_mut().and_then(|a| a.address.as_mut())
    else {
        panic!("a socket address")
    };
    sa.ipv4_compat = true;
    assert!(
        refused(l).starts_with("address.socket_address.ipv4_compat: is not supported"),
        "[::] with ipv4_compat would clash with the IPv4 capture listener"
    );
}

#[test]
fn an_original_dst_cluster_needs_cluster_provided_balancing() {
    let c = Cluster {
        name: "pass".into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: cluster::LbPolicy::RoundRobin as i32,
        ..Default::default()
    };
    let e = cluster(&pack_any(c)).unwrap_err().to_string();
    assert!(
        e.starts_with("lb_policy: an ORIGINAL_DST cluster needs lb_policy CLUSTER_PROVIDED"),
        "{e}"
    );
}
