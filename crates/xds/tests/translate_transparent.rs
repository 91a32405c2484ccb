//! Transparent proxying (issue 37): a Dataplane with
//! `networking.transparentProxying` gets virtual listeners on the VIPs of
//! the destinations it may reach, the capture listeners in Envoy's
//! original-destination form (IPv4, and IPv6 too in `DualStack` mode), and
//! inbound listeners that do not bind.

mod translate_fixtures;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use meshlink_api::Resource;
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, LISTENER_TYPE, MeshView, Snapshot, translate,
};
use prost::Message;
use serde_json::{Value, json};
use translate_fixtures::{dataplane, mesh, proxy};

const BACKEND_VIP: &str = "240.0.0.7";

/// `r` with `networking.transparentProxying` set to `tp`.
fn transparent(r: Resource, tp: Value) -> Resource {
    let mut v = r.to_json();
    v["spec"]["networking"]["transparentProxying"] = tp;
    Resource::from_json(v).unwrap_or_else(|e| panic!("{e:?}"))
}

/// The mesh with mTLS, `passthrough` as given, and VIPs for backend and
/// for `gone` (a service no Dataplane declares any more).
fn mesh_with_vips(passthrough: Option<bool>) -> Resource {
    let mut v = mesh(true).to_json();
    if let Some(p) = passthrough {
        v["spec"]["networking"] = json!({"outbound": {"passthrough": p}});
    }
    v["status"] = json!({"vips": {"backend": BACKEND_VIP, "gone": "240.0.0.9"}});
    Resource::from_json_unvalidated(v).unwrap_or_else(|e| panic!("{e:?}"))
}

fn snapshot(passthrough: Option<bool>, tp: Value) -> Snapshot {
    let view = MeshView::new(
        mesh_with_vips(passthrough),
        vec![
            transparent(dataplane("web-1", "10.0.0.1", "web", 8080, &[]), tp),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        Vec::new(),
    );
    translate(&proxy("web-1", ClientKind::MeshlinkProxy), &view)
}

fn listener(snap: &Snapshot, name: &str) -> Option<Listener> {
    snap.get(LISTENER_TYPE, name)
        .map(|v| Listener::decode(v.resource.value.as_slice()).unwrap())
}

fn cluster(snap: &Snapshot, name: &str) -> Option<Cluster> {
    snap.get(CLUSTER_TYPE, name)
        .map(|v| Cluster::decode(v.resource.value.as_slice()).unwrap())
}

/// `(address, port)` of a listener.
fn address(l: &Listener) -> (String, u32) {
    let Some(address::Address::SocketAddress(s)) =
        l.address.as_ref().and_then(|a| a.address.clone())
    else {
        panic!("{} has no socket address", l.name)
    };
    let Some(socket_address::PortSpecifier::PortValue(port)) = s.port_specifier else {
        panic!("{} has no port", l.name)
    };
    (s.address, port)
}

/// The cluster of a listener's single `tcp_proxy`.
fn tcp_cluster(l: &Listener) -> String {
    let f = &l.filter_chains[0].filters[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("{}: no typed config", l.name)
    };
    let tcp = TcpProxy::decode(any.value.as_slice()).unwrap();
    match tcp.cluster_specifier {
        Some(ClusterSpecifier::Cluster(c)) => c,
        other => panic!("{}: {other:?}", l.name),
    }
}

fn discovery(c: &Cluster) -> Option<DiscoveryType> {
    match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(t).ok(),
        _ => None,
    }
}

#[test]
fn a_transparent_proxy_gets_vip_listeners_and_capture_listeners() {
    let snap = snapshot(None, json!({}));
    // backend on its VIP, port 80, not bound, to backend's cluster.
    let vip = listener(&snap, &format!("outbound:{BACKEND_VIP}:80")).expect("a VIP listener");
    assert_eq!(address(&vip), (BACKEND_VIP.to_owned(), 80));
    assert_eq!(vip.bind_to_port.map(|b| b.value), Some(false));
    assert_eq!(tcp_cluster(&vip), "backend");
    assert!(cluster(&snap, "backend").is_some());
    // The same on backend-1's own address and port (not on web-1's own).
    let direct = listener(&snap, "outbound:10.0.0.2:8080").expect("backend-1's address");
    assert_eq!(direct.bind_to_port.map(|b| b.value), Some(false));
    assert_eq!(tcp_cluster(&direct), "backend");
    assert!(listener(&snap, "outbound:10.0.0.1:8080").is_none());
    // A VIP whose service no Dataplane declares gets nothing.
    assert!(listener(&snap, "outbound:240.0.0.9:80").is_none());
    // The outbound capture listener: 0.0.0.0:15001, original destination,
    // its own chain passing through to where the connection was going.
    let out = listener(&snap, "outbound:passthrough:ipv4").expect("outbound capture");
    assert_eq!(address(&out), ("0.0.0.0".to_owned(), 15001));
    assert_eq!(out.use_original_dst.map(|b| b.value), Some(true));
    assert_eq!(
        out.listener_filters[0].name,
        "envoy.filters.listener.original_dst"
    );
    assert_eq!(out.bind_to_port, None, "bound");
    assert_eq!(tcp_cluster(&out), "outbound:passthrough:ipv4");
    let pass = cluster(&snap, "outbound:passthrough:ipv4").expect("pass-through cluster");
    assert_eq!(discovery(&pass), Some(DiscoveryType::OriginalDst));
    // The inbound capture listener on 15006; the inbound does not bind.
    let inb = listener(&snap, "inbound:passthrough:ipv4").expect("inbound capture");
    assert_eq!(address(&inb), ("0.0.0.0".to_owned(), 15006));
    assert_eq!(tcp_cluster(&inb), "inbound:passthrough:ipv4");
    let web = listener(&snap, "inbound:10.0.0.1:8080").expect("web's inbound");
    assert_eq!(web.bind_to_port.map(|b| b.value), Some(false));
    // The DNS table: backend.mesh only (gone has no Dataplane).
    assert_eq!(
        dns_table(&snap),
        [("backend.mesh".to_owned(), vec![BACKEND_VIP.to_owned()])]
    );
}

#[test]
fn dual_stack_adds_ipv6_capture_listeners_and_dns_on_ipv6_loopback() {
    for (tp, passthrough) in [
        (json!({}), None),
        (json!({"ipFamilyMode": "DualStack"}), Some(false)),
    ] {
        let snap = snapshot(passthrough, tp);
        // The outbound capture on [::]:15001, its own ORIGINAL_DST
        // cluster (or, passthrough off, the disabled one, shared with
        // IPv4).
        let out = listener(&snap, "outbound:passthrough:ipv6").expect("IPv6 outbound capture");
        assert_eq!(address(&out), ("::".to_owned(), 15001));
        assert_eq!(out.use_original_dst.map(|b| b.value), Some(true));
        assert_eq!(
            out.listener_filters[0].name,
            "envoy.filters.listener.original_dst"
        );
        assert_eq!(out.bind_to_port, None, "bound");
        let Some(address::Address::SocketAddress(sa)) =
            out.address.as_ref().and_then(|a| a.address.clone())
        else {
            panic!("a socket address")
        };
        assert!(!sa.ipv4_compat, "IPv6 only: 0.0.0.0:15001 takes IPv4");
        if passthrough == Some(false) {
            assert_eq!(tcp_cluster(&out), "outbound:passthrough:disabled");
            assert!(cluster(&snap, "outbound:passthrough:ipv6").is_none());
        } else {
            assert_eq!(tcp_cluster(&out), "outbound:passthrough:ipv6");
            let pass = cluster(&snap, "outbound:passthrough:ipv6").expect("IPv6 pass-through");
            assert_eq!(discovery(&pass), Some(DiscoveryType::OriginalDst));
        }
        // The inbound capture on [::]:15006, to its ORIGINAL_DST cluster.
        let inb = listener(&snap, "inbound:passthrough:ipv6").expect("IPv6 inbound capture");
        assert_eq!(address(&inb), ("::".to_owned(), 15006));
        assert_eq!(inb.traffic_direction, 1, "INBOUND");
        assert_eq!(tcp_cluster(&inb), "inbound:passthrough:ipv6");
        let pass = cluster(&snap, "inbound:passthrough:ipv6").expect("IPv6 inbound cluster");
        assert_eq!(discovery(&pass), Some(DiscoveryType::OriginalDst));
        // The IPv4 pair is still there.
        assert!(listener(&snap, "outbound:passthrough:ipv4").is_some());
        assert!(listener(&snap, "inbound:passthrough:ipv4").is_some());
        // DNS: the same table on [::1]:15053, where ip6tables redirects
        // a query to an IPv6 nameserver.
        let dns6 = listener(&snap, "meshlink:dns:ipv6").expect("the IPv6 DNS listener");
        assert_eq!(address(&dns6), ("::1".to_owned(), 15053));
        assert_eq!(
            address(&listener(&snap, "meshlink:dns").unwrap()),
            ("127.0.0.1".to_owned(), 15053)
        );
        assert_eq!(dns_table_of(&snap, "meshlink:dns:ipv6"), dns_table(&snap));
    }
}

#[test]
fn ipv4_mode_captures_ipv4_only() {
    let snap = snapshot(None, json!({"ipFamilyMode": "IPv4"}));
    assert!(listener(&snap, "outbound:passthrough:ipv4").is_some());
    assert!(listener(&snap, "inbound:passthrough:ipv4").is_some());
    assert!(listener(&snap, "meshlink:dns").is_some());
    for name in [
        "outbound:passthrough:ipv6",
        "inbound:passthrough:ipv6",
        "meshlink:dns:ipv6",
    ] {
        assert!(listener(&snap, name).is_none(), "{name}");
    }
    assert!(cluster(&snap, "outbound:passthrough:ipv6").is_none());
    assert!(cluster(&snap, "inbound:passthrough:ipv6").is_none());
}

/// The names and addresses of the sidecar's DNS listener.
fn dns_table(snap: &Snapshot) -> Vec<(String, Vec<String>)> {
    dns_table_of(snap, "meshlink:dns")
}

/// The names and addresses of DNS listener `name`.
fn dns_table_of(snap: &Snapshot, name: &str) -> Vec<(String, Vec<String>)> {
    use envoy_types::pb::envoy::config::listener::v3::listener_filter::ConfigType;
    use envoy_types::pb::envoy::data::dns::v3::dns_table::dns_endpoint::EndpointConfig;
    use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::{
        DnsFilterConfig, dns_filter_config::server_context_config,
    };
    let l = listener(snap, name).expect("the DNS listener");
    let Some(ConfigType::TypedConfig(any)) = &l.listener_filters[0].config_type else {
        panic!("no DNS filter config")
    };
    let config = DnsFilterConfig::decode(any.value.as_slice()).unwrap();
    let Some(server_context_config::ConfigSource::InlineDnsTable(table)) =
        config.server_config.unwrap().config_source
    else {
        panic!("no inline DNS table")
    };
    table
        .virtual_domains
        .into_iter()
        .map(|d| {
            let addrs = match d.endpoint.and_then(|e| e.endpoint_config) {
                Some(EndpointConfig::AddressList(a)) => a.address,
                other => panic!("{}: {other:?}", d.name),
            };
            (d.name, addrs)
        })
        .collect()
}

#[test]
fn redirect_ports_reachable_services_and_passthrough_are_honoured() {
    let snap = snapshot(
        Some(false),
        json!({"redirectPortOutbound": 16001, "redirectPortInbound": 16006,
               "reachableServices": ["redis"]}),
    );
    assert!(
        listener(&snap, &format!("outbound:{BACKEND_VIP}:80")).is_none(),
        "backend is not reachable"
    );
    assert!(dns_table(&snap).is_empty(), "nor named");
    let out = listener(&snap, "outbound:passthrough:ipv4").unwrap();
    assert_eq!(address(&out).1, 16001);
    assert_eq!(
        address(&listener(&snap, "inbound:passthrough:ipv4").unwrap()).1,
        16006
    );
    // Passthrough off: to a cluster without endpoints.
    assert_eq!(tcp_cluster(&out), "outbound:passthrough:disabled");
    assert!(cluster(&snap, "outbound:passthrough:ipv4").is_none());
    let disabled = cluster(&snap, "outbound:passthrough:disabled").unwrap();
    assert_eq!(discovery(&disabled), Some(DiscoveryType::Static));
    let endpoints = disabled.load_assignment.unwrap().endpoints;
    assert!(endpoints.iter().all(|e| e.lb_endpoints.is_empty()));
}

#[test]
fn without_transparent_proxying_nothing_changes() {
    let view = MeshView::new(
        mesh_with_vips(None),
        vec![
            dataplane("web-1", "10.0.0.1", "web", 8080, &[]),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        Vec::new(),
    );
    let snap = translate(&proxy("web-1", ClientKind::MeshlinkProxy), &view);
    let names: Vec<&str> = snap
        .resources(LISTENER_TYPE)
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["inbound:10.0.0.1:8080"]);
    assert_eq!(
        listener(&snap, "inbound:10.0.0.1:8080")
            .unwrap()
            .bind_to_port,
        None
    );
}
