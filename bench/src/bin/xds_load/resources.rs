//! Decoding of the Envoy resources a proxy receives, reduced to what the
//! load generator needs: which EDS and SDS names a Cluster or Listener
//! references (so it can subscribe like Envoy does), the endpoints of a
//! ClusterLoadAssignment, and the certificates inside a Secret.
//!
//! It never validates configuration beyond decoding: a resource that does
//! not decode is reported as an error, which the caller turns into a NACK.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, TransportSocket, address, data_source::Specifier, socket_address::PortSpecifier,
    transport_socket::ConfigType,
};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, Secret, UpstreamTlsContext,
    common_tls_context::ValidationContextType, secret,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

/// Type URL of Clusters (CDS).
pub(crate) use meshlink_proto::types::CLUSTER_TYPE as CLUSTER;
/// Type URL of ClusterLoadAssignments (EDS).
pub(crate) use meshlink_proto::types::ENDPOINT_TYPE as ENDPOINTS;
/// Type URL of Listeners (LDS).
pub(crate) use meshlink_proto::types::LISTENER_TYPE as LISTENER;
/// Type URL of SDS Secrets.
pub(crate) use meshlink_proto::types::SECRET_TYPE as SECRET;

const UPSTREAM_TLS: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
const DOWNSTREAM_TLS: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";

/// SDS secrets referenced by a TLS context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretRefs {
    /// Secrets holding a certificate and key (`tls_certificate_sds_secret_configs`).
    pub(crate) identities: Vec<String>,
    /// Secrets holding a validation context (trust bundle).
    pub(crate) bundles: Vec<String>,
}

impl SecretRefs {
    fn add_common(&mut self, ctx: &CommonTlsContext) {
        for sds in &ctx.tls_certificate_sds_secret_configs {
            self.identities.push(sds.name.clone());
        }
        match &ctx.validation_context_type {
            Some(ValidationContextType::ValidationContextSdsSecretConfig(sds)) => {
                self.bundles.push(sds.name.clone());
            }
            Some(ValidationContextType::CombinedValidationContext(c)) => {
                if let Some(sds) = &c.validation_context_sds_secret_config {
                    self.bundles.push(sds.name.clone());
                }
            }
            _ => {}
        }
    }

    fn add_transport(&mut self, ts: Option<&TransportSocket>) -> Result<(), String> {
        let Some(ConfigType::TypedConfig(any)) = ts.and_then(|t| t.config_type.as_ref()) else {
            return Ok(());
        };
        match any.type_url.as_str() {
            UPSTREAM_TLS => {
                let ctx = UpstreamTlsContext::decode(any.value.as_slice())
                    .map_err(|e| format!("UpstreamTlsContext: {e}"))?;
                if let Some(c) = &ctx.common_tls_context {
                    self.add_common(c);
                }
            }
            DOWNSTREAM_TLS => {
                let ctx = DownstreamTlsContext::decode(any.value.as_slice())
                    .map_err(|e| format!("DownstreamTlsContext: {e}"))?;
                if let Some(c) = &ctx.common_tls_context {
                    self.add_common(c);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// What a Cluster makes an Envoy subscribe to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClusterRefs {
    /// The EDS resource name, for an EDS cluster.
    pub(crate) eds: Option<String>,
    /// Secrets of its transport socket.
    pub(crate) secrets: SecretRefs,
}

fn unpack<M: Message + Default>(any: &Any, expected: &str) -> Result<M, String> {
    if any.type_url != expected {
        return Err(format!(
            "resource has type {}, expected {expected}",
            any.type_url
        ));
    }
    M::decode(any.value.as_slice()).map_err(|e| format!("cannot decode {expected}: {e}"))
}

/// Decodes a Cluster and returns the names it references.
pub(crate) fn cluster_refs(any: &Any) -> Result<ClusterRefs, String> {
    let c: Cluster = unpack(any, CLUSTER)?;
    let mut refs = ClusterRefs::default();
    if c.cluster_discovery_type == Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)) {
        let service = c
            .eds_cluster_config
            .as_ref()
            .map(|e| e.service_name.clone())
            .unwrap_or_default();
        refs.eds = Some(if service.is_empty() { c.name } else { service });
    }
    refs.secrets.add_transport(c.transport_socket.as_ref())?;
    Ok(refs)
}

/// Decodes a Listener and returns the secrets its filter chains reference.
pub(crate) fn listener_refs(any: &Any) -> Result<SecretRefs, String> {
    let l: Listener = unpack(any, LISTENER)?;
    let mut refs = SecretRefs::default();
    for chain in l
        .filter_chains
        .iter()
        .chain(l.default_filter_chain.as_ref())
    {
        refs.add_transport(chain.transport_socket.as_ref())?;
    }
    Ok(refs)
}

/// Decodes a ClusterLoadAssignment into its `(address, port)` endpoints.
pub(crate) fn endpoints(any: &Any) -> Result<Vec<(String, u32)>, String> {
    let cla: ClusterLoadAssignment = unpack(any, ENDPOINTS)?;
    let mut out = Vec::new();
    for locality in &cla.endpoints {
        for lb in &locality.lb_endpoints {
            let Some(HostIdentifier::Endpoint(ep)) = &lb.host_identifier else {
                continue;
            };
            let Some(address::Address::SocketAddress(sa)) =
                ep.address.as_ref().and_then(|a| a.address.as_ref())
            else {
                continue;
            };
            let port = match sa.port_specifier {
                Some(PortSpecifier::PortValue(p)) => p,
                _ => 0,
            };
            out.push((sa.address.clone(), port));
        }
    }
    Ok(out)
}

/// The PEM material of a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SecretContent {
    /// A certificate chain (PEM) with a private key.
    Identity {
        /// Certificate chain, PEM.
        chain_pem: Vec<u8>,
        /// Whether a non-empty private key was sent.
        has_key: bool,
    },
    /// A validation context: trusted CA certificates, PEM.
    Bundle {
        /// Trusted CAs, PEM.
        ca_pem: Vec<u8>,
    },
    /// Anything else (not used by meshlink).
    Other,
}

fn data_source_bytes(ds: Option<&DataSource>) -> Vec<u8> {
    match ds.and_then(|d| d.specifier.as_ref()) {
        Some(Specifier::InlineBytes(b)) => b.clone(),
        Some(Specifier::InlineString(s)) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

/// Decodes a Secret.
pub(crate) fn secret(any: &Any) -> Result<SecretContent, String> {
    let s: Secret = unpack(any, SECRET)?;
    Ok(match s.r#type {
        Some(secret::Type::TlsCertificate(tc)) => SecretContent::Identity {
            chain_pem: data_source_bytes(tc.certificate_chain.as_ref()),
            has_key: !data_source_bytes(tc.private_key.as_ref()).is_empty(),
        },
        Some(secret::Type::ValidationContext(vc)) => SecretContent::Bundle {
            ca_pem: data_source_bytes(vc.trusted_ca.as_ref()),
        },
        _ => SecretContent::Other,
    })
}

/// The DER certificates in a PEM buffer, in order.
pub(crate) fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for item in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let item = item.map_err(|e| format!("bad PEM: {e}"))?;
        if item.label == "CERTIFICATE" {
            out.push(item.contents);
        }
    }
    if out.is_empty() {
        return Err("no CERTIFICATE in PEM".to_owned());
    }
    Ok(out)
}
