//! Transparent proxying of a sidecar (the Dataplane's
//! `networking.transparentProxying`; issue 37).
//!
//! What the sidecar gets besides its explicit listeners, in Envoy's own
//! form (as Kuma sends it), so an Envoy sidecar would behave the same:
//! - a *virtual* listener (`bind_to_port: false`) per reachable
//!   destination with a VIP: `outbound:<vip>:80` for a `kuma.io/service`,
//!   `outbound:<vip>:<port>` per port of a MeshService; each is the
//!   outbound listener an explicit outbound to it would get (routes,
//!   policies, mTLS), built by the sidecar translator; and the same on
//!   each of the service's Dataplanes' own `address:port` (a call to a
//!   workload's real address is the service's, balanced like a VIP call);
//! - the capture listeners on the redirect ports (on `0.0.0.0`, and in
//!   `DualStack` mode on `[::]` too, since the rules redirect IPv6), with
//!   `use_original_dst` and the `original_dst` listener filter: a
//!   redirected connection is handed to the listener of its original
//!   destination, and one without such a listener takes the capture
//!   listener's own chain: outbound, to where it was going (the Mesh's
//!   `networking.outbound.passthrough`, Kuma's default) or to a cluster
//!   without endpoints (refused, counted); inbound, to the application;
//! - the inbound listeners do not bind (the application listens on its
//!   own port; redirected connections reach them through the inbound
//!   capture listener).
//!
//! Owns which destinations a transparent proxy reaches and the capture
//! listeners' shape. Which VIP a destination has is the control plane's
//! (the Mesh's status, [`MeshView::vips`]).

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType, cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::google::protobuf::BoolValue;
use envoy_types::util::pack_any;
use meshlink_api::spec::{DataplaneSpec, TransparentProxying};

use super::endpoints::{assignment, socket_address};
use super::routes::Backend;
use super::sidecar::{CONNECT_TIMEOUT, tcp_proxy};
use super::{MeshView, Snapshot};

/// The port of a `kuma.io/service`'s virtual listener (`<service>.mesh`
/// on its VIP), as in Kuma.
pub const SERVICE_VIP_PORT: u16 = 80;
/// Envoy's name of the listener filter that reads a redirected
/// connection's original destination.
pub(super) const ORIGINAL_DST_FILTER: &str = "envoy.filters.listener.original_dst";
/// The outbound capture listener, and its pass-through cluster (Kuma's
/// names).
pub const OUTBOUND_PASSTHROUGH: &str = "outbound:passthrough:ipv4";
/// The inbound capture listener, and its pass-through cluster.
pub const INBOUND_PASSTHROUGH: &str = "inbound:passthrough:ipv4";
/// The IPv6 outbound capture listener (`[::]`), and its pass-through
/// cluster: sent only in `DualStack` mode, where ip6tables redirects IPv6
/// to the same port.
pub const OUTBOUND_PASSTHROUGH_V6: &str = "outbound:passthrough:ipv6";
/// The IPv6 inbound capture listener, and its pass-through cluster.
pub const INBOUND_PASSTHROUGH_V6: &str = "inbound:passthrough:ipv6";
/// The cluster without endpoints that captured connections to
/// destinations outside the mesh go to while the Mesh's passthrough is
/// off: each is closed at once and counted on it.
pub const PASSTHROUGH_DISABLED: &str = "outbound:passthrough:disabled";

/// The `kuma.io/service`s a transparent proxy reaches by VIP, with their
/// VIPs: declared by some Dataplane now, allowed by `reachableServices`,
/// and given a VIP. Not in a mesh whose MeshServices are exclusive.
pub(super) fn service_vips<'a>(
    view: &'a MeshView,
    tp: &TransparentProxying,
) -> Vec<(&'a str, &'a str)> {
    let Some(vips) = view.vips() else {
        return Vec::new();
    };
    if !view.tag_destinations() {
        return Vec::new();
    }
    vips.vips
        .iter()
        .filter(|(s, _)| view.declares(s) && tp.reaches(s))
        .map(|(s, ip)| (s.as_str(), ip.as_str()))
        .collect()
}

/// The `(address, port)` of every inbound of the proxy's own Dataplane
/// `dp` (a call there is its own listener's, not a destination's).
pub(super) fn own_inbounds(dp: &DataplaneSpec) -> Vec<(String, u16)> {
    dp.networking
        .inbound
        .iter()
        .map(|i| {
            (
                i.effective_address(&dp.networking.address).to_owned(),
                i.port.get(),
            )
        })
        .collect()
}

/// The `(address, port)` of every inbound of `service`'s Dataplanes but
/// those in `own` ([`own_inbounds`]).
pub(super) fn endpoints(
    view: &MeshView,
    service: &str,
    own: &[(String, u16)],
) -> Vec<(String, u16)> {
    view.endpoints_of(service)
        .filter(|e| !own.contains(e))
        .cloned()
        .collect()
}

/// The MeshServices a transparent proxy reaches by VIP, with their VIPs.
pub(super) fn mesh_service_vips<'a>(
    view: &'a MeshView,
    tp: &TransparentProxying,
) -> Vec<(&'a str, &'a str)> {
    let Some(vips) = view.vips() else {
        return Vec::new();
    };
    vips.mesh_service_vips
        .iter()
        .filter(|(n, _)| view.mesh_service(n).is_some() && tp.reaches(n))
        .map(|(n, ip)| (n.as_str(), ip.as_str()))
        .collect()
}

/// Every destination Dataplane `dp` reaches through transparent
/// proxying (none without it), for the hub's index of who calls whom.
pub(crate) fn transparent_destinations(view: &MeshView, dp: &DataplaneSpec) -> Vec<Backend> {
    let Some(tp) = &dp.networking.transparent_proxying else {
        return Vec::new();
    };
    let mut out: Vec<Backend> = service_vips(view, tp)
        .into_iter()
        .map(|(s, _)| Backend::Service(s.to_owned()))
        .collect();
    for (name, _) in mesh_service_vips(view, tp) {
        for p in view.mesh_service(name).into_iter().flat_map(|m| &m.ports) {
            out.push(Backend::MeshService(name.to_owned(), p.port.get()));
        }
    }
    out
}

/// The names a transparent proxy's DNS answers, with their VIP:
/// `<service>.<domain>` and a MeshService's `<name>.svc.<domain>.local`
/// (Kuma's default hostname), sorted.
pub(super) fn dns_names(view: &MeshView, tp: &TransparentProxying) -> Vec<(String, String)> {
    let domain = view.dns_domain();
    let mut out: Vec<(String, String)> = service_vips(view, tp)
        .into_iter()
        .map(|(s, ip)| (format!("{s}.{domain}"), ip.to_owned()))
        .chain(
            mesh_service_vips(view, tp)
                .into_iter()
                .map(|(n, ip)| (format!("{n}.svc.{domain}.local"), ip.to_owned())),
        )
        .collect();
    out.sort();
    out
}

/// How long a resolver may keep a mesh name's answer: short, so a
/// deleted destination stops resolving within a second or two even
/// behind a caching resolver.
pub(super) const DNS_ANSWER_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// The sidecar's DNS Listeners (Envoy's DNS filter on UDP, where the
/// rules send the workload's queries): `meshlink:dns` on
/// `127.0.0.1:15053` and, in `DualStack` mode, `meshlink:dns:ipv6` on
/// `[::1]:15053` (ip6tables' REDIRECT of a query to an IPv6 nameserver
/// lands on `::1`, the loopback of its family). Both hold the names of
/// [`dns_names`]; names under the mesh's domains that are not among them
/// are answered NXDOMAIN, others go to the workload's own resolvers.
pub(super) fn dns(snap: &mut Snapshot, view: &MeshView, tp: &TransparentProxying) {
    use meshlink_proto::dns_listener::{DEFAULT_PORT, LISTENER_NAME, LISTENER_NAME_IPV6};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
    let table: Vec<(String, Vec<std::net::IpAddr>)> = dns_names(view, tp)
        .into_iter()
        .filter_map(|(name, ip)| Some((name, vec![ip.parse().ok()?])))
        .collect();
    let domain = view.dns_domain();
    let suffixes = [domain.to_owned(), format!("svc.{domain}.local")];
    let mut binds = vec![(
        LISTENER_NAME,
        SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT)),
    )];
    if tp.dual_stack() {
        binds.push((
            LISTENER_NAME_IPV6,
            SocketAddr::from((Ipv6Addr::LOCALHOST, DEFAULT_PORT)),
        ));
    }
    for (name, bind) in binds {
        let listener =
            meshlink_proto::dns_listener::listener(name, bind, &table, &suffixes, DNS_ANSWER_TTL);
        snap.insert(name.to_owned(), &listener);
    }
}

/// The capture listeners of a transparent proxy and the clusters their
/// own chains use: IPv4 on `0.0.0.0`, and in `DualStack` mode the same
/// pair for IPv6 on `[::]` (same ports, each with its own pass-through
/// cluster, as Kuma).
pub(super) fn capture(snap: &mut Snapshot, view: &MeshView, tp: &TransparentProxying) {
    let passthrough = view
        .mesh()
        .spec
        .as_mesh()
        .is_none_or(meshlink_api::spec::MeshSpec::passthrough);
    if !passthrough {
        let cluster = Cluster {
            name: PASSTHROUGH_DISABLED.to_owned(),
            connect_timeout: Some(CONNECT_TIMEOUT),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
            load_assignment: Some(assignment(PASSTHROUGH_DISABLED.to_owned(), [])),
            ..Default::default()
        };
        snap.insert(PASSTHROUGH_DISABLED.to_owned(), &cluster);
    }
    let mut families = vec![("0.0.0.0", OUTBOUND_PASSTHROUGH, INBOUND_PASSTHROUGH)];
    if tp.dual_stack() {
        families.push(("::", OUTBOUND_PASSTHROUGH_V6, INBOUND_PASSTHROUGH_V6));
    }
    for (any, outbound, inbound) in families {
        let outbound_cluster = if passthrough {
            snap.insert(outbound.to_owned(), &original_dst_cluster(outbound));
            outbound
        } else {
            PASSTHROUGH_DISABLED
        };
        snap.insert(
            outbound.to_owned(),
            &capture_listener(
                outbound,
                (any, tp.outbound_port()),
                outbound_cluster,
                TrafficDirection::Outbound,
            ),
        );
        snap.insert(inbound.to_owned(), &original_dst_cluster(inbound));
        snap.insert(
            inbound.to_owned(),
            &capture_listener(
                inbound,
                (any, tp.inbound_port()),
                inbound,
                TrafficDirection::Inbound,
            ),
        );
    }
}

/// `bind_to_port: false`, for the listeners a capture listener hands
/// connections to.
pub(super) fn not_bound() -> Option<BoolValue> {
    Some(BoolValue { value: false })
}

/// A capture listener on `(unspecified address, port)` whose own chain
/// is a `tcp_proxy` to `cluster`. On `[::]` Envoy binds IPv6 only
/// (`ipv4_compat` unset), so it does not clash with `0.0.0.0` on the same
/// port.
fn capture_listener(
    name: &str,
    (any, port): (&str, u16),
    cluster: &str,
    direction: TrafficDirection,
) -> Listener {
    Listener {
        name: name.to_owned(),
        address: Some(socket_address(any, port)),
        use_original_dst: Some(BoolValue { value: true }),
        listener_filters: vec![ListenerFilter {
            name: ORIGINAL_DST_FILTER.to_owned(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(pack_any(
                OriginalDst::default(),
            ))),
            ..Default::default()
        }],
        filter_chains: vec![FilterChain {
            filters: vec![tcp_proxy(name, cluster.to_owned())],
            ..Default::default()
        }],
        traffic_direction: direction as i32,
        ..Default::default()
    }
}

/// A cluster that connects to each connection's original destination.
fn original_dst_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.to_owned(),
        connect_timeout: Some(CONNECT_TIMEOUT),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        ..Default::default()
    }
}
