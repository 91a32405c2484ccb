//! Kuma's networking fields that change where, and whether, a Dataplane's
//! proxy listens: `networking.gateway` (a gateway proxy, with no inbounds)
//! and an inbound's own `address`.
//!
//! Owns the gateway shape (`type: DELEGATED | BUILTIN`, `tags`), its
//! validation as Kuma 2.14 has it (no inbounds on a gateway, no outbounds on
//! a `BUILTIN` one), the service tag a gateway's identity comes from, the
//! warning for `BUILTIN` (stored, not served), and the inbound `address`
//! check. It decides nothing about translation: a `DELEGATED` gateway is a
//! sidecar without inbounds to the translator.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::Tags;
use super::dataplane::{DataplaneSpec, Inbound, Networking, service_from_tags, service_tags};
use super::string_enum::string_enum;
use crate::validate::Errors;

/// Kuma's protocol tag; a gateway may only say `tcp` there.
const PROTOCOL_TAG: &str = "kuma.io/protocol";

string_enum! {
    /// `networking.gateway.type`.
    pub enum GatewayType ("gateway type") {
        /// An independently deployed gateway (Kong, Contour, ...): traffic
        /// into it is not proxied; its calls into the mesh go through the
        /// proxy's outbounds, as a sidecar's do. Kuma's default.
        Delegated = "DELEGATED",
        /// The proxy itself is the gateway, configured by MeshGateway and
        /// its routes (not implemented: stored, with a warning).
        Builtin = "BUILTIN",
    }
}

/// `spec.networking.gateway`: this Dataplane's proxy serves a gateway, not
/// a workload's inbounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    /// `DELEGATED` (the default when unset) or `BUILTIN`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<GatewayType>,
    /// The gateway's tags; `kuma.io/service` (or `meshlink.dev/service`)
    /// names its service, which is its identity.
    #[serde(default)]
    pub tags: Tags,
}

/// The warning `apply` prints for a `BUILTIN` gateway, at `at` (the path
/// of `networking.gateway.type` as the user wrote it).
pub fn builtin_warning(at: &str) -> String {
    format!(
        "{at}: BUILTIN gateway accepted and stored, but not served: meshlink has no \
         MeshGateway, MeshHTTPRoute or MeshTCPRoute yet, so this proxy gets its identity \
         and no listeners, routes or clusters"
    )
}

// === impl Gateway ===

impl Gateway {
    /// The gateway type: `type`, else `DELEGATED` (Kuma's default).
    pub fn effective_type(&self) -> GatewayType {
        self.type_.clone().unwrap_or(GatewayType::Delegated)
    }

    /// The gateway's service (either service tag): its identity.
    pub fn service(&self) -> Option<&str> {
        service_from_tags(&self.tags)
    }

    /// Reports every problem of a gateway Dataplane's networking at
    /// `spec.networking`, as Kuma 2.14 validates it, plus the service tag
    /// meshlink needs for the gateway's identity.
    fn validate(&self, errs: &mut Errors, n: &Networking) {
        let at = "spec.networking.gateway";
        let kind = match &self.type_ {
            Some(t) if !t.validate(errs, &format!("{at}.type")) => return,
            Some(GatewayType::Builtin) => "builtin",
            _ => "delegated",
        };
        if !n.inbound.is_empty() {
            errs.add(
                "spec.networking.inbound",
                format!(
                    "inbound cannot be defined for {kind} gateways (as in Kuma): a gateway \
                     receives traffic that is not proxied by the mesh; remove the inbounds or \
                     the gateway"
                ),
            );
        }
        if kind == "builtin" && !n.outbound.is_empty() {
            errs.add(
                "spec.networking.outbound",
                "outbound cannot be defined for builtin gateways (as in Kuma): a builtin \
                 gateway's destinations come from its routes",
            );
        }
        // Kuma accepts a gateway without tags (its tag-free mode); meshlink
        // has no other source for the gateway's identity.
        service_tags(errs, at, &self.tags);
        if let Some(p) = self.tags.get(PROTOCOL_TAG)
            && !p.eq_ignore_ascii_case("tcp")
        {
            errs.add(
                format!("{at}.tags[{PROTOCOL_TAG:?}]"),
                format!(
                    "a gateway's protocol must be tcp (as in Kuma), got {p:?}; remove the tag \
                     or set it to tcp"
                ),
            );
        }
    }
}

// === impl DataplaneSpec ===

impl DataplaneSpec {
    /// The gateway this Dataplane's proxy serves, if it is a gateway.
    pub fn gateway(&self) -> Option<&Gateway> {
        self.networking.gateway.as_ref()
    }

    /// Warnings for what is accepted but not served (a `BUILTIN`
    /// gateway), with canonical paths.
    pub fn warnings(&self) -> Vec<String> {
        match self.gateway().map(Gateway::effective_type) {
            Some(GatewayType::Builtin) => {
                vec![builtin_warning("spec.networking.gateway.type")]
            }
            _ => Vec::new(),
        }
    }
}

/// Checks the gateway, or that a Dataplane without one has an inbound.
pub(super) fn validate_gateway_or_inbounds(errs: &mut Errors, n: &Networking) {
    match &n.gateway {
        Some(gw) => gw.validate(errs, n),
        None if n.inbound.is_empty() => errs.add(
            "spec.networking.inbound",
            "at least one inbound is required (or a networking.gateway): a Dataplane's \
             identity is the service of its inbounds, or of its gateway's tags",
        ),
        None => {}
    }
    for (i, inbound) in n.inbound.iter().enumerate() {
        if let Some(addr) = &inbound.address {
            validate_inbound_address(
                errs,
                &format!("spec.networking.inbound[{i}]"),
                inbound,
                addr,
            );
        }
    }
}

/// Checks an inbound's `address` (at `{at}.address`): an IP, as in Kuma,
/// that other proxies can dial, and not the application's own
/// `serviceAddress:servicePort` (the inbound would forward to itself).
fn validate_inbound_address(errs: &mut Errors, at: &str, inbound: &Inbound, addr: &str) {
    let path = format!("{at}.address");
    match addr.parse::<IpAddr>() {
        Err(_) => errs.add(
            path,
            format!(
                "{addr:?} is not an IP address: the inbound listens on it and other proxies \
                 dial it, so it must be an IP (e.g. 10.0.0.5), as in Kuma; a hostname is not \
                 resolved"
            ),
        ),
        Ok(ip) if ip.is_unspecified() => errs.add(
            path,
            format!(
                "{addr} cannot be dialled: other proxies reach this inbound at its address; \
                 give the workload's own IP (or remove address to use networking.address)"
            ),
        ),
        Ok(ip) => {
            let same_ip = inbound
                .effective_service_address()
                .parse::<IpAddr>()
                .is_ok_and(|s| s == ip);
            if same_ip && inbound.effective_service_port() == inbound.port.get() {
                errs.add(
                    format!("{at}.serviceAddress"),
                    format!(
                        "serviceAddress and servicePort have to differ from address and port \
                         (as in Kuma): the inbound listens on {addr}:{} and would forward to \
                         itself; set servicePort, or a different serviceAddress",
                        inbound.port
                    ),
                );
            }
        }
    }
}
