//! Every xDS type URL meshlink's control plane sends and its proxies
//! subscribe to, and the order they travel in.
//!
//! Declared once here; the translator, the ADS server, the proxy's apply
//! tables and the benchmarks all read these. A test checks each against
//! the type URL prost derives from the message itself.

/// Type URL of `envoy.config.listener.v3.Listener`.
pub const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// Type URL of `envoy.config.route.v3.RouteConfiguration`.
pub const ROUTE_TYPE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// Type URL of `envoy.config.cluster.v3.Cluster`.
pub const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Type URL of `envoy.config.endpoint.v3.ClusterLoadAssignment`.
pub const ENDPOINT_TYPE: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// Type URL of `envoy.extensions.transport_sockets.tls.v3.Secret`.
pub const SECRET_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Type URL of `meshlink.v1.Site` (a router's site identity).
pub const SITE_TYPE: &str = "type.googleapis.com/meshlink.v1.Site";
/// Type URL of `meshlink.v1.RouterAccess` (ports a router accepts links on).
pub const ROUTER_ACCESS_TYPE: &str = "type.googleapis.com/meshlink.v1.RouterAccess";
/// Type URL of `meshlink.v1.Link` (a link a router dials).
pub const LINK_TYPE: &str = "type.googleapis.com/meshlink.v1.Link";
/// Type URL of `meshlink.v1.Listener` (a router's routing-key listener).
pub const ROUTER_LISTENER_TYPE: &str = "type.googleapis.com/meshlink.v1.Listener";
/// Type URL of `meshlink.v1.Connector` (a router's routing-key targets).
pub const CONNECTOR_TYPE: &str = "type.googleapis.com/meshlink.v1.Connector";
/// Type URL of `meshlink.v1.MeshIngress` (a router's mTLS ingress for the
/// sidecars of one mesh).
pub const MESH_INGRESS_TYPE: &str = "type.googleapis.com/meshlink.v1.MeshIngress";

/// Make-before-break push order: secrets first (I2), then clusters, their
/// endpoints, the listeners that use them, and their routes; for routers,
/// the site, the RouterAccess and Links that name Secrets, then Listeners
/// and Connectors, and the MeshIngresses that name Secrets. Removals go
/// last, in reverse.
pub const TYPE_ORDER: [&str; 11] = [
    SECRET_TYPE,
    CLUSTER_TYPE,
    ENDPOINT_TYPE,
    LISTENER_TYPE,
    ROUTE_TYPE,
    SITE_TYPE,
    ROUTER_ACCESS_TYPE,
    LINK_TYPE,
    ROUTER_LISTENER_TYPE,
    CONNECTOR_TYPE,
    MESH_INGRESS_TYPE,
];

/// The Envoy types a sidecar subscribes to, in [`TYPE_ORDER`].
pub const SIDECAR_TYPES: [&str; 5] = [
    SECRET_TYPE,
    CLUSTER_TYPE,
    ENDPOINT_TYPE,
    LISTENER_TYPE,
    ROUTE_TYPE,
];

/// The types a site router subscribes to, in [`TYPE_ORDER`].
pub const ROUTER_TYPES: [&str; 7] = [
    SECRET_TYPE,
    SITE_TYPE,
    ROUTER_ACCESS_TYPE,
    LINK_TYPE,
    ROUTER_LISTENER_TYPE,
    CONNECTOR_TYPE,
    MESH_INGRESS_TYPE,
];

/// The short name of a type URL for messages and metric labels:
/// `Cluster` for `type.googleapis.com/envoy.config.cluster.v3.Cluster`.
pub fn short_name(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certify as pb;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
    use prost::Name;

    #[test]
    fn every_type_url_is_the_one_prost_derives() {
        assert_eq!(LISTENER_TYPE, Listener::type_url());
        assert_eq!(ROUTE_TYPE, RouteConfiguration::type_url());
        assert_eq!(CLUSTER_TYPE, Cluster::type_url());
        assert_eq!(ENDPOINT_TYPE, ClusterLoadAssignment::type_url());
        assert_eq!(SECRET_TYPE, Secret::type_url());
        assert_eq!(SITE_TYPE, pb::Site::type_url());
        assert_eq!(ROUTER_ACCESS_TYPE, pb::RouterAccess::type_url());
        assert_eq!(LINK_TYPE, pb::Link::type_url());
        assert_eq!(ROUTER_LISTENER_TYPE, pb::Listener::type_url());
        assert_eq!(CONNECTOR_TYPE, pb::Connector::type_url());
        assert_eq!(MESH_INGRESS_TYPE, pb::MeshIngress::type_url());
    }

    #[test]
    fn subscription_lists_keep_the_push_order() {
        for list in [&SIDECAR_TYPES[..], &ROUTER_TYPES[..]] {
            let positions: Vec<usize> = list
                .iter()
                .map(|t| TYPE_ORDER.iter().position(|o| o == t).unwrap())
                .collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        assert_eq!(short_name(CLUSTER_TYPE), "Cluster");
    }
}
