//! What a router runs, as the control plane (or a test) hands it over:
//! RouterAccess roles to bind, Links to dial, Listeners and Connectors,
//! and the credentials they name.
//!
//! Owns the types and their validation, which reports every error with a
//! field path before anything is applied. It never binds or dials.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::credentials::CredentialPem;

/// The whole runtime configuration of a router; [`crate::Router::apply`]
/// diffs it against the running one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RouterConfig {
    /// Credentials by Secret name.
    pub credentials: BTreeMap<String, CredentialPem>,
    /// RouterAccess roles to accept links on.
    pub roles: Vec<RoleConfig>,
    /// Links to dial.
    pub links: Vec<LinkConfig>,
    /// Local TCP listeners, each opening a flow per connection.
    pub listeners: Vec<ListenerConfig>,
    /// Local TCP listeners whose flows go to one of several routing keys
    /// (Skupper's MultiKeyListener).
    pub multi_key_listeners: Vec<MultiKeyListenerConfig>,
    /// Local targets for flows that arrive for a routing key.
    pub connectors: Vec<ConnectorConfig>,
    /// Refuse, in the TLS handshake, a dialling router whose client
    /// certificate names no router ([`crate::peer_policy`]); by default
    /// such a peer is accepted as `unbound`.
    pub require_router_identity: bool,
    /// The mTLS ingress for mesh sidecars, if any mesh needs one.
    pub mesh_ingress: Option<MeshIngressConfig>,
}

/// The mesh ingress: one port on which mesh sidecars open flows to routing
/// keys over mTLS, the key chosen by the TLS server name (SNI).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshIngressConfig {
    /// Address to bind.
    pub host: String,
    /// Port to bind; 0 picks a free one (see the router status).
    pub port: u16,
    /// One entry per mesh.
    pub meshes: Vec<MeshIngressMesh>,
}

/// One mesh served by the mesh ingress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshIngressMesh {
    /// The mesh's name.
    pub name: String,
    /// The router's certificate and key in the mesh (`tls.crt`,
    /// `tls.key`) and the mesh trust bundle (`ca.crt`); `None` until they
    /// arrived (the ingress stays warming).
    #[serde(skip)]
    pub credential: Option<CredentialPem>,
    /// The routing keys, by SNI.
    pub keys: Vec<MeshIngressKey>,
}

/// One routing key of the mesh ingress and who may open flows to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshIngressKey {
    /// The TLS server name that selects the key.
    pub sni: String,
    /// The routing key.
    pub routing_key: String,
    /// SPIFFE IDs allowed (everyone else is refused).
    pub allowed: Vec<String>,
}

/// A RouterAccess role: where links are accepted and with which server
/// credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleConfig {
    /// Role name, e.g. `inter-router`; unique among roles.
    pub name: String,
    /// Address to bind (`0.0.0.0`, `127.0.0.2`, `::`).
    pub host: String,
    /// Port to bind; 0 picks a free one (see the router status).
    pub port: u16,
    /// Name of the server credential in [`RouterConfig::credentials`].
    pub credential: String,
}

/// A Link to dial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkConfig {
    /// Link name; unique among links.
    pub name: String,
    /// The peer's host: a DNS name or an IP address, also the TLS server
    /// name its certificate must carry.
    pub host: String,
    /// The peer's role port.
    pub port: u16,
    /// Path cost, at least 1.
    pub cost: u32,
    /// Name of the client credential in [`RouterConfig::credentials`].
    pub credential: String,
}

/// A local TCP listener for a routing key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerConfig {
    /// Listener name; unique among listeners.
    pub name: String,
    /// The routing key its flows go to.
    pub routing_key: String,
    /// Address to bind.
    pub host: String,
    /// Port to bind; 0 picks a free one (see the router status).
    pub port: u16,
}

/// A local TCP listener over several routing keys: each new flow goes to
/// a key chosen by `strategy` among those with a reachable connector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiKeyListenerConfig {
    /// Listener name; unique among multi-key listeners.
    pub name: String,
    /// Address to bind.
    pub host: String,
    /// Port to bind; 0 picks a free one (see the router status).
    pub port: u16,
    /// How each new flow's routing key is chosen.
    pub strategy: KeyStrategy,
}

/// How a multi-key listener chooses a routing key for a new flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyStrategy {
    /// The first key (in this order) with a reachable connector; when the
    /// chosen key's flow cannot be opened, the next reachable one.
    Priority(Vec<String>),
    /// Among the keys with a reachable connector, in proportion to their
    /// weights (smooth weighted round robin); weights are at least 1.
    Weighted(Vec<(String, u32)>),
}

impl KeyStrategy {
    /// The routing keys, in the order given.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            KeyStrategy::Priority(keys) => keys.iter().map(String::as_str).collect(),
            KeyStrategy::Weighted(keys) => keys.iter().map(|(k, _)| k.as_str()).collect(),
        }
    }
}

/// A local target for a routing key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorConfig {
    /// Connector name; unique among connectors.
    pub name: String,
    /// The routing key it serves.
    pub routing_key: String,
    /// Where flows for the key go, round robin (a Connector's host and
    /// port, or the Dataplanes its selector picked). A connector with no
    /// target is not advertised.
    pub targets: Vec<ConnectorTarget>,
}

/// One address a connector forwards flows to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorTarget {
    /// The target's host: a DNS name or an IP address.
    pub host: String,
    /// The target's port.
    pub port: u16,
}

/// One invalid field: its path and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    /// Field path, e.g. `links[1].cost`.
    pub path: String,
    /// What is wrong and how to fix it.
    pub reason: String,
}

// === impl RouterConfig ===

impl RouterConfig {
    /// Every error in the configuration, with its field path; empty when
    /// it can be applied as a whole.
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut err = |path: String, reason: &str| {
            errors.push(ConfigError {
                path,
                reason: reason.to_owned(),
            })
        };
        let mut names = Names::default();
        for (i, role) in self.roles.iter().enumerate() {
            let at = format!("roles[{i}]");
            names.check(&mut err, &at, "role", &role.name);
            check_host(&mut err, &at, &role.host);
            self.check_credential(&mut err, &at, &role.credential);
        }
        for (i, link) in self.links.iter().enumerate() {
            let at = format!("links[{i}]");
            names.check(&mut err, &at, "link", &link.name);
            check_host(&mut err, &at, &link.host);
            if link.port == 0 {
                err(
                    format!("{at}.port"),
                    "must be the peer's role port, 1-65535",
                );
            }
            if link.cost == 0 {
                err(format!("{at}.cost"), "must be at least 1");
            }
            self.check_credential(&mut err, &at, &link.credential);
        }
        for (i, l) in self.listeners.iter().enumerate() {
            let at = format!("listeners[{i}]");
            names.check(&mut err, &at, "listener", &l.name);
            check_key(&mut err, &at, &l.routing_key);
            check_host(&mut err, &at, &l.host);
        }
        for (i, l) in self.multi_key_listeners.iter().enumerate() {
            let at = format!("multiKeyListeners[{i}]");
            names.check(&mut err, &at, "multi-key listener", &l.name);
            check_host(&mut err, &at, &l.host);
            let keys = l.strategy.keys();
            if keys.is_empty() {
                err(
                    format!("{at}.strategy"),
                    "has no routing key; name at least one",
                );
            }
            for (j, key) in keys.iter().enumerate() {
                check_key(&mut err, &format!("{at}.strategy[{j}]"), key);
            }
            if let KeyStrategy::Weighted(w) = &l.strategy
                && let Some(j) = w.iter().position(|(_, weight)| *weight == 0)
            {
                err(format!("{at}.strategy[{j}].weight"), "must be at least 1");
            }
        }
        if let Some(m) = &self.mesh_ingress {
            check_host(&mut err, "meshIngress", &m.host);
            let mut snis = std::collections::HashSet::new();
            for (i, mesh) in m.meshes.iter().enumerate() {
                for (j, k) in mesh.keys.iter().enumerate() {
                    let at = format!("meshIngress.meshes[{i}].keys[{j}]");
                    check_key(&mut err, &at, &k.routing_key);
                    if !snis.insert(k.sni.as_str()) {
                        err(format!("{at}.sni"), "appears twice; one SNI names one key");
                    }
                }
            }
        }
        for (i, c) in self.connectors.iter().enumerate() {
            let at = format!("connectors[{i}]");
            names.check(&mut err, &at, "connector", &c.name);
            check_key(&mut err, &at, &c.routing_key);
            for (j, t) in c.targets.iter().enumerate() {
                let at = format!("{at}.targets[{j}]");
                check_host(&mut err, &at, &t.host);
                if t.port == 0 {
                    err(format!("{at}.port"), "must be the target's port, 1-65535");
                }
            }
        }
        errors
    }

    fn check_credential(&self, err: &mut impl FnMut(String, &str), at: &str, name: &str) {
        if name.is_empty() {
            err(
                format!("{at}.credential"),
                "is empty; name a kubernetes.io/tls Secret",
            );
        }
        // A name not (yet) in `credentials` is not an error: the item
        // stays warming until the Secret arrives (I2).
    }
}

#[derive(Default)]
struct Names(std::collections::HashSet<(&'static str, String)>);

impl Names {
    fn check(
        &mut self,
        err: &mut impl FnMut(String, &str),
        at: &str,
        kind: &'static str,
        name: &str,
    ) {
        if name.is_empty() {
            err(format!("{at}.name"), "is empty; give each item a name");
        } else if !self.0.insert((kind, name.to_owned())) {
            err(
                format!("{at}.name"),
                &format!("{kind} {name:?} appears twice; names must be unique"),
            );
        }
    }
}

fn check_host(err: &mut impl FnMut(String, &str), at: &str, host: &str) {
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('/') {
        err(
            format!("{at}.host"),
            "must be a DNS name or an IP address, e.g. `10.0.0.1`",
        );
    }
}

fn check_key(err: &mut impl FnMut(String, &str), at: &str, key: &str) {
    if key.is_empty() {
        err(format!("{at}.routingKey"), "is empty; name the routing key");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_is_reported_with_its_field_path() {
        let cfg = RouterConfig {
            links: vec![
                LinkConfig {
                    name: "l".into(),
                    host: "".into(),
                    port: 0,
                    cost: 0,
                    credential: "".into(),
                },
                LinkConfig {
                    name: "l".into(),
                    host: "b.example".into(),
                    port: 1,
                    cost: 1,
                    credential: "c".into(),
                },
            ],
            connectors: vec![ConnectorConfig {
                name: "c".into(),
                routing_key: "".into(),
                targets: vec![ConnectorTarget {
                    host: "127.0.0.1".into(),
                    port: 0,
                }],
            }],
            ..Default::default()
        };
        let paths: Vec<String> = cfg.validate().into_iter().map(|e| e.path).collect();
        assert_eq!(
            paths,
            [
                "links[0].host",
                "links[0].port",
                "links[0].cost",
                "links[0].credential",
                "links[1].name",
                "connectors[0].routingKey",
                "connectors[0].targets[0].port",
            ]
        );
    }
}
