//! The DNS Listener's validation: what `meshlink_proto::dns_listener`
//! writes is accepted as it is, and each thing outside that subset is
//! refused with its field.

use std::net::IpAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, listener_filter};
use envoy_types::pb::envoy::data::dns::v3::dns_table::dns_endpoint;
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::DnsFilterConfig;
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::dns_filter_config::server_context_config;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher;
use envoy_types::util::pack_any;
use meshlink_proto::dns_listener::{LISTENER_NAME, listener};

use super::*;

fn built() -> Listener {
    let v4: IpAddr = "240.0.0.1".parse().unwrap();
    let v6: IpAddr = "fd00:fd00::1".parse().unwrap();
    listener(
        LISTENER_NAME,
        "127.0.0.1:15053".parse().unwrap(),
        &[
            ("backend.mesh", vec![v4, v6]),
            ("Web.Mesh.", vec!["240.0.0.2".parse().unwrap()]),
        ],
        &["mesh"],
        Duration::from_secs(1),
    )
}

fn config_of(l: &Listener) -> DnsFilterConfig {
    match &l.listener_filters[0].config_type {
        Some(listener_filter::ConfigType::TypedConfig(any)) => decode(any, AT).unwrap(),
        _ => unreachable!("the builder writes a typed config"),
    }
}

/// `l` with its filter config changed by `f`.
fn with_config(mut l: Listener, f: impl FnOnce(&mut DnsFilterConfig)) -> Listener {
    let mut c = config_of(&l);
    f(&mut c);
    l.listener_filters[0].config_type = Some(listener_filter::ConfigType::TypedConfig(pack_any(c)));
    l
}

fn table(c: &mut DnsFilterConfig) -> &mut DnsTable {
    match c
        .server_config
        .as_mut()
        .and_then(|s| s.config_source.as_mut())
    {
        Some(server_context_config::ConfigSource::InlineDnsTable(t)) => t,
        _ => unreachable!("the builder writes an inline table"),
    }
}

fn refused(l: Listener) -> Invalid {
    dns_listener(&pack_any(l)).expect_err("refused")
}

#[test]
fn what_the_builder_writes_is_accepted() {
    let spec = dns_listener(&pack_any(built())).expect("accepted");
    assert_eq!(spec.bind, "127.0.0.1:15053".parse().unwrap());
    assert_eq!(spec.known_suffixes, ["mesh"]);
    assert_eq!(spec.resolver_timeout, Duration::from_secs(5));
    assert_eq!(spec.max_pending, 1024);
    let backend = &spec.table["backend.mesh"];
    assert_eq!(backend.ttl, 1);
    assert_eq!(backend.addresses.len(), 2);
    // Names are kept lowercase, without the trailing dot.
    assert!(spec.table.contains_key("web.mesh"));
}

#[test]
fn a_tcp_address_is_refused() {
    let mut l = built();
    if let Some(address::Address::SocketAddress(sa)) =
        l.address.as_mut().and_then(|a| a.address.as_mut())
    {
        sa.protocol = socket_address::Protocol::Tcp as i32;
    }
    let e = refused(l);
    assert_eq!(e.field, "address.socket_address.protocol");
    assert!(e.reason.contains("UDP"), "{e}");
}

#[test]
fn a_missing_port_or_a_named_address_is_refused() {
    let mut l = built();
    if let Some(address::Address::SocketAddress(sa)) =
        l.address.as_mut().and_then(|a| a.address.as_mut())
    {
        sa.address = "localhost".into();
    }
    assert_eq!(refused(l).field, "address.socket_address.address");
    let mut l = built();
    if let Some(address::Address::SocketAddress(sa)) =
        l.address.as_mut().and_then(|a| a.address.as_mut())
    {
        sa.port_specifier = None;
    }
    assert_eq!(refused(l).field, "address.socket_address.port_value");
}

#[test]
fn another_filter_or_a_second_one_is_refused() {
    let mut l = built();
    l.listener_filters[0].name = "envoy.filters.udp.udp_proxy".into();
    assert_eq!(refused(l).field, "listener_filters[0].name");
    let mut l = built();
    l.listener_filters.push(l.listener_filters[0].clone());
    assert_eq!(refused(l).field, "listener_filters");
    let mut l = built();
    l.listener_filters[0].config_type = None;
    assert_eq!(refused(l).field, AT);
}

#[test]
fn filter_chains_on_the_dns_listener_are_refused() {
    let mut l = built();
    l.filter_chains.push(FilterChain::default());
    let e = refused(l);
    assert_eq!(e.field, "resource");
    assert!(e.reason.contains("name, address, listener_filters"), "{e}");
}

#[test]
fn an_address_that_is_not_an_ip_is_refused_with_its_index() {
    let l = with_config(built(), |c| {
        let d = &mut table(c).virtual_domains[0];
        if let Some(dns_endpoint::EndpointConfig::AddressList(list)) =
            d.endpoint.as_mut().and_then(|e| e.endpoint_config.as_mut())
        {
            list.address[1] = "backend.internal".into();
        }
    });
    let e = refused(l);
    assert_eq!(
        e.field,
        format!(
            "{AT}.server_config.inline_dns_table.virtual_domains[0].endpoint.address_list.address[1]"
        )
    );
    assert!(e.reason.contains("not an IP address"), "{e}");
}

#[test]
fn bad_names_are_refused() {
    let field = format!("{AT}.server_config.inline_dns_table.virtual_domains[1].name");
    for bad in ["", "bad name.mesh", "*.mesh", "a..mesh", &"x".repeat(64)] {
        let l = with_config(built(), |c| table(c).virtual_domains[1].name = bad.into());
        assert_eq!(refused(l).field, field, "{bad:?}");
    }
    // The same name twice, in another case.
    let l = with_config(built(), |c| {
        table(c).virtual_domains[1].name = "BACKEND.mesh".into();
    });
    assert!(refused(l).reason.contains("appears twice"));
}

#[test]
#[allow(deprecated)]
fn other_endpoint_kinds_and_suffix_matchers_are_refused() {
    let l = with_config(built(), |c| {
        table(c).virtual_domains[0].endpoint = Some(
            envoy_types::pb::envoy::data::dns::v3::dns_table::DnsEndpoint {
                endpoint_config: Some(dns_endpoint::EndpointConfig::ClusterName("c".into())),
            },
        );
    });
    assert!(
        refused(l)
            .field
            .ends_with("virtual_domains[0].endpoint.cluster_name")
    );
    let l = with_config(built(), |c| {
        table(c).known_suffixes[0].match_pattern =
            Some(string_matcher::MatchPattern::Prefix("mesh".into()));
    });
    assert_eq!(
        refused(l).field,
        format!("{AT}.server_config.inline_dns_table.known_suffixes[0]")
    );
    let l = with_config(built(), |c| table(c).external_retry_count = 2);
    assert_eq!(
        refused(l).field,
        format!("{AT}.server_config.inline_dns_table")
    );
}

#[test]
fn client_config_is_checked_and_defaults_to_envoys() {
    let l = with_config(built(), |c| {
        c.client_config.as_mut().unwrap().max_pending_lookups = 0;
    });
    assert_eq!(
        refused(l).field,
        format!("{AT}.client_config.max_pending_lookups")
    );
    let l = with_config(built(), |c| {
        c.client_config.as_mut().unwrap().resolver_timeout = Some(Default::default());
    });
    assert_eq!(
        refused(l).field,
        format!("{AT}.client_config.resolver_timeout")
    );
    let l = with_config(built(), |c| {
        c.client_config.as_mut().unwrap().typed_dns_resolver_config = Some(Default::default());
    });
    let e = refused(l);
    assert_eq!(e.field, format!("{AT}.client_config"));
    assert!(e.reason.contains("--dns-resolv-conf"), "{e}");
    let l = with_config(built(), |c| c.client_config = None);
    let spec = dns_listener(&pack_any(l)).expect("accepted");
    assert_eq!(
        (spec.resolver_timeout, spec.max_pending),
        (RESOLVER_TIMEOUT, 1024)
    );
}

#[test]
fn case_sensitive_matching_and_access_logs_are_refused() {
    let l = with_config(built(), |c| c.case_insensitive = false);
    assert_eq!(refused(l).field, format!("{AT}.case_insensitive"));
    let l = with_config(built(), |c| c.access_log.push(Default::default()));
    assert_eq!(refused(l).field, AT);
    let l = with_config(built(), |c| c.server_config = None);
    assert_eq!(
        refused(l).field,
        format!("{AT}.server_config.inline_dns_table")
    );
}
