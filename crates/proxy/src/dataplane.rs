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

use rustls_pki_types::ServerName;

use crate::http::pool::{Dialer, Pool};
use crate::identity::WorkloadIdentity;
use crate::lb::Balancer;
use crate::model::{ClusterSpec, ListenerProtocol, ListenerSpec, ProxyConfig};

/// A cluster ready for connections.
#[derive(Debug)]
pub struct ClusterRuntime {
    /// The validated cluster.
    pub spec: Arc<ClusterSpec>,
    /// Its endpoints and their health.
    pub balancer: Balancer,
    /// The TLS client config when the cluster originates mTLS.
    pub tls: Option<Arc<ClientConfig>>,
    /// Upstream HTTP connections, made on the first HTTP request.
    pub http: std::sync::OnceLock<Arc<Pool>>,
    /// The cluster's circuit breaker (its `circuit_breakers` limits).
    pub circuit: Arc<crate::circuit::Circuit>,
}

impl ClusterRuntime {
    /// The cluster's HTTP connection pool (made on first use).
    pub fn http_pool(&self) -> Arc<Pool> {
        self.http
            .get_or_init(|| {
                let tls = self
                    .tls
                    .clone()
                    .map(|config| (config, server_name(&self.spec)));
                Arc::new(Pool::new(Dialer {
                    tls,
                    connect_timeout: self.spec.connect_timeout,
                    http2: self.spec.http2,
                    circuit: self.circuit.clone(),
                }))
            })
            .clone()
    }
}

/// The TLS server name a cluster's connections send: its `sni`, else a
/// DNS-safe name derived from its own (the SPIFFE verifier ignores it).
pub fn server_name(spec: &ClusterSpec) -> ServerName<'static> {
    let sni = spec
        .tls
        .as_ref()
        .and_then(|t| t.sni.clone())
        .unwrap_or_else(|| sni(&spec.name));
    ServerName::try_from(sni)
        .unwrap_or_else(|_| ServerName::try_from("meshlink.local").expect("valid DNS name"))
}

/// A DNS-safe SNI for `cluster`.
fn sni(cluster: &str) -> String {
    let label: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("{}.meshlink.local", label.trim_matches('-'))
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
    /// Server TLS configs by [`crate::model::DownstreamTls::server_key`]
    /// (trust bundle and ALPN).
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
                    balancer: Balancer::new(
                        spec.lb,
                        &addrs,
                        spec.outlier_detection.clone(),
                        previous_balancer,
                    )
                    .with_active_checks(spec.health_check.is_some()),
                    circuit: Arc::new(crate::circuit::Circuit::new(spec.circuit_breakers)),
                    spec,
                    tls,
                    http: std::sync::OnceLock::new(),
                }),
            );
        }
        for listener in config.listeners.values() {
            let Some(tls) = &listener.value.tls else {
                continue;
            };
            let key = tls.server_key();
            if dp.servers.contains_key(&key) {
                continue;
            }
            if let Some(same) = reuse
                .as_ref()
                .and_then(|r| r.server_tls(&tls.ca_secret, &key))
            {
                dp.servers.insert(key, same);
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
                dp.servers.insert(key, with_server_alpn(server, &tls.alpn));
            }
        }
        dp
    }

    /// `None` when `listener` can serve; otherwise what it waits for.
    pub fn warming_reason(&self, listener: &ListenerSpec) -> Option<String> {
        if let Some(tls) = &listener.tls
            && !self.servers.contains_key(&tls.server_key())
        {
            return Some(
                material(&self.config, self.identity.as_deref(), &tls.ca_secret)
                    .err()
                    .unwrap_or_else(|| "the TLS configuration cannot be built".into()),
            );
        }
        if let ListenerProtocol::Http(http) = &listener.protocol {
            // Envoy's way: the listener waits for its routes; a route to a
            // cluster that is not ready answers 503 per request.
            return (!self.config.routes.contains_key(&http.route_config)).then(|| {
                format!(
                    "waiting for the routes (RouteConfiguration {:?})",
                    http.route_config
                )
            });
        }
        let cluster = listener
            .tcp_clusters()
            .into_iter()
            .find(|c| !self.clusters.contains_key(*c))?;
        Some(match self.cluster_waiting.get(cluster) {
            Some(why) => format!("cluster {cluster:?}: {why}"),
            None => format!("waiting for cluster {cluster:?}"),
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
    let config =
        meshlink_identity::client_config_any_of(Some((&id.cert, &id.key_pem)), bundle, expected)
            .map_err(|e| e.to_string())?;
    if tls.alpn.is_empty() {
        return Ok(config);
    }
    let mut config = Arc::unwrap_or_clone(config);
    config.alpn_protocols = tls.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Ok(Arc::new(config))
}

/// `server` offering `alpn` (unchanged when there is none).
fn with_server_alpn(server: Arc<ServerConfig>, alpn: &[String]) -> Arc<ServerConfig> {
    if alpn.is_empty() {
        return server;
    }
    let mut server = Arc::unwrap_or_clone(server);
    server.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Arc::new(server)
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

    /// The previous server TLS config for trust bundle `ca_secret` under
    /// `key` (the bundle and the ALPN list).
    fn server_tls(&self, ca_secret: &str, key: &str) -> Option<Arc<ServerConfig>> {
        (self.same_identity && self.same_secret(ca_secret))
            .then(|| self.previous.servers.get(key).cloned())
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
