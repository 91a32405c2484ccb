//! Kuma's `networking.transparentProxying` of a Dataplane: the workload's
//! traffic is redirected into its sidecar (by `meshlink install
//! transparent-proxy`), so the sidecar listens on the two capture ports,
//! answers the mesh's names, and the app keeps its ordinary URLs.
//!
//! Owns the field set, its defaults (Kuma's: 15006 inbound, 15001
//! outbound, dual stack) and validation. What a sidecar is sent because
//! of it is the translator's.

use serde::{Deserialize, Serialize};

use super::Port;
use super::string_enum::string_enum;
use crate::validate::Errors;

/// Kuma's default inbound capture port.
pub const DEFAULT_REDIRECT_PORT_INBOUND: u16 = 15006;
/// Kuma's default outbound capture port.
pub const DEFAULT_REDIRECT_PORT_OUTBOUND: u16 = 15001;

/// `spec.networking.transparentProxying`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransparentProxying {
    /// The port redirected inbound connections arrive on (default 15006).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port_inbound: Option<Port>,
    /// The port redirected outbound connections arrive on (default 15001).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port_outbound: Option<Port>,
    /// `DualStack` (the default) or `IPv4`: which families are captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family_mode: Option<IpFamilyMode>,
    /// The services this workload may call (by `kuma.io/service` or
    /// MeshService name); when set, only these are sent to its sidecar
    /// (listeners, clusters and DNS names). Unset: every service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachable_services: Option<Vec<String>>,
}

string_enum! {
    /// Kuma's `ipFamilyMode` of a transparent proxy.
    pub enum IpFamilyMode ("ipFamilyMode") {
        /// IPv4 and IPv6 are captured (Kuma's default).
        DualStack = "DualStack",
        /// Only IPv4 is captured.
        IPv4 = "IPv4",
    }
}

impl TransparentProxying {
    /// The inbound capture port.
    pub fn inbound_port(&self) -> u16 {
        self.redirect_port_inbound
            .map_or(DEFAULT_REDIRECT_PORT_INBOUND, Port::get)
    }

    /// The outbound capture port.
    pub fn outbound_port(&self) -> u16 {
        self.redirect_port_outbound
            .map_or(DEFAULT_REDIRECT_PORT_OUTBOUND, Port::get)
    }

    /// Whether IPv6 is captured as well as IPv4.
    pub fn dual_stack(&self) -> bool {
        !matches!(self.ip_family_mode, Some(IpFamilyMode::IPv4))
    }

    /// Whether `service` may be called (always, without
    /// `reachableServices`).
    pub fn reaches(&self, service: &str) -> bool {
        self.reachable_services
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s == service))
    }

    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        if let Some(p) = self.redirect_port_inbound {
            p.validate(errs, &format!("{at}.redirectPortInbound"));
        }
        if let Some(p) = self.redirect_port_outbound {
            p.validate(errs, &format!("{at}.redirectPortOutbound"));
        }
        if self.inbound_port() == self.outbound_port() {
            errs.add(
                format!("{at}.redirectPortOutbound"),
                format!(
                    "the inbound and outbound capture ports are both {}: redirected \
                     connections could not be told apart; use two ports (Kuma's defaults \
                     are 15006 inbound and 15001 outbound)",
                    self.inbound_port()
                ),
            );
        }
        if let Some(mode) = &self.ip_family_mode {
            mode.validate(errs, &format!("{at}.ipFamilyMode"));
        }
        for (i, s) in self.reachable_services.iter().flatten().enumerate() {
            if s.is_empty() {
                errs.add(
                    format!("{at}.reachableServices[{i}]"),
                    "an empty service name; name a kuma.io/service or a MeshService",
                );
            }
        }
    }
}
