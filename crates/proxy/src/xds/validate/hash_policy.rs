//! Validation of a route's `hash_policy` entries: a header, a cookie (an
//! existing one: meshlink-proxy does not make a cookie with `ttl`), the
//! connection's source IP, a query parameter or filter state; each with
//! `terminal`. A header regex rewrite and cookie attributes are refused.

use envoy_types::pb::envoy::config::route::v3::route_action::HashPolicy as PbHashPolicy;
use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::PolicySpecifier;

use super::{Invalid, invalid};
use crate::model::hash_policy::{HashOn, HashPolicy};

/// Reads one `hash_policy` entry at `field`.
pub(super) fn hash_policy(h: PbHashPolicy, field: &str) -> Result<HashPolicy, Invalid> {
    let on = match h.policy_specifier {
        Some(PolicySpecifier::Header(hd)) => {
            if hd.regex_rewrite.is_some() {
                return Err(invalid(
                    format!("{field}.header.regex_rewrite"),
                    "not supported by meshlink-proxy: the header's value is hashed as is",
                ));
            }
            let name = hd.header_name.to_ascii_lowercase();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(invalid(
                    format!("{field}.header.header_name"),
                    format!("{:?} is not a header name", hd.header_name),
                ));
            }
            HashOn::Header(name)
        }
        Some(PolicySpecifier::Cookie(c)) => {
            if c.name.is_empty() {
                return Err(invalid(format!("{field}.cookie.name"), "required"));
            }
            if c.ttl.is_some() || !c.attributes.is_empty() {
                return Err(invalid(
                    format!("{field}.cookie.ttl"),
                    "not supported by meshlink-proxy: it hashes an existing cookie and never \
                     makes one (leave ttl, path and attributes unset)",
                ));
            }
            HashOn::Cookie(c.name)
        }
        Some(PolicySpecifier::ConnectionProperties(p)) if p.source_ip => HashOn::SourceIp,
        Some(PolicySpecifier::ConnectionProperties(_)) => {
            return Err(invalid(
                format!("{field}.connection_properties.source_ip"),
                "must be true (it is the only connection property)",
            ));
        }
        Some(PolicySpecifier::QueryParameter(q)) if !q.name.is_empty() => {
            HashOn::QueryParameter(q.name)
        }
        Some(PolicySpecifier::QueryParameter(_)) => {
            return Err(invalid(format!("{field}.query_parameter.name"), "required"));
        }
        Some(PolicySpecifier::FilterState(f)) => HashOn::FilterState(f.key),
        None => return Err(invalid(field, "a policy specifier is required")),
    };
    Ok(HashPolicy {
        on,
        terminal: h.terminal,
    })
}
