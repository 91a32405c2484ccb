//! What one simulated Envoy holds: per type the resource versions, the
//! names its Clusters and Listeners reference, endpoints, and its
//! certificates. Updated from delta responses all-or-nothing (a response
//! that does not decode is NACKed and leaves the state as it was).
//!
//! It owns no I/O and no clock; the stream task (`stream.rs`) drives it.

use std::collections::{BTreeSet, HashMap};

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

use crate::resources::{self, ClusterRefs, SecretContent, SecretRefs};

/// The client kind the proxy announces in `node.metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ClientKind {
    /// Envoy: gets identity certificate and key over SDS.
    Envoy,
    /// meshlink-proxy: gets only the trust bundle over SDS (its identity
    /// comes from a CSR, which this generator does not send).
    MeshlinkProxy,
}

impl ClientKind {
    /// The `meshlink.dev/client` metadata value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Envoy => "envoy",
            Self::MeshlinkProxy => "meshlink-proxy",
        }
    }
}

/// An identity certificate as received over SDS.
#[derive(Debug, Clone)]
pub(crate) struct IdentityCert {
    /// Leaf certificate, DER.
    pub(crate) leaf_der: Vec<u8>,
    /// Serial number (hex).
    pub(crate) serial: String,
    /// `notAfter`, Unix seconds.
    pub(crate) not_after: i64,
    /// Whether the secret carried a private key.
    pub(crate) has_key: bool,
}

/// What a response did beyond updating state (for the protocol report).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ApplyStats {
    /// Resources whose version equals the one already held (a push
    /// without a change).
    pub(crate) unchanged: u64,
    /// EDS/SDS resources that were not subscribed.
    pub(crate) unsolicited: u64,
    /// Names removed.
    pub(crate) removed: u64,
}

/// Everything one proxy holds across streams.
#[derive(Debug, Default)]
pub(crate) struct ProxyState {
    versions: HashMap<String, HashMap<String, String>>,
    clusters: HashMap<String, ClusterRefs>,
    listeners: HashMap<String, SecretRefs>,
    endpoints: HashMap<String, Vec<(String, u32)>>,
    /// Identity certificates by secret name.
    pub(crate) identities: HashMap<String, IdentityCert>,
    bundles: HashMap<String, Vec<Vec<u8>>>,
    /// EDS names subscribed.
    pub(crate) sub_eds: BTreeSet<String>,
    /// SDS names subscribed.
    pub(crate) sub_sds: BTreeSet<String>,
    /// Last round this proxy reported ready for.
    pub(crate) ready_round: Option<u32>,
}

/// A subscription change to send for one type.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SubscriptionChange {
    /// Names to subscribe.
    pub(crate) subscribe: Vec<String>,
    /// Names to unsubscribe.
    pub(crate) unsubscribe: Vec<String>,
}

enum Decoded {
    Cluster(ClusterRefs),
    Listener(SecretRefs),
    Endpoints(Vec<(String, u32)>),
    Identity(IdentityCert),
    Bundle(Vec<Vec<u8>>),
    Opaque,
}

fn parse_identity(chain_pem: &[u8], has_key: bool) -> Result<IdentityCert, String> {
    let ders = resources::pem_certs(chain_pem)?;
    let leaf_der = ders.into_iter().next().unwrap_or_default();
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf_der)
        .map_err(|e| format!("identity certificate does not parse: {e}"))?;
    Ok(IdentityCert {
        serial: cert.tbs_certificate.raw_serial_as_string(),
        not_after: cert.validity().not_after.timestamp(),
        leaf_der: leaf_der.clone(),
        has_key,
    })
}

fn decode(type_url: &str, any: &envoy_types::pb::google::protobuf::Any) -> Result<Decoded, String> {
    Ok(match type_url {
        resources::CLUSTER => Decoded::Cluster(resources::cluster_refs(any)?),
        resources::LISTENER => Decoded::Listener(resources::listener_refs(any)?),
        resources::ENDPOINTS => Decoded::Endpoints(resources::endpoints(any)?),
        resources::SECRET => match resources::secret(any)? {
            SecretContent::Identity { chain_pem, has_key } => {
                Decoded::Identity(parse_identity(&chain_pem, has_key)?)
            }
            SecretContent::Bundle { ca_pem } => Decoded::Bundle(resources::pem_certs(&ca_pem)?),
            SecretContent::Other => Decoded::Opaque,
        },
        _ => Decoded::Opaque,
    })
}

impl ProxyState {
    /// Versions held for `type_url` (sent as `initial_resource_versions`).
    pub(crate) fn versions_of(&self, type_url: &str) -> HashMap<String, String> {
        self.versions.get(type_url).cloned().unwrap_or_default()
    }

    fn forget(&mut self, type_url: &str, name: &str) {
        if let Some(v) = self.versions.get_mut(type_url) {
            v.remove(name);
        }
        match type_url {
            resources::CLUSTER => drop(self.clusters.remove(name)),
            resources::LISTENER => drop(self.listeners.remove(name)),
            resources::ENDPOINTS => drop(self.endpoints.remove(name)),
            resources::SECRET => {
                self.identities.remove(name);
                self.bundles.remove(name);
            }
            _ => {}
        }
    }

    /// Applies a delta response. `Err` is the NACK detail; the state is
    /// then unchanged.
    pub(crate) fn apply(&mut self, resp: &DeltaDiscoveryResponse) -> Result<ApplyStats, String> {
        let ty = resp.type_url.as_str();
        let mut decoded = Vec::with_capacity(resp.resources.len());
        for r in &resp.resources {
            let any = r
                .resource
                .as_ref()
                .ok_or_else(|| format!("resource {:?} has no body", r.name))?;
            let d = decode(ty, any).map_err(|e| format!("resource {:?}: {e}", r.name))?;
            decoded.push((r.name.clone(), r.version.clone(), d));
        }
        let mut stats = ApplyStats::default();
        for name in &resp.removed_resources {
            stats.removed += 1;
            self.forget(ty, name);
        }
        for (name, version, d) in decoded {
            let subscribed = match ty {
                resources::ENDPOINTS => self.sub_eds.contains(&name),
                resources::SECRET => self.sub_sds.contains(&name),
                _ => true,
            };
            if !subscribed {
                stats.unsolicited += 1;
            }
            let held = self.versions.entry(ty.to_owned()).or_default();
            if held.get(&name) == Some(&version) {
                stats.unchanged += 1;
            }
            held.insert(name.clone(), version);
            match d {
                Decoded::Cluster(c) => drop(self.clusters.insert(name, c)),
                Decoded::Listener(l) => drop(self.listeners.insert(name, l)),
                Decoded::Endpoints(e) => drop(self.endpoints.insert(name, e)),
                Decoded::Identity(c) => drop(self.identities.insert(name, c)),
                Decoded::Bundle(b) => drop(self.bundles.insert(name, b)),
                Decoded::Opaque => {}
            }
        }
        Ok(stats)
    }

    /// EDS names the Clusters need that differ from the subscription;
    /// records the new subscription and drops unsubscribed endpoints.
    pub(crate) fn eds_change(&mut self) -> SubscriptionChange {
        let needed: BTreeSet<String> = self
            .clusters
            .values()
            .filter_map(|c| c.eds.clone())
            .collect();
        let change = diff(&self.sub_eds, &needed);
        for name in &change.unsubscribe {
            self.forget(resources::ENDPOINTS, name);
        }
        self.sub_eds = needed;
        change
    }

    /// SDS names the Clusters and Listeners need (identities only for
    /// Envoy), likewise.
    pub(crate) fn sds_change(&mut self, client: ClientKind) -> SubscriptionChange {
        let mut needed = BTreeSet::new();
        let refs = self
            .clusters
            .values()
            .map(|c| &c.secrets)
            .chain(self.listeners.values());
        for r in refs {
            needed.extend(r.bundles.iter().cloned());
            if client == ClientKind::Envoy {
                needed.extend(r.identities.iter().cloned());
            }
        }
        let change = diff(&self.sub_sds, &needed);
        for name in &change.unsubscribe {
            self.forget(resources::SECRET, name);
        }
        self.sub_sds = needed;
        change
    }

    /// Whether the proxy holds a complete configuration: Clusters and
    /// Listeners, every subscribed EDS and SDS resource, and (Envoy) an
    /// identity certificate with key valid at `now_unix`.
    pub(crate) fn complete(&self, client: ClientKind, now_unix: i64) -> bool {
        !self.clusters.is_empty()
            && !self.listeners.is_empty()
            && self.sub_eds.iter().all(|n| self.endpoints.contains_key(n))
            && self
                .sub_sds
                .iter()
                .all(|n| self.identities.contains_key(n) || self.bundles.contains_key(n))
            && (client != ClientKind::Envoy
                || (!self.identities.is_empty()
                    && self
                        .identities
                        .values()
                        .all(|c| c.has_key && c.not_after > now_unix)))
    }

    /// Whether any held load assignment contains `endpoint`.
    pub(crate) fn has_endpoint(&self, endpoint: &(String, u32)) -> bool {
        self.endpoints.values().any(|eps| eps.contains(endpoint))
    }
}

fn diff(current: &BTreeSet<String>, needed: &BTreeSet<String>) -> SubscriptionChange {
    SubscriptionChange {
        subscribe: needed.difference(current).cloned().collect(),
        unsubscribe: current.difference(needed).cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
    };
    use envoy_types::pb::envoy::config::core::v3::{
        Address, SocketAddress, TransportSocket, address, socket_address::PortSpecifier,
        transport_socket::ConfigType,
    };
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints,
        lb_endpoint::HostIdentifier,
    };
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CommonTlsContext, SdsSecretConfig, UpstreamTlsContext,
        common_tls_context::ValidationContextType,
    };
    use envoy_types::pb::envoy::service::discovery::v3::Resource;
    use envoy_types::pb::google::protobuf::Any;
    use envoy_types::util::pack_any;

    use super::*;

    fn response(type_url: &str, resources: Vec<(&str, Any)>) -> DeltaDiscoveryResponse {
        DeltaDiscoveryResponse {
            type_url: type_url.to_owned(),
            nonce: "1".to_owned(),
            resources: resources
                .into_iter()
                .map(|(name, any)| Resource {
                    name: name.to_owned(),
                    version: "v1".to_owned(),
                    resource: Some(any),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn sds(name: &str) -> SdsSecretConfig {
        SdsSecretConfig {
            name: name.to_owned(),
            sds_config: None,
        }
    }

    fn eds_cluster() -> Any {
        let tls = UpstreamTlsContext {
            common_tls_context: Some(CommonTlsContext {
                tls_certificate_sds_secret_configs: vec![sds("identity_cert:app")],
                validation_context_type: Some(
                    ValidationContextType::ValidationContextSdsSecretConfig(sds("mesh_ca:bench")),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        pack_any(Cluster {
            name: "backend".to_owned(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig::default()),
            transport_socket: Some(TransportSocket {
                name: "envoy.transport_sockets.tls".to_owned(),
                config_type: Some(ConfigType::TypedConfig(pack_any(tls))),
            }),
            ..Default::default()
        })
    }

    fn assignment(port: u32) -> Any {
        let address = Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: "10.255.0.1".to_owned(),
                port_specifier: Some(PortSpecifier::PortValue(port)),
                ..Default::default()
            })),
        };
        pack_any(ClusterLoadAssignment {
            cluster_name: "backend".to_owned(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
                        address: Some(address),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    #[test]
    fn clusters_drive_eds_and_sds_subscriptions_like_envoy() {
        let mut s = ProxyState::default();
        s.apply(&response(
            resources::CLUSTER,
            vec![("backend", eds_cluster())],
        ))
        .expect("cluster applies");
        let eds = s.eds_change();
        assert_eq!(eds.subscribe, vec!["backend".to_owned()]);
        let sds = s.sds_change(ClientKind::Envoy);
        assert_eq!(
            sds.subscribe,
            vec!["identity_cert:app".to_owned(), "mesh_ca:bench".to_owned()]
        );
        assert_eq!(
            s.eds_change(),
            SubscriptionChange::default(),
            "no change twice"
        );

        let mut proxy = ProxyState::default();
        proxy
            .apply(&response(
                resources::CLUSTER,
                vec![("backend", eds_cluster())],
            ))
            .expect("cluster applies");
        let sds = proxy.sds_change(ClientKind::MeshlinkProxy);
        assert_eq!(
            sds.subscribe,
            vec!["mesh_ca:bench".to_owned()],
            "no key over SDS"
        );
    }

    #[test]
    fn endpoints_are_tracked_and_versions_kept_for_resume() {
        let mut s = ProxyState::default();
        s.apply(&response(
            resources::CLUSTER,
            vec![("backend", eds_cluster())],
        ))
        .expect("cluster");
        s.eds_change();
        let stats = s
            .apply(&response(
                resources::ENDPOINTS,
                vec![("backend", assignment(9001))],
            ))
            .expect("assignment");
        assert_eq!(stats.unsolicited, 0);
        assert!(s.has_endpoint(&("10.255.0.1".to_owned(), 9001)));
        assert!(!s.has_endpoint(&("10.255.0.1".to_owned(), 9002)));
        assert_eq!(
            s.versions_of(resources::ENDPOINTS)
                .get("backend")
                .map(String::as_str),
            Some("v1")
        );
        let again = s
            .apply(&response(
                resources::ENDPOINTS,
                vec![("backend", assignment(9001))],
            ))
            .expect("assignment");
        assert_eq!(again.unchanged, 1, "same version pushed again is counted");
    }

    #[test]
    fn a_response_that_does_not_decode_is_rejected_whole() {
        let mut s = ProxyState::default();
        let err = s
            .apply(&response(
                resources::CLUSTER,
                vec![("backend", eds_cluster()), ("bad", assignment(1))],
            ))
            .expect_err("a load assignment is not a cluster");
        assert!(err.contains("\"bad\""), "{err}");
        assert!(
            s.versions_of(resources::CLUSTER).is_empty(),
            "nothing applied"
        );
    }
}
