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
        for (name, cluster) in &config.clusters {
            let spec = cluster.value.clone();
            let Some(addrs) = config.endpoints_of(&spec) else {
                dp.cluster_waiting.insert(
                    name.clone(),
                    format!("waiting for the endpoints (ClusterLoadAssignment {name:?})"),
                );
                continue;
            };
            let tls = match &spec.tls {
                None => None,
                Some(tls) => {
                    let built = material(&config, identity.as_deref(), &tls.ca_secret).and_then(
                        |(id, bundle)| {
                            let expected = tls
                                .expected_spiffe_ids
                                .iter()
                                .map(|s| {
                                    SpiffeId::parse(s).map_err(|e| {
                                        format!("expected SPIFFE ID {s:?} is invalid: {e}")
                                    })
                                })
                                .collect::<Result<Vec<_>, _>>()?;
                            meshlink_identity::client_config_any_of(
                                Some((&id.cert, &id.key_pem)),
                                bundle,
                                expected,
                            )
                            .map_err(|e| e.to_string())
                        },
                    );
                    match built {
                        Ok(c) => Some(c),
                        Err(why) => {
                            dp.cluster_waiting.insert(name.clone(), why);
                            continue;
                        }
                    }
                }
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
