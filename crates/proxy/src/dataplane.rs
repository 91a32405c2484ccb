//! What the data path reads: the accepted configuration joined with the
//! current identity, as ready-made rustls configs and balancers.
//!
//! Owns building one immutable [`Dataplane`] per change (config update or
//! certificate rotation) and deciding, per listener, whether everything it
//! references has arrived (I2). Connection handlers take the latest
//! `Arc<Dataplane>` when they accept and keep it for the connection's
//! life, so a rotation swaps configs for new handshakes only and never
//! touches an open connection.

use std::collections::HashMap;
use std::sync::Arc;

use meshlink_identity::{ClientAuth, SpiffeId, TrustBundle};
use rustls::{ClientConfig, ServerConfig};

use crate::identity::WorkloadIdentity;
use crate::lb::Balancer;
use crate::model::{ClusterSpec, ListenerSpec, ProxyConfig};

/// A cluster ready for connections.
#[derive(Debug)]
pub struct ClusterRuntime {
    /// The validated cluster.
    pub spec: Arc<ClusterSpec>,
    /// Its endpoints and their health.
    pub balancer: Balancer,
    /// The TLS client config when the cluster originates mTLS.
    pub tls: Option<Arc<ClientConfig>>,
}

/// The data path's view at one moment.
#[derive(Debug, Default)]
pub struct Dataplane {
    /// The accepted configuration this was built from.
    pub config: Arc<ProxyConfig>,
    /// The identity this was built from.
    pub identity: Option<Arc<WorkloadIdentity>>,
    /// Clusters whose references are all present, by name.
    pub clusters: HashMap<String, Arc<ClusterRuntime>>,
    /// Server TLS configs by trust-bundle secret name.
    pub servers: HashMap<String, Arc<ServerConfig>>,
    /// Why each cluster that is missing from `clusters` is not ready.
    pub cluster_waiting: HashMap<String, String>,
}

impl Dataplane {
    /// Builds the view of `config` with `identity`, reusing endpoint
    /// health from `previous`.
    pub fn build(
        config: Arc<ProxyConfig>,
        identity: Option<Arc<WorkloadIdentity>>,
        previous: Option<&Dataplane>,
    ) -> Dataplane {
        let mut dp = Dataplane {
            config: config.clone(),
            identity: identity.clone(),
            ..Default::default()
        };
        let reuse = previous.map(|p| Reuse::new(p, &config, identity.as_ref()));
        for (name, cluster) in &config.clusters {
            let spec = cluster.value.clone();
            let Some(addrs) = config.endpoints_of(&spec) else {
                dp.cluster_waiting.insert(
                    name.clone(),
                    format!("waiting for the endpoints (ClusterLoadAssignment {name:?})"),
                );
                continue;
            };
            if let Some(same) = reuse.as_ref().and_then(|r| r.cluster(name, &spec, &addrs)) {
                dp.clusters.insert(name.clone(), same);
                continue;
            }
            let tls = match &spec.tls {
                None => None,
                Some(tls) => match reuse.as_ref().and_then(|r| r.client_tls(name, &spec)) {
                    Some(same) => Some(same),
                    None => match client_tls(&config, identity.as_deref(), tls) {
                        Ok(c) => Some(c),
                        Err(why) => {
                            dp.cluster_waiting.insert(name.clone(), why);
                            continue;
                        }
                    },
                },
            };
            let previous_balancer = previous
                .and_then(|p| p.clusters.get(name))
                .map(|c| &c.balancer);
            dp.clusters.insert(
                name.clone(),
                Arc::new(ClusterRuntime {
                    balancer: Balancer::new(spec.lb, &addrs, previous_balancer),
                    spec,
                    tls,
                }),
            );
        }
        for listener in config.listeners.values() {
            let Some(tls) = &listener.value.tls else {
                continue;
            };
            if dp.servers.contains_key(&tls.ca_secret) {
                continue;
            }
            if let Some(same) = reuse.as_ref().and_then(|r| r.server_tls(&tls.ca_secret)) {
                dp.servers.insert(tls.ca_secret.clone(), same);
                continue;
            }
            if let Ok((id, bundle)) = material(&config, identity.as_deref(), &tls.ca_secret)
                && let Ok(server) = meshlink_identity::server_config(
                    &id.cert,
                    &id.key_pem,
                    bundle,
                    ClientAuth::Required,
                )
            {
                dp.servers.insert(tls.ca_secret.clone(), server);
            }
        }
        dp
    }

    /// `None` when `listener` can serve; otherwise what it waits for.
    pub fn warming_reason(&self, listener: &ListenerSpec) -> Option<String> {
        if let Some(tls) = &listener.tls
            && !self.servers.contains_key(&tls.ca_secret)
        {
            return Some(
                material(&self.config, self.identity.as_deref(), &tls.ca_secret)
                    .err()
                    .unwrap_or_else(|| "the TLS configuration cannot be built".into()),
            );
        }
        if self.clusters.contains_key(&listener.cluster) {
            return None;
        }
        Some(match self.cluster_waiting.get(&listener.cluster) {
            Some(why) => format!("cluster {:?}: {why}", listener.cluster),
            None => format!("waiting for cluster {:?}", listener.cluster),
        })
    }
}

/// Builds a cluster's client TLS config: its identity, the trust bundle
/// and the SPIFFE IDs the server may present.
fn client_tls(
    config: &ProxyConfig,
    identity: Option<&WorkloadIdentity>,
    tls: &crate::model::UpstreamTls,
) -> Result<Arc<ClientConfig>, String> {
    let (id, bundle) = material(config, identity, &tls.ca_secret)?;
    let expected = tls
        .expected_spiffe_ids
        .iter()
        .map(|s| {
            SpiffeId::parse(s).map_err(|e| format!("expected SPIFFE ID {s:?} is invalid: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    meshlink_identity::client_config_any_of(Some((&id.cert, &id.key_pem)), bundle, expected)
        .map_err(|e| e.to_string())
}

/// What a new view may take from the previous one unchanged. An input is
/// unchanged when it is the same `Arc`: the xDS apply path replaces a
/// resource's `Arc` only when its version or content changed, and a
/// rotation publishes a new identity `Arc`. Reusing a rustls config keeps
/// its TLS session cache (resumption between sidecars); reusing a whole
/// cluster keeps its balancer's state as it is.
struct Reuse<'a> {
    previous: &'a Dataplane,
    config: &'a ProxyConfig,
    same_identity: bool,
}

impl<'a> Reuse<'a> {
    fn new(
        previous: &'a Dataplane,
        config: &'a ProxyConfig,
        identity: Option<&Arc<WorkloadIdentity>>,
    ) -> Self {
        let same_identity = match (&previous.identity, identity) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        Reuse {
            previous,
            config,
            same_identity,
        }
    }

    /// Whether trust-bundle secret `name` is the same as before.
    fn same_secret(&self, name: &str) -> bool {
        match (
            self.previous.config.secrets.get(name),
            self.config.secrets.get(name),
        ) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a.value, &b.value),
            _ => false,
        }
    }

    /// The previous client TLS config of `cluster`, if its inputs are the
    /// same.
    fn client_tls(&self, cluster: &str, spec: &ClusterSpec) -> Option<Arc<ClientConfig>> {
        let old = self.previous.clusters.get(cluster)?;
        let tls = spec.tls.as_ref()?;
        (self.same_identity && old.spec.tls == spec.tls && self.same_secret(&tls.ca_secret))
            .then(|| old.tls.clone())
            .flatten()
    }

    /// The previous cluster itself, if nothing it was built from changed.
    fn cluster(
        &self,
        name: &str,
        spec: &Arc<ClusterSpec>,
        addrs: &[std::net::SocketAddr],
    ) -> Option<Arc<ClusterRuntime>> {
        let old = self.previous.clusters.get(name)?;
        let same_tls = match &spec.tls {
            None => true,
            Some(tls) => self.same_identity && self.same_secret(&tls.ca_secret),
        };
        let same = Arc::ptr_eq(&old.spec, spec)
            && same_tls
            && self.previous.config.endpoints_of(spec).as_deref() == Some(addrs);
        same.then(|| old.clone())
    }

    /// The previous server TLS config for trust bundle `ca_secret`.
    fn server_tls(&self, ca_secret: &str) -> Option<Arc<ServerConfig>> {
        (self.same_identity && self.same_secret(ca_secret))
            .then(|| self.previous.servers.get(ca_secret).cloned())
            .flatten()
    }
}

/// The identity and trust bundle a TLS context needs, or what is missing.
fn material<'a>(
    config: &'a ProxyConfig,
    identity: Option<&'a WorkloadIdentity>,
    ca_secret: &str,
) -> Result<(&'a WorkloadIdentity, &'a TrustBundle), String> {
    let bundle = config
        .trust_bundle(ca_secret)
        .ok_or_else(|| format!("waiting for the trust bundle (secret {ca_secret:?})"))?;
    let id = identity.ok_or_else(|| {
        "waiting for the identity certificate (Certify has not answered yet)".to_string()
    })?;
    Ok((id, bundle))
}

#[cfg(test)]
mod tests;
