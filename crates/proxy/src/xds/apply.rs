//! Applying one delta response to the last good configuration.
//!
//! Owns the per-resource accept/reject decision: every resource in a
//! response is validated on its own; good ones are applied, bad ones keep
//! their previous version (or stay absent) and are reported for the NACK
//! (I3). Pure: no I/O, no clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

use super::validate::{self, Invalid};
use crate::model::{ProxyConfig, Versioned};

/// Type URLs the proxy subscribes to, in the order the control plane
/// sends them (secrets first: I2).
pub const TYPES: [&str; 5] = [SECRET, CLUSTER, ENDPOINTS, LISTENER, ROUTE];
/// `Listener` type URL.
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `Cluster` type URL.
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `ClusterLoadAssignment` type URL.
pub const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `Secret` type URL.
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
/// `RouteConfiguration` type URL (accepted; TCP proxying does not use it).
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// A resource that was rejected, for the NACK detail and `/config_dump`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rejected {
    /// Type URL.
    pub type_url: String,
    /// Resource name.
    pub name: String,
    /// The version that was rejected.
    pub version: String,
    /// Field path and reason.
    pub error: String,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.type_url.rsplit('.').next().unwrap_or(&self.type_url);
        write!(f, "{short} {:?}: {}", self.name, self.error)
    }
}

/// The outcome of one response.
#[derive(Debug, Default)]
pub struct Applied {
    /// Whether anything accepted changed the configuration.
    pub changed: bool,
    /// What was rejected (empty: ACK).
    pub rejected: Vec<Rejected>,
}

impl crate::xds::client::XdsModel for ProxyConfig {
    fn types() -> &'static [&'static str] {
        &TYPES
    }
    fn apply(&mut self, response: &DeltaDiscoveryResponse) -> Applied {
        apply(self, response)
    }
    fn held_versions(&self, type_url: &str) -> std::collections::HashMap<String, String> {
        held_versions(self, type_url)
    }
}

/// Applies `response` to `config` in place.
pub fn apply(config: &mut ProxyConfig, response: &DeltaDiscoveryResponse) -> Applied {
    let ty = response.type_url.as_str();
    let mut out = Applied::default();
    if !TYPES.contains(&ty) {
        out.rejected.push(Rejected {
            type_url: ty.to_owned(),
            name: String::new(),
            version: response.system_version_info.clone(),
            error: "type is not supported by meshlink-proxy".into(),
        });
        return out;
    }
    out.changed |= config.received.insert(ty.to_owned());
    for resource in &response.resources {
        let Some(any) = present(resource, ty, &mut out) else {
            continue;
        };
        let version = resource.version.clone();
        let accepted = match ty {
            LISTENER => validate::listener(any)
                .and_then(|l| named(&resource.name, &l.name).map(|()| l))
                .map(|l| upsert(&mut config.listeners, &resource.name, version.clone(), l)),
            CLUSTER => validate::cluster(any)
                .and_then(|c| named(&resource.name, &c.name).map(|()| c))
                .map(|c| upsert(&mut config.clusters, &resource.name, version.clone(), c)),
            ENDPOINTS => validate::load_assignment(any)
                .map(|e| upsert(&mut config.endpoints, &resource.name, version.clone(), e)),
            SECRET => validate::secret(any)
                .map(|s| upsert(&mut config.secrets, &resource.name, version.clone(), s)),
            _ => Ok(false),
        };
        match accepted {
            Ok(changed) => out.changed |= changed,
            Err(e) => out.rejected.push(Rejected {
                type_url: ty.to_owned(),
                name: resource.name.clone(),
                version,
                error: e.to_string(),
            }),
        }
    }
    for name in &response.removed_resources {
        let removed = match ty {
            LISTENER => config.listeners.remove(name).is_some(),
            CLUSTER => config.clusters.remove(name).is_some(),
            ENDPOINTS => config.endpoints.remove(name).is_some(),
            SECRET => config.secrets.remove(name).is_some(),
            _ => false,
        };
        out.changed |= removed;
    }
    out
}

/// The resource's `Any`, or a rejection when the response left it out.
pub(crate) fn present<'a>(
    resource: &'a envoy_types::pb::envoy::service::discovery::v3::Resource,
    type_url: &str,
    out: &mut Applied,
) -> Option<&'a envoy_types::pb::google::protobuf::Any> {
    if resource.resource.is_none() {
        out.rejected.push(Rejected {
            type_url: type_url.to_owned(),
            name: resource.name.clone(),
            version: resource.version.clone(),
            error: "resource: missing".into(),
        });
    }
    resource.resource.as_ref()
}

/// The resource's own name must equal the name it is sent under.
pub(crate) fn named(sent_as: &str, own: &str) -> Result<(), Invalid> {
    if sent_as == own {
        Ok(())
    } else {
        Err(Invalid {
            field: "name".into(),
            reason: format!("is {own:?} but the resource was sent as {sent_as:?}"),
        })
    }
}

pub(crate) fn upsert<T: PartialEq>(
    map: &mut BTreeMap<String, Versioned<T>>,
    name: &str,
    version: String,
    value: T,
) -> bool {
    if map
        .get(name)
        .is_some_and(|old| old.version == version && *old.value == value)
    {
        return false;
    }
    map.insert(
        name.to_owned(),
        Versioned {
            version,
            value: Arc::new(value),
        },
    );
    true
}

/// The versions the proxy holds for `type_url`, sent as
/// `initial_resource_versions` on reconnect. Only accepted resources are
/// listed, so a rejected version is never claimed.
pub fn held_versions(
    config: &ProxyConfig,
    type_url: &str,
) -> std::collections::HashMap<String, String> {
    fn versions<T>(
        m: &BTreeMap<String, Versioned<T>>,
    ) -> std::collections::HashMap<String, String> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.version.clone()))
            .collect()
    }
    match type_url {
        LISTENER => versions(&config.listeners),
        CLUSTER => versions(&config.clusters),
        ENDPOINTS => versions(&config.endpoints),
        SECRET => versions(&config.secrets),
        _ => Default::default(),
    }
}

#[cfg(test)]
mod tests;
