//! meshlink-proto: what both ends of meshlink's protocols share.
//!
//! The control plane (`meshlink-xds`, `meshlink-cp`) and the data plane
//! (`meshlink-proxy`) both depend on this crate, and the proxy depends on
//! nothing of the control plane's. It owns protocol *facts* only:
//! - [`certify`]: meshlink's generated protos (Certify, the router's
//!   resources, RouterStatus, DataplaneHealth);
//! - [`types`]: every xDS type URL either end names, and the
//!   make-before-break order (I2);
//! - [`node`]: the `node.id` grammar (`<mesh>.<dataplane>`, `site.<site>`);
//! - [`client_kind`]: the `meshlink.dev/client` node metadata;
//! - [`instance`]: the `meshlink.dev/instance` node metadata (which
//!   process a proxy is);
//! - [`identity_policy`]: the identity policy Secret (the mesh's current
//!   certificate lifetime) and the client feature that asks for it;
//! - [`metrics_listener`]: the Listener that carries a sidecar's MeshMetric
//!   to meshlink-proxy;
//! - [`dns_listener`]: the sidecar's mesh DNS Listener (Envoy's DNS filter
//!   with the name → VIP table) and the one function that writes it;
//! - [`hints`]: what the control plane tells a client in a status (the
//!   retry-after hint, the drain message).
//!
//! It must never hold behaviour of one end (translation, validation,
//! streams): those stay in their own crates.

/// `meshlink.v1`: the Certify RPC (`proto/meshlink/v1/certify.proto`), the
/// router's resources and the RouterStatus RPC (`router.proto`), and the
/// sidecars' DataplaneHealth RPC (`dataplane_health.proto`), generated.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod certify {
    tonic::include_proto!("meshlink.v1");
}

pub mod client_kind;
pub mod dns_listener;
pub mod hints;
pub mod identity_policy;
pub mod instance;
pub mod metrics_listener;
pub mod node;
pub mod types;

pub use client_kind::{CLIENT_METADATA_KEY, ClientKind, UnknownClientKind};
pub use node::{NodeId, NodeIdError, ROUTER_NODE_PREFIX};
