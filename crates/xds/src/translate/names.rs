//! Stable names of generated xDS resources and SPIFFE identities.
//!
//! Owns every name the translator emits, so the control plane, the proxies
//! and the tests agree on them. It must never depend on input order or on
//! anything but its arguments: names are part of the version hash.

/// Name of the inbound Listener on `address:port`.
pub fn inbound_listener(address: &str, port: u16) -> String {
    format!("inbound:{address}:{port}")
}

/// Name of the outbound Listener on `address:port`.
pub fn outbound_listener(address: &str, port: u16) -> String {
    format!("outbound:{address}:{port}")
}

/// Name of the local (STATIC) cluster that forwards an inbound to the
/// application on `service_port`.
pub fn inbound_cluster(service: &str, service_port: u16) -> String {
    format!("inbound:{service}:{service_port}")
}

/// Name of the Cluster (and ClusterLoadAssignment) of a destination
/// service. Proxyless gRPC uses the same name (`xds:///<service>`).
pub fn service_cluster(service: &str) -> String {
    service.to_owned()
}

/// Name of the Cluster without endpoints where a MeshTCPRoute without a
/// reachable backend sends the connections of outbound `listener` (so
/// they are closed at once).
pub fn no_backend_cluster(listener: &str) -> String {
    format!("no-backend:{listener}")
}

/// Name of the Cluster (and ClusterLoadAssignment) of the inbounds of
/// `service` that carry `tags` too (a `MeshServiceSubset` backend), e.g.
/// `backend[version=v1]`.
pub fn subset_cluster(service: &str, tags: &meshlink_api::spec::Tags) -> String {
    let tags: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}[{}]", service_cluster(service), tags.join(","))
}

/// Name of the Cluster (and ClusterLoadAssignment) of port `port` of
/// MeshService `name` (Kuma's `<name>_msvc_<port>`).
pub fn mesh_service_cluster(name: &str, port: u16) -> String {
    format!("{}_msvc_{port}", name.replace('.', "_"))
}

/// Name of the API listener a proxyless gRPC client dials for port `port`
/// of MeshService `name`: `xds:///<name>:<port>`.
pub fn mesh_service_grpc_listener(name: &str, port: u16) -> String {
    format!("{name}:{port}")
}

/// Name of the (STATIC, plain TCP) cluster of a Dataplane outbound to a
/// routing key of the multi-site network: this site's router Listeners.
pub fn network_cluster(routing_key: &str) -> String {
    format!("network:{routing_key}")
}

/// The TLS server name (SNI) a sidecar sends to its site router's mesh
/// ingress for `routing_key`: a DNS-safe name, since a key may contain
/// `/`, `:` and `_` (`k-<16 hex digits of SHA-256(key)>.network.meshlink`).
pub fn network_sni(routing_key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(routing_key.as_bytes());
    format!("k-{}.network.meshlink", hex::encode(&digest[..8]))
}

/// The SPIFFE ID of site `site`'s router in trust domain `trust_domain`:
/// a form no Dataplane service has (`meshlink.dev/router/<site>`).
pub fn router_spiffe_id(trust_domain: &str, site: &str) -> String {
    format!("spiffe://{trust_domain}/meshlink.dev/router/{site}")
}

/// Base name of the router's SDS Secrets for its mesh ingress of `mesh`
/// (`tls:` certificate and key, `ca:` trust bundle).
pub fn router_mesh_credentials(mesh: &str) -> String {
    format!("mesh-ingress.{mesh}")
}

/// Name of the SDS secret holding this proxy's identity certificate and key.
pub fn identity_secret(service: &str) -> String {
    format!("identity_cert:{service}")
}

/// Name of the SDS secret holding the mesh's trust bundle.
pub fn mesh_ca_secret(mesh: &str) -> String {
    format!("mesh_ca:{mesh}")
}

/// Certificate-provider plugin instance used by proxyless gRPC clients.
pub const GRPC_CERT_PROVIDER_INSTANCE: &str = "meshlink";

/// Certificate name (within [`GRPC_CERT_PROVIDER_INSTANCE`]) of the
/// workload identity.
pub const GRPC_IDENTITY_CERT_NAME: &str = "identity";

/// Certificate name (within [`GRPC_CERT_PROVIDER_INSTANCE`]) of the trust
/// bundle.
pub const GRPC_ROOT_CERT_NAME: &str = "mesh_ca";

/// The SPIFFE ID of `service` in trust domain `trust_domain`.
pub fn spiffe_id(trust_domain: &str, service: &str) -> String {
    format!("spiffe://{trust_domain}/{service}")
}

/// The SPIFFE ID a client requires of MeshService `name`'s backends when
/// the MeshService has no identity (it does not exist, selects nothing or
/// lists none): a valid ID the control plane never issues, since no
/// Dataplane name or service tag has this form.
pub fn no_identity(trust_domain: &str, name: &str) -> String {
    format!("spiffe://{trust_domain}/meshlink.dev/no-identity/{name}")
}

/// The prefix shared by every SPIFFE ID of `trust_domain`.
pub fn spiffe_prefix(trust_domain: &str) -> String {
    format!("spiffe://{trust_domain}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spiffe_id_extends_the_trust_domain_prefix() {
        let id = spiffe_id("example.org", "web");
        assert_eq!(id, "spiffe://example.org/web");
        assert!(id.starts_with(&spiffe_prefix("example.org")));
    }

    #[test]
    fn a_network_sni_is_one_dns_name_per_key() {
        let a = network_sni("db/primary:5432_x");
        assert!(
            a.starts_with("k-") && a.ends_with(".network.meshlink"),
            "{a}"
        );
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        );
        assert_eq!(a.split('.').next().map(str::len), Some(18));
        assert_ne!(a, network_sni("db/primary:5432_y"));
        assert_eq!(a, network_sni("db/primary:5432_x"));
    }
}
