//! The Listener and Connector kinds: the two ends of a routing key.
//!
//! A Listener opens a local port whose traffic goes to a routing key; a
//! Connector serves a routing key from a host:port in its site. This module
//! owns their shapes and validation; it knows nothing of routing.

use serde::{Deserialize, Serialize};

use super::Port;
use super::string_enum::string_enum;
use crate::validate::{self, Errors};

string_enum! {
    /// The protocol carried for a routing key.
    pub enum ServiceType ("type") {
        /// Plain TCP streams.
        Tcp = "tcp",
    }
}

/// `spec` of a Listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerSpec {
    /// The routing key whose Connectors receive the traffic.
    pub routing_key: String,
    /// Local address (or hostname) to listen on.
    pub host: String,
    /// Local port to listen on.
    pub port: Port,
    /// Protocol (default `tcp`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
}

/// `spec` of a Connector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectorSpec {
    /// The routing key this Connector serves.
    pub routing_key: String,
    /// Host of the real service.
    pub host: String,
    /// Port of the real service.
    pub port: Port,
    /// Kubernetes pod selector, kept for Skupper compatibility; meshlink
    /// connects to `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Protocol (default `tcp`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
}

/// A routing key: letters, digits, `-`, `_`, `.`, `:` and `/`.
fn routing_key(errs: &mut Errors, key: &str) {
    if !validate::required(errs, "spec.routingKey", key) {
        return;
    }
    if key.len() > 253
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'))
    {
        errs.add(
            "spec.routingKey",
            format!(
                "invalid routing key {key:?}: use up to 253 letters, digits, '-', '_', '.', ':' or '/'"
            ),
        );
    }
}

// === impl ListenerSpec ===

impl ListenerSpec {
    /// Effective protocol (default tcp).
    pub fn service_type(&self) -> ServiceType {
        self.type_.clone().unwrap_or(ServiceType::Tcp)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        routing_key(errs, &self.routing_key);
        validate::host(errs, "spec.host", &self.host);
        self.port.validate(errs, "spec.port");
        if let Some(t) = &self.type_ {
            t.validate(errs, "spec.type");
        }
    }
}

// === impl ConnectorSpec ===

impl ConnectorSpec {
    /// Effective protocol (default tcp).
    pub fn service_type(&self) -> ServiceType {
        self.type_.clone().unwrap_or(ServiceType::Tcp)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        routing_key(errs, &self.routing_key);
        validate::host(errs, "spec.host", &self.host);
        self.port.validate(errs, "spec.port");
        if let Some(s) = &self.selector {
            validate::required(errs, "spec.selector", s);
        }
        if let Some(t) = &self.type_ {
            t.validate(errs, "spec.type");
        }
    }
}
