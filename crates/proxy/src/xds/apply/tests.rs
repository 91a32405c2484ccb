//! Unit tests of applying delta responses to the last good configuration
//! (I3): good resources apply, a rejected one keeps its last good version,
//! every rejection names its field path, removals apply, and only
//! accepted versions are claimed on reconnect.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use super::*;

fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

/// An EDS cluster `name` with load-balancing policy `lb` (0 = round robin).
fn cluster(name: &str, lb: i32) -> Any {
    any(&Cluster {
        name: name.to_owned(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        lb_policy: lb,
        ..Default::default()
    })
}

const UNSUPPORTED_LB: i32 = cluster::LbPolicy::ClusterProvided as i32;

fn endpoints(name: &str, port: u32) -> Any {
    let address = Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: "127.0.0.1".into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    };
    any(&ClusterLoadAssignment {
        cluster_name: name.to_owned(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(address),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn response(
    type_url: &str,
    resources: &[(&str, &str, Any)],
    removed: &[&str],
) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        type_url: type_url.to_owned(),
        system_version_info: "sys".into(),
        resources: resources
            .iter()
            .map(|(name, version, any)| Resource {
                name: (*name).to_owned(),
                version: (*version).to_owned(),
                resource: Some(any.clone()),
                ..Default::default()
            })
            .collect(),
        removed_resources: removed.iter().map(|n| n.to_string()).collect(),
        nonce: "1".into(),
        ..Default::default()
    }
}

fn version_of(config: &ProxyConfig, name: &str) -> Option<String> {
    config.clusters.get(name).map(|c| c.version.clone())
}

#[test]
fn good_resources_are_applied_and_an_identical_resend_changes_nothing() {
    let mut config = ProxyConfig::default();
    let r = response(
        CLUSTER,
        &[("a", "v1", cluster("a", 0)), ("b", "v1", cluster("b", 0))],
        &[],
    );
    let applied = apply(&mut config, &r);
    assert!(
        applied.changed && applied.rejected.is_empty(),
        "{applied:?}"
    );
    assert_eq!(config.clusters.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(version_of(&config, "a").as_deref(), Some("v1"));
    assert!(config.received.contains(CLUSTER));

    let again = apply(&mut config, &r);
    assert!(!again.changed && again.rejected.is_empty(), "{again:?}");

    let eds = apply(
        &mut config,
        &response(ENDPOINTS, &[("a", "e1", endpoints("a", 8080))], &[]),
    );
    assert!(eds.changed && eds.rejected.is_empty(), "{eds:?}");
    assert_eq!(
        config.endpoints["a"].value.as_slice(),
        ["127.0.0.1:8080".parse().unwrap()]
    );
}

#[test]
fn a_rejected_resource_keeps_its_last_good_version_while_others_apply() {
    let mut config = ProxyConfig::default();
    apply(
        &mut config,
        &response(CLUSTER, &[("a", "v1", cluster("a", 0))], &[]),
    );

    let r = response(
        CLUSTER,
        &[
            ("a", "v2", cluster("a", UNSUPPORTED_LB)),
            ("c", "v1", cluster("c", 0)),
        ],
        &[],
    );
    let applied = apply(&mut config, &r);
    assert!(applied.changed, "c was added");
    assert_eq!(
        version_of(&config, "a").as_deref(),
        Some("v1"),
        "a keeps v1"
    );
    assert_eq!(version_of(&config, "c").as_deref(), Some("v1"));
    let [rejected] = applied.rejected.as_slice() else {
        panic!("one rejection: {applied:?}")
    };
    assert_eq!(
        (rejected.name.as_str(), rejected.version.as_str()),
        ("a", "v2")
    );
    assert!(rejected.error.starts_with("lb_policy:"), "{rejected:?}");

    // On reconnect the proxy claims only what it accepted.
    let held = held_versions(&config, CLUSTER);
    assert_eq!(held.get("a").map(String::as_str), Some("v1"));
    assert_eq!(held.len(), 2);

    // A new resource that is rejected stays absent.
    let absent = apply(
        &mut config,
        &response(CLUSTER, &[("d", "v1", cluster("d", UNSUPPORTED_LB))], &[]),
    );
    assert!(!absent.changed);
    assert!(!config.clusters.contains_key("d"));
}

#[test]
fn the_nack_detail_names_every_rejection_with_its_field_path() {
    let mut config = ProxyConfig::default();
    let mut no_body = response(CLUSTER, &[("x", "v1", cluster("x", 0))], &[]);
    no_body.resources[0].resource = None;
    let r = response(
        CLUSTER,
        &[
            ("a", "v1", cluster("a", UNSUPPORTED_LB)),
            ("b", "v1", cluster("not-b", 0)),
            ("ok", "v1", cluster("ok", 0)),
        ],
        &[],
    );
    let applied = apply(&mut config, &r);
    let detail: Vec<String> = applied.rejected.iter().map(ToString::to_string).collect();
    assert_eq!(detail.len(), 2, "{detail:?}");
    assert!(
        detail[0].starts_with("Cluster \"a\": lb_policy:"),
        "{detail:?}"
    );
    assert!(
        detail[0].contains("ROUND_ROBIN"),
        "the fix is named: {detail:?}"
    );
    assert!(detail[1].starts_with("Cluster \"b\": name:"), "{detail:?}");
    assert!(detail[1].contains("not-b"), "{detail:?}");
    assert!(config.clusters.contains_key("ok"));

    let missing = apply(&mut config, &no_body);
    assert_eq!(
        missing.rejected[0].to_string(),
        "Cluster \"x\": resource: missing"
    );

    let bad_eds = {
        let mut cla = ClusterLoadAssignment::decode(endpoints("a", 1).value.as_slice()).unwrap();
        cla.endpoints[0].lb_endpoints[0].host_identifier =
            Some(lb_endpoint::HostIdentifier::EndpointName("named".into()));
        any(&cla)
    };
    let eds = apply(
        &mut config,
        &response(ENDPOINTS, &[("a", "e1", bad_eds)], &[]),
    );
    assert!(
        eds.rejected[0]
            .to_string()
            .contains("endpoints[0].lb_endpoints[0].endpoint.address"),
        "{eds:?}"
    );
}

#[test]
fn a_resource_of_another_type_than_the_response_is_rejected() {
    let mut config = ProxyConfig::default();
    let applied = apply(
        &mut config,
        &response(LISTENER, &[("a", "v1", cluster("a", 0))], &[]),
    );
    assert_eq!(applied.rejected.len(), 1);
    assert!(
        applied.rejected[0].error.starts_with("resource:"),
        "{applied:?}"
    );
    assert!(config.listeners.is_empty());
}

#[test]
fn an_unsupported_type_is_rejected_whole() {
    let mut config = ProxyConfig::default();
    let applied = apply(
        &mut config,
        &response("type.googleapis.com/nope.Thing", &[], &[]),
    );
    assert!(!applied.changed);
    assert_eq!(applied.rejected.len(), 1);
    assert!(
        applied.rejected[0].error.contains("not supported"),
        "{applied:?}"
    );
    assert!(config.received.is_empty());
}

#[test]
fn removals_apply_and_unknown_names_change_nothing() {
    let mut config = ProxyConfig::default();
    apply(
        &mut config,
        &response(
            CLUSTER,
            &[("a", "v1", cluster("a", 0)), ("b", "v1", cluster("b", 0))],
            &[],
        ),
    );
    let removed = apply(&mut config, &response(CLUSTER, &[], &["a", "never-sent"]));
    assert!(
        removed.changed && removed.rejected.is_empty(),
        "{removed:?}"
    );
    assert_eq!(config.clusters.keys().collect::<Vec<_>>(), ["b"]);
    let nothing = apply(&mut config, &response(CLUSTER, &[], &["never-sent"]));
    assert!(!nothing.changed);
    assert!(!held_versions(&config, CLUSTER).contains_key("a"));
}

/// A RouteConfiguration named `name` routing everything to `cluster`.
fn routes(name: &str, cluster: &str) -> Any {
    use envoy_types::pb::envoy::config::route::v3::{
        Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route::Action,
        route_action::ClusterSpecifier, route_match::PathSpecifier,
    };
    any(&RouteConfiguration {
        name: name.to_owned(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes: vec![Route {
                r#match: Some(RouteMatch {
                    path_specifier: Some(PathSpecifier::Prefix("/".into())),
                    ..Default::default()
                }),
                action: Some(Action::Route(RouteAction {
                    cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

#[test]
fn route_configurations_are_validated_kept_and_claimed_on_reconnect() {
    let mut config = ProxyConfig::default();
    let applied = apply(
        &mut config,
        &response(ROUTE, &[("web", "r1", routes("web", "backend"))], &[]),
    );
    assert!(
        applied.changed && applied.rejected.is_empty(),
        "{applied:?}"
    );
    assert_eq!(config.routes["web"].value.virtual_hosts[0].routes.len(), 1);
    assert_eq!(
        held_versions(&config, ROUTE),
        [("web".to_owned(), "r1".to_owned())].into()
    );

    // A bad one is NACKed with its path and the good version stays.
    let applied = apply(
        &mut config,
        &response(
            ROUTE,
            &[("web", "r2", routes("other-name", "backend"))],
            &[],
        ),
    );
    assert_eq!(applied.rejected.len(), 1, "{applied:?}");
    assert!(
        applied.rejected[0].error.starts_with("name: "),
        "{applied:?}"
    );
    assert_eq!(config.routes["web"].version, "r1");

    let removed = apply(&mut config, &response(ROUTE, &[], &["web"]));
    assert!(removed.changed && config.routes.is_empty());
}

#[test]
fn every_subscribed_type_has_a_table_in_push_order() {
    use crate::xds::XdsModel;
    assert_eq!(
        <ProxyConfig as XdsModel>::types(),
        meshlink_proto::types::SIDECAR_TYPES
    );
    let unknown = apply(
        &mut ProxyConfig::default(),
        &response("type.googleapis.com/example.Nope", &[], &[]),
    );
    assert_eq!(
        unknown.rejected[0].error,
        "type is not supported by meshlink-proxy"
    );
}

#[test]
fn the_dns_listener_is_kept_for_the_dns_server_and_never_bound() {
    use meshlink_proto::dns_listener::{LISTENER_NAME, listener};
    let dns = |names: &[&str]| {
        let table: Vec<(&str, Vec<std::net::IpAddr>)> = names
            .iter()
            .map(|n| (*n, vec!["240.0.0.1".parse().unwrap()]))
            .collect();
        any(&listener(
            LISTENER_NAME,
            "127.0.0.1:15053".parse().unwrap(),
            &table,
            &["mesh"],
            std::time::Duration::from_secs(1),
        ))
    };
    let mut config = ProxyConfig::default();
    let first = apply(
        &mut config,
        &response(
            LISTENER,
            &[(LISTENER_NAME, "v1", dns(&["backend.mesh"]))],
            &[],
        ),
    );
    assert!(first.changed && first.rejected.is_empty(), "{first:?}");
    assert!(
        config.listeners.is_empty(),
        "the listener manager never sees it"
    );
    assert!(
        config
            .dns()
            .expect("dns")
            .table
            .contains_key("backend.mesh")
    );
    assert_eq!(held_versions(&config, LISTENER)[LISTENER_NAME], "v1");
    // A bad table keeps the last good one and is NACKed with its field.
    let bad = apply(
        &mut config,
        &response(
            LISTENER,
            &[(LISTENER_NAME, "v2", dns(&["bad name.mesh"]))],
            &[],
        ),
    );
    assert!(
        bad.rejected[0].error.contains("virtual_domains[0].name"),
        "{bad:?}"
    );
    assert!(
        config
            .dns()
            .expect("dns")
            .table
            .contains_key("backend.mesh")
    );
    let removed = apply(&mut config, &response(LISTENER, &[], &[LISTENER_NAME]));
    assert!(removed.changed && config.dns().is_none());
}
