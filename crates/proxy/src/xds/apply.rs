//! Applying one delta response to the last good configuration, for every
//! model (sidecar, router) and every type through one table per type.
//!
//! Owns the per-resource accept/reject decision: every resource in a
//! response is validated on its own; good ones are applied, bad ones keep
//! their previous version (or stay absent) and are reported for the NACK
//! (I3). Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;
use envoy_types::pb::google::protobuf::Any;
use meshlink_proto::dns_listener::LISTENER_NAMES as DNS_LISTENERS;
use meshlink_proto::metrics_listener::LISTENER_NAME as METRICS_LISTENER;

use super::validate::{self, Invalid};
use crate::model::{ProxyConfig, Versioned};

/// `Cluster` type URL.
pub use meshlink_proto::types::CLUSTER_TYPE as CLUSTER;
/// `ClusterLoadAssignment` type URL.
pub use meshlink_proto::types::ENDPOINT_TYPE as ENDPOINTS;
/// `Listener` type URL.
pub use meshlink_proto::types::LISTENER_TYPE as LISTENER;
/// `RouteConfiguration` type URL.
pub use meshlink_proto::types::ROUTE_TYPE as ROUTE;
/// `Secret` type URL.
pub use meshlink_proto::types::SECRET_TYPE as SECRET;
/// Type URLs the proxy subscribes to, in the order the control plane
/// sends them (secrets first: I2).
pub use meshlink_proto::types::SIDECAR_TYPES as TYPES;

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

/// A configuration the delta ADS client keeps: the sidecar's
/// [`ProxyConfig`] or the router's
/// [`RouterResources`](crate::router::RouterResources). It is a set of
/// per-type maps, each described by a [`TypeTable`]; applying a response,
/// the unsupported-type rejection and the versions claimed on reconnect are
/// written once, here, for every model and type.
pub trait XdsModel: Clone + Default + Send + Sync + 'static {
    /// Who serves this model, for the rejection of a type it does not take
    /// (`meshlink-proxy in router mode`).
    const SERVED_BY: &'static str;

    /// The types held, in the order the control plane sends them
    /// (Secrets first: I2). Subscriptions are made in this order.
    fn tables() -> &'static [&'static dyn TypeTable<Self>];

    /// The type URLs for which at least one response has been accepted.
    fn received_mut(&mut self) -> &mut BTreeSet<String>;

    /// Type URLs to subscribe to, in [`XdsModel::tables`] order.
    fn types() -> Vec<&'static str> {
        Self::tables().iter().map(|t| t.type_url()).collect()
    }

    /// Applies one response in place: good resources are taken, bad ones
    /// keep their last good version and are reported for the NACK (I3).
    fn apply(&mut self, response: &DeltaDiscoveryResponse) -> Applied {
        apply(self, response)
    }

    /// The accepted versions held for `type_url`, sent as
    /// `initial_resource_versions` on reconnect.
    fn held_versions(&self, type_url: &str) -> HashMap<String, String> {
        held_versions(self, type_url)
    }
}

/// One resource type of a model: its type URL, how one resource is
/// validated, and the map the accepted ones are kept in. Object-safe, so a
/// model lists its types as one static slice of tables.
pub trait TypeTable<M>: Sync {
    /// The type URL.
    fn type_url(&self) -> &'static str;
    /// Validates `any`, sent as `name` with `version`, and keeps it; `Ok`
    /// says whether the model changed.
    fn accept(&self, model: &mut M, name: &str, version: &str, any: &Any) -> Result<bool, Invalid>;
    /// Removes `name`; whether it was held.
    fn remove(&self, model: &mut M, name: &str) -> bool;
    /// The accepted versions by name.
    fn versions(&self, model: &M) -> HashMap<String, String>;
}

/// A [`TypeTable`] over a `BTreeMap<String, Versioned<T>>` field of `M`.
pub struct Table<M, T> {
    /// The type URL.
    pub type_url: &'static str,
    /// Decodes and validates one resource sent under a name (it checks the
    /// resource's own name against it, where the type has one).
    pub validate: fn(&Any, &str) -> Result<T, Invalid>,
    /// The map in the model.
    pub map: fn(&M) -> &BTreeMap<String, Versioned<T>>,
    /// The same map, to change.
    pub map_mut: fn(&mut M) -> &mut BTreeMap<String, Versioned<T>>,
}

impl<M, T: PartialEq> TypeTable<M> for Table<M, T> {
    fn type_url(&self) -> &'static str {
        self.type_url
    }

    fn accept(&self, model: &mut M, name: &str, version: &str, any: &Any) -> Result<bool, Invalid> {
        let value = (self.validate)(any, name)?;
        Ok(upsert(
            (self.map_mut)(model),
            name,
            version.to_owned(),
            value,
        ))
    }

    fn remove(&self, model: &mut M, name: &str) -> bool {
        (self.map_mut)(model).remove(name).is_some()
    }

    fn versions(&self, model: &M) -> HashMap<String, String> {
        (self.map)(model)
            .iter()
            .map(|(k, v)| (k.clone(), v.version.clone()))
            .collect()
    }
}

// === the sidecar's tables ===

/// The sidecar's types: Secrets, Clusters, ClusterLoadAssignments,
/// Listeners and RouteConfigurations.
static SIDECAR_TABLES: [&dyn TypeTable<ProxyConfig>; 5] = [
    &Table {
        type_url: SECRET,
        validate: |any, _| validate::secret(any),
        map: |c: &ProxyConfig| &c.secrets,
        map_mut: |c: &mut ProxyConfig| &mut c.secrets,
    },
    &Table {
        type_url: CLUSTER,
        validate: |any, name| validate::cluster(any).and_then(|c| named(name, &c.name).map(|()| c)),
        map: |c: &ProxyConfig| &c.clusters,
        map_mut: |c: &mut ProxyConfig| &mut c.clusters,
    },
    &Table {
        type_url: ENDPOINTS,
        validate: |any, _| validate::load_assignment(any),
        map: |c: &ProxyConfig| &c.endpoints,
        map_mut: |c: &mut ProxyConfig| &mut c.endpoints,
    },
    &SidecarListeners,
    &Table {
        type_url: ROUTE,
        validate: |any, name| {
            validate::route_configuration(any).and_then(|r| named(name, &r.name).map(|()| r))
        },
        map: |c: &ProxyConfig| &c.routes,
        map_mut: |c: &mut ProxyConfig| &mut c.routes,
    },
];

/// The sidecar's Listeners: every one is a [`ListenerSpec`] the listener
/// manager binds, except the MeshMetric carrier
/// ([`LISTENER_NAME`](meshlink_proto::metrics_listener::LISTENER_NAME)),
/// which is read into [`ProxyConfig::metrics`] and never bound, and the
/// mesh DNS ([`LISTENER_NAME`](meshlink_proto::dns_listener::LISTENER_NAME),
/// and [`LISTENER_NAME_IPV6`](meshlink_proto::dns_listener::LISTENER_NAME_IPV6)
/// for a dual-stack proxy), read into [`ProxyConfig::dns`] for the DNS
/// servers (`crate::dns`).
///
/// [`ListenerSpec`]: crate::model::ListenerSpec
struct SidecarListeners;

impl TypeTable<ProxyConfig> for SidecarListeners {
    fn type_url(&self) -> &'static str {
        LISTENER
    }

    fn accept(
        &self,
        model: &mut ProxyConfig,
        name: &str,
        version: &str,
        any: &Any,
    ) -> Result<bool, Invalid> {
        if name == METRICS_LISTENER {
            let policy = validate::metrics_listener(any)?;
            return Ok(upsert(&mut model.metrics, name, version.to_owned(), policy));
        }
        if DNS_LISTENERS.contains(&name) {
            let spec = validate::dns_listener(any)?;
            return Ok(upsert(&mut model.dns, name, version.to_owned(), spec));
        }
        let listener = validate::listener(any).and_then(|l| named(name, &l.name).map(|()| l))?;
        Ok(upsert(
            &mut model.listeners,
            name,
            version.to_owned(),
            listener,
        ))
    }

    fn remove(&self, model: &mut ProxyConfig, name: &str) -> bool {
        model.metrics.remove(name).is_some()
            | model.dns.remove(name).is_some()
            | model.listeners.remove(name).is_some()
    }

    fn versions(&self, model: &ProxyConfig) -> HashMap<String, String> {
        model
            .listeners
            .iter()
            .map(|(k, v)| (k.clone(), v.version.clone()))
            .chain(
                model
                    .metrics
                    .iter()
                    .map(|(k, v)| (k.clone(), v.version.clone())),
            )
            .chain(
                model
                    .dns
                    .iter()
                    .map(|(k, v)| (k.clone(), v.version.clone())),
            )
            .collect()
    }
}

impl XdsModel for ProxyConfig {
    const SERVED_BY: &'static str = "meshlink-proxy";

    fn tables() -> &'static [&'static dyn TypeTable<Self>] {
        &SIDECAR_TABLES
    }

    fn received_mut(&mut self) -> &mut BTreeSet<String> {
        &mut self.received
    }
}

/// Applies `response` to `model` in place.
pub fn apply<M: XdsModel>(model: &mut M, response: &DeltaDiscoveryResponse) -> Applied {
    let ty = response.type_url.as_str();
    let mut out = Applied::default();
    let Some(table) = M::tables().iter().find(|t| t.type_url() == ty) else {
        out.rejected.push(Rejected {
            type_url: ty.to_owned(),
            name: String::new(),
            version: response.system_version_info.clone(),
            error: format!("type is not supported by {}", M::SERVED_BY),
        });
        return out;
    };
    out.changed |= model.received_mut().insert(ty.to_owned());
    for resource in &response.resources {
        let Some(any) = present(resource, ty, &mut out) else {
            continue;
        };
        match table.accept(model, &resource.name, &resource.version, any) {
            Ok(changed) => out.changed |= changed,
            Err(e) => out.rejected.push(Rejected {
                type_url: ty.to_owned(),
                name: resource.name.clone(),
                version: resource.version.clone(),
                error: e.to_string(),
            }),
        }
    }
    for name in &response.removed_resources {
        out.changed |= table.remove(model, name);
    }
    out
}

/// The versions `model` holds for `type_url`, sent as
/// `initial_resource_versions` on reconnect. Only accepted resources are
/// listed, so a rejected version is never claimed.
pub fn held_versions<M: XdsModel>(model: &M, type_url: &str) -> HashMap<String, String> {
    M::tables()
        .iter()
        .find(|t| t.type_url() == type_url)
        .map(|t| t.versions(model))
        .unwrap_or_default()
}

/// The resource's `Any`, or a rejection when the response left it out.
pub(crate) fn present<'a>(
    resource: &'a envoy_types::pb::envoy::service::discovery::v3::Resource,
    type_url: &str,
    out: &mut Applied,
) -> Option<&'a Any> {
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

#[cfg(test)]
mod tests;
