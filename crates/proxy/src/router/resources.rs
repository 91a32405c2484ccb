//! The router's xDS model: the `meshlink.v1` router resources and the SDS
//! Secrets holding their credentials, as accepted from the control plane,
//! and their translation into a [`meshlink_link::RouterConfig`].
//!
//! Owns per-resource validation (a bad resource is NACKed and its last
//! good version kept, I3) and the mapping to the link crate's types. Pure:
//! no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::google::protobuf::Any;
use meshlink_link::{
    ConnectorConfig, ConnectorTarget, CredentialPem, KeyStrategy, LinkConfig, ListenerConfig,
    MultiKeyListenerConfig, RoleConfig, RouterConfig,
};
use meshlink_proto::certify as pb;
use meshlink_proto::types::{
    CONNECTOR_TYPE, LINK_TYPE, MESH_INGRESS_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE,
    SECRET_TYPE, SITE_TYPE,
};

use crate::model::Versioned;
use crate::xds::apply::{Table, TypeTable, XdsModel, named};
use crate::xds::validate::{Invalid, decode, pem_of};

/// Type URLs a router subscribes to, Secrets first (I2).
pub use meshlink_proto::types::ROUTER_TYPES;

/// The inter-router role name, which interior routers dial.
pub const INTER_ROUTER_ROLE: &str = "inter-router";
/// The edge role name, which edge routers dial.
pub const EDGE_ROLE: &str = "edge";

/// One SDS Secret as the router uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdsSecret {
    /// `tls:<name>`: certificate chain and private key (PEM).
    Certificate {
        /// `tls.crt`.
        chain: String,
        /// `tls.key`.
        key: String,
    },
    /// `ca:<name>`: the CA that verifies the peer (PEM).
    Ca(String),
}

/// Everything the router has accepted, by type and name.
#[derive(Debug, Clone, Default)]
pub struct RouterResources {
    /// Types at least one response arrived for.
    pub received: BTreeSet<String>,
    /// SDS Secrets by name (`tls:X`, `ca:X`).
    pub secrets: BTreeMap<String, Versioned<SdsSecret>>,
    /// The Site (at most one).
    pub sites: BTreeMap<String, Versioned<pb::Site>>,
    /// RouterAccesses by name.
    pub accesses: BTreeMap<String, Versioned<pb::RouterAccess>>,
    /// Links by name.
    pub links: BTreeMap<String, Versioned<pb::Link>>,
    /// Listeners by name.
    pub listeners: BTreeMap<String, Versioned<pb::Listener>>,
    /// Connectors by name.
    pub connectors: BTreeMap<String, Versioned<pb::Connector>>,
    /// Mesh ingresses by mesh name.
    pub mesh_ingresses: BTreeMap<String, Versioned<pb::MeshIngress>>,
}

/// What the router is configured to be, once a Site arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteIdentity {
    /// The site id: the router id in the network.
    pub id: String,
    /// The site name.
    pub name: String,
    /// An edge site's router.
    pub edge: bool,
}

// === impl RouterResources ===

/// A router table of a `meshlink.v1` type `$pb`, kept in `$field`, checked
/// by `$check` after its own name is compared with the name it was sent as.
macro_rules! router_table {
    ($url:expr, $pb:ty, $field:ident, $check:expr) => {
        &Table {
            type_url: $url,
            validate: |any, name| {
                decode::<$pb>(any, "resource")
                    .and_then(|r| named(name, &r.name).map(|()| r))
                    .and_then($check)
            },
            map: |r: &RouterResources| &r.$field,
            map_mut: |r: &mut RouterResources| &mut r.$field,
        }
    };
}

/// The router's types, in [`ROUTER_TYPES`] order.
static ROUTER_TABLES: [&dyn TypeTable<RouterResources>; 7] = [
    &Table {
        type_url: SECRET_TYPE,
        validate: sds_secret,
        map: |r: &RouterResources| &r.secrets,
        map_mut: |r: &mut RouterResources| &mut r.secrets,
    },
    router_table!(SITE_TYPE, pb::Site, sites, Ok),
    router_table!(ROUTER_ACCESS_TYPE, pb::RouterAccess, accesses, check_access),
    router_table!(LINK_TYPE, pb::Link, links, check_link),
    router_table!(
        ROUTER_LISTENER_TYPE,
        pb::Listener,
        listeners,
        check_listener
    ),
    router_table!(CONNECTOR_TYPE, pb::Connector, connectors, check_connector),
    router_table!(
        MESH_INGRESS_TYPE,
        pb::MeshIngress,
        mesh_ingresses,
        mesh_ingress::check
    ),
];

impl XdsModel for RouterResources {
    const SERVED_BY: &'static str = "meshlink-proxy in router mode";

    fn tables() -> &'static [&'static dyn TypeTable<Self>] {
        &ROUTER_TABLES
    }

    fn received_mut(&mut self) -> &mut BTreeSet<String> {
        &mut self.received
    }
}

impl RouterResources {
    /// The site this router serves, once its Site (with an id) arrived.
    pub fn site(&self) -> Result<SiteIdentity, &'static str> {
        let Some(site) = self.sites.values().next() else {
            return Err(if self.received.contains(SITE_TYPE) {
                "no Site in this control plane yet; apply a Site (skupper.io Site) to it"
            } else {
                "waiting for the control plane to send this router's Site"
            });
        };
        if site.value.id.is_empty() {
            return Err("the Site has no id yet; the control plane assigns one shortly");
        }
        Ok(SiteIdentity {
            id: site.value.id.clone(),
            name: site.value.name.clone(),
            edge: site.value.edge,
        })
    }

    /// The link crate's configuration: roles bind `bind_host` unless their
    /// RouterAccess names a `bindHost`; an edge router dials its links'
    /// `edge` endpoints, an interior one their `inter-router` endpoints;
    /// the mesh ingress (if any mesh needs one) binds
    /// `bind_host:mesh_port`.
    pub fn link_config(&self, bind_host: &str, mesh_port: u16, edge: bool) -> RouterConfig {
        let credentials = self.credentials();
        let mesh_ingress =
            mesh_ingress::config(&self.mesh_ingresses, &credentials, bind_host, mesh_port);
        let mut config = RouterConfig {
            mesh_ingress,
            credentials,
            require_router_identity: self
                .sites
                .values()
                .next()
                .is_some_and(|s| s.value.require_router_identity),
            ..Default::default()
        };
        for access in self.accesses.values() {
            let a = &access.value;
            for role in &a.roles {
                let host = if role.bind_host.is_empty() {
                    bind_host
                } else {
                    &role.bind_host
                };
                config.roles.push(RoleConfig {
                    name: format!("{}/{}", a.name, role.name),
                    host: host.to_owned(),
                    port: u16::try_from(role.port).unwrap_or(0),
                    credential: a.tls_credentials.clone(),
                });
            }
        }
        for link in self.links.values() {
            let l = &link.value;
            let want = if edge { EDGE_ROLE } else { INTER_ROUTER_ROLE };
            let Some(endpoint) = l
                .endpoints
                .iter()
                .find(|e| e.name == want)
                .or_else(|| l.endpoints.first())
            else {
                continue;
            };
            config.links.push(LinkConfig {
                name: l.name.clone(),
                host: endpoint.host.clone(),
                port: u16::try_from(endpoint.port).unwrap_or(0),
                cost: u32::try_from(l.cost.max(1)).unwrap_or(u32::MAX),
                credential: l.tls_credentials.clone(),
            });
        }
        for listener in self.listeners.values() {
            let l = &listener.value;
            // Skupper's Listener `host` names the service; an IP address is
            // bound as given, a name on the router's bind host.
            let host = if l.host.parse::<std::net::IpAddr>().is_ok() {
                l.host.clone()
            } else {
                bind_host.to_owned()
            };
            let port = u16::try_from(l.port).unwrap_or(0);
            if l.keys.is_empty() {
                config.listeners.push(ListenerConfig {
                    name: l.name.clone(),
                    routing_key: l.routing_key.clone(),
                    host,
                    port,
                });
            } else {
                config.multi_key_listeners.push(MultiKeyListenerConfig {
                    name: l.name.clone(),
                    host,
                    port,
                    strategy: key_strategy(l),
                });
            }
        }
        for connector in self.connectors.values() {
            let c = &connector.value;
            config.connectors.push(ConnectorConfig {
                name: c.name.clone(),
                routing_key: c.routing_key.clone(),
                targets: c.targets.iter().filter_map(|t| target(t)).collect(),
            });
        }
        config
    }

    /// Credentials whose certificate and CA Secrets both arrived, by name.
    fn credentials(&self) -> BTreeMap<String, CredentialPem> {
        let mut out = BTreeMap::new();
        for (name, secret) in &self.secrets {
            let (Some(base), SdsSecret::Certificate { chain, key }) =
                (name.strip_prefix("tls:"), secret.value.as_ref())
            else {
                continue;
            };
            let Some(ca) = self.secrets.get(&format!("ca:{base}")) else {
                continue;
            };
            let SdsSecret::Ca(ca) = ca.value.as_ref() else {
                continue;
            };
            out.insert(
                base.to_owned(),
                CredentialPem {
                    tls_crt: chain.clone(),
                    tls_key: key.clone(),
                    ca_crt: ca.clone(),
                },
            );
        }
        out
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> Invalid {
    Invalid {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// A `tls:` or `ca:` SDS Secret.
fn sds_secret(any: &Any, name: &str) -> Result<SdsSecret, Invalid> {
    let s: Secret = decode(any, "resource")?;
    named(name, &s.name)?;
    match s.r#type {
        Some(secret::Type::TlsCertificate(t)) => Ok(SdsSecret::Certificate {
            chain: pem_of(
                t.certificate_chain.as_ref(),
                "tls_certificate.certificate_chain",
            )?,
            key: pem_of(t.private_key.as_ref(), "tls_certificate.private_key")?,
        }),
        Some(secret::Type::ValidationContext(v)) => Ok(SdsSecret::Ca(pem_of(
            v.trusted_ca.as_ref(),
            "validation_context.trusted_ca",
        )?)),
        _ => Err(invalid(
            "type",
            "a router takes tls_certificate and validation_context secrets",
        )),
    }
}

fn port(p: u32, field: &str) -> Result<(), Invalid> {
    if p == 0 || p > u32::from(u16::MAX) {
        return Err(invalid(field, format!("{p} is not a port (1-65535)")));
    }
    Ok(())
}

fn check_access(a: pb::RouterAccess) -> Result<pb::RouterAccess, Invalid> {
    if a.tls_credentials.is_empty() {
        return Err(invalid(
            "tls_credentials",
            "is empty; name the server Secret",
        ));
    }
    for (i, r) in a.roles.iter().enumerate() {
        port(r.port, &format!("roles[{i}].port"))?;
    }
    Ok(a)
}

fn check_link(l: pb::Link) -> Result<pb::Link, Invalid> {
    if l.endpoints.is_empty() {
        return Err(invalid(
            "endpoints",
            "is empty; a link needs the peer's endpoint",
        ));
    }
    for (i, e) in l.endpoints.iter().enumerate() {
        port(e.port, &format!("endpoints[{i}].port"))?;
    }
    if l.tls_credentials.is_empty() {
        return Err(invalid(
            "tls_credentials",
            "is empty; name the client Secret",
        ));
    }
    Ok(l)
}

fn check_listener(l: pb::Listener) -> Result<pb::Listener, Invalid> {
    if l.port > u32::from(u16::MAX) {
        return Err(invalid("port", format!("{} is not a port", l.port)));
    }
    if l.routing_key.is_empty() && l.keys.is_empty() {
        return Err(invalid("routing_key", "is empty and no keys are given"));
    }
    for (i, k) in l.keys.iter().enumerate() {
        if k.routing_key.is_empty() {
            return Err(invalid(&format!("keys[{i}].routing_key"), "is empty"));
        }
        if l.weighted && k.weight == 0 {
            return Err(invalid(&format!("keys[{i}].weight"), "must be at least 1"));
        }
    }
    Ok(l)
}

/// A MultiKeyListener's strategy.
fn key_strategy(l: &pb::Listener) -> KeyStrategy {
    let keys = l.keys.iter().map(|k| k.routing_key.clone());
    if l.weighted {
        KeyStrategy::Weighted(keys.zip(l.keys.iter().map(|k| k.weight)).collect())
    } else {
        KeyStrategy::Priority(keys.collect())
    }
}

fn check_connector(c: pb::Connector) -> Result<pb::Connector, Invalid> {
    if c.routing_key.is_empty() {
        return Err(invalid("routing_key", "is empty"));
    }
    for (i, t) in c.targets.iter().enumerate() {
        if target(t).is_none() {
            return Err(invalid(
                &format!("targets[{i}]"),
                format!("{t:?} is not host:port"),
            ));
        }
    }
    Ok(c)
}

/// `host:port` or `[v6]:port`.
fn target(t: &str) -> Option<ConnectorTarget> {
    let (host, port) = t.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| ConnectorTarget {
        host: host.to_owned(),
        port,
    })
}

mod mesh_ingress;
#[cfg(test)]
mod tests;
