//! The mesh DNS Listener (`meshlink:dns`: a UDP socket address and one
//! listener filter, Envoy's `envoy.filters.udp.dns_filter` with an inline
//! `DnsTable`) into a [`DnsSpec`].
//!
//! Accepts exactly the shape `meshlink_proto::dns_listener::listener`
//! writes: every message's supported fields are taken out and any other
//! field that is set is refused with its path, as are a TCP address, a
//! filter of another name, a name that is not a DNS name or appears twice,
//! an address that is not an IP address, wildcard names, cluster- or
//! service-backed endpoints and resolvers named in the config (the proxy
//! forwards to the ones in its `--dns-resolv-conf`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{Listener, listener_filter};
use envoy_types::pb::envoy::data::dns::v3::DnsTable;
use envoy_types::pb::envoy::data::dns::v3::dns_table::{DnsVirtualDomain, dns_endpoint};
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::DnsFilterConfig;
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::dns_filter_config::{
    ClientContextConfig, server_context_config,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::Any;
use meshlink_proto::dns_listener::{FILTER_NAME, MAX_PENDING_LOOKUPS, RESOLVER_TIMEOUT};

use super::route::only_supported;
use super::{Invalid, decode, duration, invalid};
use crate::model::dns::{DnsRecord, DnsSpec, normalize};

/// Where the filter's config sits in the Listener.
const AT: &str = "listener_filters[0].typed_config";

/// Envoy's TTL for a virtual domain that sets none.
const DEFAULT_TTL: u32 = 300;

/// The most forwarded queries in flight a config may ask for.
const MAX_PENDING_LIMIT: u64 = 1 << 20;

/// Validates the DNS Listener `any`.
pub fn dns_listener(any: &Any) -> Result<DnsSpec, Invalid> {
    let mut l: Listener = decode(any, "resource")?;
    let address = l.address.take();
    let filters = std::mem::take(&mut l.listener_filters);
    l.name.clear();
    only_supported(&l, "", "name, address, listener_filters")?;
    let bind = udp_address(address.and_then(|a| a.address))?;
    let [filter] = filters.as_slice() else {
        return Err(invalid(
            "listener_filters",
            format!(
                "has {} filters; the DNS listener holds exactly one, {FILTER_NAME}",
                filters.len()
            ),
        ));
    };
    if filter.name != FILTER_NAME {
        return Err(invalid(
            "listener_filters[0].name",
            format!("is {:?}; expected {FILTER_NAME}", filter.name),
        ));
    }
    if filter.filter_disabled.is_some() {
        return Err(invalid(
            "listener_filters[0].filter_disabled",
            "is not supported by meshlink-proxy: its DNS serves every query",
        ));
    }
    let Some(listener_filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        return Err(invalid(AT, "required: a DnsFilterConfig"));
    };
    spec(bind, decode::<DnsFilterConfig>(any, AT)?)
}

/// The listener's address: an IP address, a port and the UDP protocol.
fn udp_address(address: Option<address::Address>) -> Result<SocketAddr, Invalid> {
    let Some(address::Address::SocketAddress(mut sa)) = address else {
        return Err(invalid(
            "address",
            "missing or not a socket address (pipes and internal addresses are not supported)",
        ));
    };
    const SA: &str = "address.socket_address";
    let protocol = std::mem::take(&mut sa.protocol);
    let ip = std::mem::take(&mut sa.address);
    let port = sa.port_specifier.take();
    only_supported(&sa, SA, "protocol, address, port_value")?;
    if protocol != socket_address::Protocol::Udp as i32 {
        return Err(invalid(
            format!("{SA}.protocol"),
            "must be UDP (the proxy serves TCP on the same port as well)",
        ));
    }
    let ip: IpAddr = ip.parse().map_err(|_| {
        invalid(
            format!("{SA}.address"),
            format!("{ip:?} is not an IP address"),
        )
    })?;
    match port {
        Some(socket_address::PortSpecifier::PortValue(p)) if (1..=65535).contains(&p) => {
            Ok(SocketAddr::new(ip, p as u16))
        }
        _ => Err(invalid(
            format!("{SA}.port_value"),
            "a port between 1 and 65535 is required (named ports are not supported)",
        )),
    }
}

/// The [`DnsSpec`] of a decoded filter config.
fn spec(bind: SocketAddr, mut c: DnsFilterConfig) -> Result<DnsSpec, Invalid> {
    let server = c.server_config.take();
    let client = c.client_config.take();
    let case_insensitive = std::mem::take(&mut c.case_insensitive);
    c.stat_prefix.clear();
    only_supported(
        &c,
        AT,
        "stat_prefix, server_config, client_config, case_insensitive",
    )?;
    if !case_insensitive {
        return Err(invalid(
            format!("{AT}.case_insensitive"),
            "must be true: meshlink-proxy matches names case-insensitively (RFC 4343), and Envoy \
             does so only when this is set",
        ));
    }
    let table = match server.and_then(|s| s.config_source) {
        Some(server_context_config::ConfigSource::InlineDnsTable(t)) => t,
        Some(server_context_config::ConfigSource::ExternalDnsTable(_)) => {
            return Err(invalid(
                format!("{AT}.server_config.external_dns_table"),
                "is not supported by meshlink-proxy; send an inline_dns_table",
            ));
        }
        None => {
            return Err(invalid(
                format!("{AT}.server_config.inline_dns_table"),
                "required: the mesh names and their addresses",
            ));
        }
    };
    let (table, known_suffixes) = dns_table(table)?;
    let (resolver_timeout, max_pending) = client_config(client)?;
    Ok(DnsSpec {
        bind,
        table,
        known_suffixes,
        resolver_timeout,
        max_pending,
    })
}

/// The names and known suffixes of the inline table (`known_suffixes` is
/// deprecated in Envoy, which derives them from the names; see
/// `meshlink_proto::dns_listener::listener`).
#[allow(deprecated)]
fn dns_table(mut t: DnsTable) -> Result<(HashMap<String, DnsRecord>, Vec<String>), Invalid> {
    let at = format!("{AT}.server_config.inline_dns_table");
    let domains = std::mem::take(&mut t.virtual_domains);
    let suffixes = std::mem::take(&mut t.known_suffixes);
    only_supported(&t, &at, "virtual_domains, known_suffixes")?;
    let mut table = HashMap::with_capacity(domains.len());
    for (i, d) in domains.into_iter().enumerate() {
        let field = format!("{at}.virtual_domains[{i}]");
        let (name, record) = virtual_domain(d, &field)?;
        if table.insert(name.clone(), record).is_some() {
            return Err(invalid(
                format!("{field}.name"),
                format!("{name:?} appears twice; send each name once"),
            ));
        }
    }
    let mut known = Vec::with_capacity(suffixes.len());
    for (i, s) in suffixes.into_iter().enumerate() {
        known.push(suffix(s, &format!("{at}.known_suffixes[{i}]"))?);
    }
    Ok((table, known))
}

fn virtual_domain(mut d: DnsVirtualDomain, field: &str) -> Result<(String, DnsRecord), Invalid> {
    let name = std::mem::take(&mut d.name);
    let endpoint = d.endpoint.take();
    let ttl = d.answer_ttl.take();
    only_supported(&d, field, "name, endpoint, answer_ttl")?;
    let name = dns_name(&name, &format!("{field}.name"))?;
    let list = match endpoint.and_then(|e| e.endpoint_config) {
        Some(dns_endpoint::EndpointConfig::AddressList(list)) => list,
        Some(dns_endpoint::EndpointConfig::ClusterName(_)) => {
            return Err(invalid(
                format!("{field}.endpoint.cluster_name"),
                "is not supported by meshlink-proxy; send an address_list",
            ));
        }
        Some(dns_endpoint::EndpointConfig::ServiceList(_)) => {
            return Err(invalid(
                format!("{field}.endpoint.service_list"),
                "SRV records are not supported by meshlink-proxy; send an address_list",
            ));
        }
        None => {
            return Err(invalid(
                format!("{field}.endpoint.address_list"),
                "required: the name's addresses",
            ));
        }
    };
    if list.address.is_empty() {
        return Err(invalid(
            format!("{field}.endpoint.address_list.address"),
            "at least one address is required",
        ));
    }
    let mut addresses = Vec::with_capacity(list.address.len());
    for (j, a) in list.address.iter().enumerate() {
        let ip: IpAddr = a.parse().map_err(|_| {
            invalid(
                format!("{field}.endpoint.address_list.address[{j}]"),
                format!("{a:?} is not an IP address"),
            )
        })?;
        addresses.push(ip);
    }
    let ttl = match ttl {
        None => DEFAULT_TTL,
        Some(d) => {
            let d = duration(&d, format!("{field}.answer_ttl"))?;
            u32::try_from(d.as_secs())
                .ok()
                .filter(|s| *s <= i32::MAX as u32)
                .ok_or_else(|| {
                    invalid(
                        format!("{field}.answer_ttl"),
                        "must be at most 2147483647 seconds (RFC 2181)",
                    )
                })?
        }
    };
    Ok((name, DnsRecord { addresses, ttl }))
}

fn suffix(mut m: StringMatcher, field: &str) -> Result<String, Invalid> {
    let pattern = m.match_pattern.take();
    let ignore_case = std::mem::take(&mut m.ignore_case);
    only_supported(&m, field, "suffix, ignore_case")?;
    let Some(string_matcher::MatchPattern::Suffix(s)) = pattern else {
        return Err(invalid(
            field,
            "only suffix matchers are supported (e.g. suffix: mesh)",
        ));
    };
    if !ignore_case {
        return Err(invalid(
            format!("{field}.ignore_case"),
            "must be true: meshlink-proxy matches names case-insensitively (RFC 4343)",
        ));
    }
    dns_name(
        s.strip_prefix('.').unwrap_or(&s),
        &format!("{field}.suffix"),
    )
}

/// `name` lowercase without its trailing dot, if it is a DNS name: labels
/// of 1 to 63 letters, digits, `-` or `_`, 253 characters at most.
fn dns_name(name: &str, field: &str) -> Result<String, Invalid> {
    let n = normalize(name);
    let bad = |why: &str| invalid(field, format!("{name:?} is not a DNS name: {why}"));
    if n.is_empty() {
        return Err(bad("it is empty"));
    }
    if n.len() > 253 {
        return Err(bad("it is longer than 253 characters"));
    }
    for label in n.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("each label has 1 to 63 characters"));
        }
        if label == "*" {
            return Err(bad("wildcards are not supported by meshlink-proxy"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad("use letters, digits, - and _"));
        }
    }
    Ok(n)
}

/// Resolver timeout and the cap on forwarded queries in flight; Envoy's
/// defaults when the config has no `client_config`.
fn client_config(c: Option<ClientContextConfig>) -> Result<(Duration, usize), Invalid> {
    let Some(mut c) = c else {
        return Ok((RESOLVER_TIMEOUT, MAX_PENDING_LOOKUPS as usize));
    };
    let field = format!("{AT}.client_config");
    let timeout = c.resolver_timeout.take();
    let max_pending = std::mem::take(&mut c.max_pending_lookups);
    only_supported(
        &c,
        &field,
        "resolver_timeout, max_pending_lookups (meshlink-proxy forwards to the resolvers of its \
         --dns-resolv-conf)",
    )?;
    let timeout = match timeout {
        None => RESOLVER_TIMEOUT,
        Some(d) => duration(&d, format!("{field}.resolver_timeout"))?,
    };
    if timeout.is_zero() {
        return Err(invalid(
            format!("{field}.resolver_timeout"),
            "must be positive, e.g. 5s",
        ));
    }
    if !(1..=MAX_PENDING_LIMIT).contains(&max_pending) {
        return Err(invalid(
            format!("{field}.max_pending_lookups"),
            format!("{max_pending} is out of range; use 1 to {MAX_PENDING_LIMIT}"),
        ));
    }
    Ok((timeout, max_pending as usize))
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;
