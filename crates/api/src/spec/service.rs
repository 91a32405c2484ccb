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
    /// Host of the real service; unset when `selector` picks mesh
    /// Dataplanes instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Port of the real service. With `selector` and no `host` the
    /// selected Dataplanes' inbound ports are used and this is unused.
    pub port: Port,
    /// Label selector (`app=backend`, `k=v,k2!=v2`, `k`): without `host`,
    /// this site's mesh Dataplanes whose inbound tags match are the
    /// targets (Skupper selects pods by the same syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Whether offline Dataplanes count as selected (default false;
    /// Skupper v1's `includeNotReady`, v2's `includeNotReadyPods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_not_ready: Option<bool>,
    /// Protocol (default `tcp`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
}

/// One requirement of a [`TagSelector`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagRequirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
    /// `key`: the tag is present.
    Exists(String),
    /// `!key`: the tag is absent.
    Absent(String),
}

/// A Kubernetes-style equality selector over tags: requirements separated
/// by commas, all of which must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSelector(pub Vec<TagRequirement>);

impl TagSelector {
    /// Parses `app=backend,tier!=db,canary,!legacy`; the error names the
    /// requirement that is not understood and the accepted forms.
    pub fn parse(s: &str) -> Result<TagSelector, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            let bad = || {
                format!(
                    "cannot parse {part:?} in selector {s:?}; use key=value, key!=value, key or !key, separated by commas"
                )
            };
            let req = if let Some((k, v)) = part.split_once("!=") {
                TagRequirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                TagRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                TagRequirement::Absent(k.trim().into())
            } else {
                TagRequirement::Exists(part.into())
            };
            let key = match &req {
                TagRequirement::Equals(k, _)
                | TagRequirement::NotEquals(k, _)
                | TagRequirement::Exists(k)
                | TagRequirement::Absent(k) => k,
            };
            if key.is_empty() || key.contains(|c: char| c.is_whitespace() || "=!()".contains(c)) {
                return Err(bad());
            }
            out.push(req);
        }
        Ok(TagSelector(out))
    }

    /// Whether `tags` satisfy every requirement.
    pub fn matches(&self, tags: &super::Tags) -> bool {
        let get = |k: &str| tags.get(k).map(String::as_str);
        self.0.iter().all(|r| match r {
            TagRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            TagRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            TagRequirement::Exists(k) => get(k).is_some(),
            TagRequirement::Absent(k) => get(k).is_none(),
        })
    }
}

/// Status details of a Listener (Skupper's names).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerStatus {
    /// Whether some site in the network has a Connector for the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_matching_connector: Option<bool>,
    /// How many Connectors in the network serve the key (v1alpha1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matching_connector_count: Option<u32>,
}

/// Status details of a Connector (Skupper's names).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectorStatus {
    /// Whether some site in the network has a Listener for the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_matching_listener: Option<bool>,
    /// How many Listeners in the network use the key (v1alpha1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matching_listener_count: Option<u32>,
    /// The Dataplanes a `selector` picked (none for a `host`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected_pods: Vec<SelectedPod>,
}

/// One Dataplane in [`ConnectorStatus::selected_pods`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectedPod {
    /// `<mesh>/<dataplane name>`.
    pub name: String,
    /// The Dataplane's address; the router connects to it at the
    /// Connector's `port`.
    #[serde(rename = "IP")]
    pub ip: String,
}

/// A routing key: letters, digits, `-`, `_`, `.`, `:` and `/`.
fn routing_key(errs: &mut Errors, key: &str) {
    routing_key_at(errs, "spec.routingKey", key);
}

/// A routing key at field `path` (also a Dataplane outbound's `routingKey`).
pub(crate) fn routing_key_at(errs: &mut Errors, path: &str, key: &str) {
    if !validate::required(errs, path, key) {
        return;
    }
    if key.len() > 253
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'))
    {
        errs.add(
            path,
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

    /// Whether offline Dataplanes count as selected (default false).
    pub fn includes_not_ready(&self) -> bool {
        self.include_not_ready.unwrap_or(false)
    }

    /// The parsed selector, if any (valid once the resource is validated).
    pub fn parsed_selector(&self) -> Option<Result<TagSelector, String>> {
        self.selector.as_deref().map(TagSelector::parse)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        routing_key(errs, &self.routing_key);
        match (&self.host, &self.selector) {
            (Some(h), _) => validate::host(errs, "spec.host", h),
            (None, Some(_)) => {}
            (None, None) => errs.add(
                "spec.host",
                "required unless spec.selector selects mesh Dataplanes (e.g. selector: app=backend)",
            ),
        }
        self.port.validate(errs, "spec.port");
        if let Some(Err(e)) = self.parsed_selector() {
            errs.add("spec.selector", e);
        }
        if let Some(t) = &self.type_ {
            t.validate(errs, "spec.type");
        }
    }
}
