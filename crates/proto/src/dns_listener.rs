//! The sidecar's mesh DNS: a UDP Listener named [`LISTENER_NAME`] whose one
//! listener filter is Envoy's DNS filter ([`FILTER_NAME`], a
//! `DnsFilterConfig` with an inline `DnsTable`), so an Envoy sidecar that
//! meshlink configures answers the same names. meshlink-proxy reads it
//! into its DNS server (TCP too, on the same port) instead of binding an
//! Envoy listener.
//!
//! [`listener`] is the one place that writes this shape; the control
//! plane's translator calls it and the proxy's validator accepts exactly
//! what it writes (and names the field of anything else). It holds no
//! behaviour of either end.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{Listener, ListenerFilter, listener_filter};
use envoy_types::pb::envoy::data::dns::v3::DnsTable;
use envoy_types::pb::envoy::data::dns::v3::dns_table::{
    AddressList, DnsEndpoint, DnsVirtualDomain, dns_endpoint,
};
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::DnsFilterConfig;
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::dns_filter_config::{
    ClientContextConfig, ServerContextConfig, server_context_config,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use envoy_types::util::pack_any;

/// The DNS Listener's name (inbound and outbound Listeners are named
/// `inbound:` and `outbound:`, so it never collides).
pub const LISTENER_NAME: &str = "meshlink:dns";

/// The second DNS Listener of a dual-stack transparent proxy, the same
/// table on `[::1]` (where ip6tables redirects a query to an IPv6
/// nameserver). Same shape as [`LISTENER_NAME`]'s, another name, since an
/// Envoy Listener has one address.
pub const LISTENER_NAME_IPV6: &str = "meshlink:dns:ipv6";

/// Every DNS Listener name, for the proxy's Listener table.
pub const LISTENER_NAMES: [&str; 2] = [LISTENER_NAME, LISTENER_NAME_IPV6];

/// The name of its one listener filter: Envoy's UDP DNS filter.
pub const FILTER_NAME: &str = "envoy.filters.udp.dns_filter";

/// The filter's `stat_prefix`.
pub const STAT_PREFIX: &str = "meshlink_dns";

/// The port the sidecar's DNS listens on by default; the capture rules
/// redirect the application's UDP and TCP port 53 here.
pub const DEFAULT_PORT: u16 = 15053;

/// How long one upstream resolver may take before the next is tried
/// (`client_config.resolver_timeout`).
pub const RESOLVER_TIMEOUT: Duration = Duration::from_secs(5);

/// Forwarded queries in flight at most (`client_config.max_pending_lookups`).
pub const MAX_PENDING_LOOKUPS: u64 = 1024;

/// The DNS Listener `name` ([`LISTENER_NAME`], or [`LISTENER_NAME_IPV6`]
/// for the dual-stack one) bound at `bind` (UDP), answering every name of `table`
/// with its addresses (A for the IPv4 ones, AAAA for the IPv6 ones) and a
/// TTL of `ttl` (whole seconds), and NXDOMAIN for any other name under one
/// of `known_suffixes` (e.g. `mesh`). Other names are forwarded to the
/// resolvers the sidecar was started with, with [`RESOLVER_TIMEOUT`] and
/// [`MAX_PENDING_LOOKUPS`].
///
/// Names are sent as given, without a trailing dot; matching is
/// case-insensitive (`case_insensitive` is set for Envoy).
///
/// `known_suffixes` is deprecated in Envoy's `DnsTable` and ignored by
/// current Envoy, which treats the parent domains of the table's names as
/// known instead (so with at least one `*.mesh` name it answers the same);
/// meshlink-proxy reads it, so an empty table still keeps `*.mesh` local.
#[allow(deprecated)]
pub fn listener<N: AsRef<str>, S: AsRef<str>>(
    name: &str,
    bind: SocketAddr,
    table: &[(N, Vec<IpAddr>)],
    known_suffixes: &[S],
    ttl: Duration,
) -> Listener {
    let answer_ttl = PbDuration {
        seconds: i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
        nanos: 0,
    };
    let virtual_domains = table
        .iter()
        .map(|(name, addresses)| DnsVirtualDomain {
            name: name.as_ref().to_owned(),
            endpoint: Some(DnsEndpoint {
                endpoint_config: Some(dns_endpoint::EndpointConfig::AddressList(AddressList {
                    address: addresses.iter().map(IpAddr::to_string).collect(),
                })),
            }),
            answer_ttl: Some(answer_ttl),
        })
        .collect();
    let known_suffixes = known_suffixes
        .iter()
        .map(|s| StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Suffix(s.as_ref().to_owned())),
            ignore_case: true,
        })
        .collect();
    let config = DnsFilterConfig {
        stat_prefix: STAT_PREFIX.to_owned(),
        server_config: Some(ServerContextConfig {
            config_source: Some(server_context_config::ConfigSource::InlineDnsTable(
                DnsTable {
                    virtual_domains,
                    known_suffixes,
                    ..Default::default()
                },
            )),
        }),
        client_config: Some(ClientContextConfig {
            resolver_timeout: Some(PbDuration {
                seconds: RESOLVER_TIMEOUT.as_secs() as i64,
                nanos: 0,
            }),
            max_pending_lookups: MAX_PENDING_LOOKUPS,
            ..Default::default()
        }),
        case_insensitive: true,
        ..Default::default()
    };
    Listener {
        name: name.to_owned(),
        address: Some(Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                protocol: socket_address::Protocol::Udp as i32,
                address: bind.ip().to_string(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(
                    bind.port(),
                ))),
                ..Default::default()
            })),
        }),
        listener_filters: vec![ListenerFilter {
            name: FILTER_NAME.to_owned(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(pack_any(config))),
            ..Default::default()
        }],
        ..Default::default()
    }
}
