//! The pure xDS translator: `(proxy, view of the mesh) -> Snapshot`.
//!
//! Owns how meshlink resources (Mesh, Dataplane, MeshTrafficPermission,
//! MeshService, and the L7 policies MeshHTTPRoute, MeshTimeout, MeshRetry) become Envoy
//! v3 resources for one proxy: sidecar proxies (meshlink-proxy and Envoy)
//! get inbound/outbound listeners with RBAC and SDS-backed TLS (TCP, or
//! HTTP with RDS routes for services that declare an HTTP protocol);
//! proxyless gRPC clients get API listeners and certificate-provider TLS.
//!
//! It must never do I/O, read a clock, or depend on input order: the same
//! input gives byte-identical output, so versions are content hashes and
//! "nothing changed" means "same versions". Secret *contents* are whatever
//! the caller passes in [`SecretsInput`]; this module never creates keys.

mod access_log;
mod circuit_breaker;
mod endpoints;
mod fault;
mod grpc;
mod health_check;
mod http;
mod load_balancing;
mod memo;
mod mesh_service;
mod metric;
pub mod names;
mod network;
mod policies;
pub mod protocol;
mod rate_limit;
mod rbac;
mod resources;
mod retry;
mod route_match;
mod routes;
mod sidecar;
mod snapshot;
mod tls;
mod trace;
mod transparent;
mod view;

use std::sync::Arc;

pub use memo::Memo;
pub use mesh_service::{mesh_service_outbounds, selected_dataplanes};
pub(crate) use policies::kept as keeps_policy;
pub(crate) use protocol::{Protocol, declared as declared_protocols};
pub use rbac::uses_subset_sources;
pub(crate) use routes::{Backend, route_backends, routes_to_subsets_of};
pub(crate) use snapshot::type_index;
pub use snapshot::{
    CLUSTER_TYPE, CONNECTOR_TYPE, ENDPOINT_TYPE, LINK_TYPE, LISTENER_TYPE, MESH_INGRESS_TYPE,
    ROUTE_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE, Resources, SECRET_TYPE, SITE_TYPE,
    SetInterner, Snapshot, TYPE_ORDER, TypeSet, Versioned,
};
pub(crate) use transparent::transparent_destinations;
pub use transparent::{
    INBOUND_PASSTHROUGH, INBOUND_PASSTHROUGH_V6, OUTBOUND_PASSTHROUGH, OUTBOUND_PASSTHROUGH_V6,
    PASSTHROUGH_DISABLED, SERVICE_VIP_PORT,
};
pub use view::{
    MeshView, NetworkListeners, RouterIngress, ViewDataplane, effective_health,
    endpoint_contributions,
};

pub use meshlink_proto::client_kind::{CLIENT_METADATA_KEY, ClientKind, UnknownClientKind};

/// Secret contents the control plane has for this proxy, at send time.
/// Secrets are emitted only for what is given here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsInput {
    /// Identity certificate chain and private key (PEM), for clients that
    /// take their key over SDS (Envoy).
    pub identity: Option<(String, String)>,
    /// The mesh's trust bundle (PEM, possibly several roots).
    pub trust_bundle_pem: Option<String>,
    /// Whether to send the mesh's identity policy Secret (the current
    /// certificate lifetime; `meshlink_proto::identity_policy`): for
    /// meshlink-proxy clients whose node lists its client feature.
    pub identity_policy: bool,
}

/// The proxy being translated for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyContext {
    /// Mesh name (first part of `node.id`).
    pub mesh: String,
    /// Dataplane name (second part of `node.id`).
    pub name: String,
    /// Client kind, from `node.metadata["meshlink.dev/client"]`.
    pub client: ClientKind,
    /// Secret contents to emit (see [`SecretsInput`]).
    pub secrets: SecretsInput,
}

/// Secret resources encoded ahead of translation, so a caller that keeps
/// them (per issued certificate, per trust bundle) hashes and encodes each
/// once instead of once per translation.
#[derive(Debug, Clone, Default)]
pub struct EncodedSecrets {
    /// The identity secret, as [`EncodedSecrets::identity`] builds it.
    pub identity: Option<(String, Arc<Versioned>)>,
    /// The trust-bundle secret, as [`EncodedSecrets::trust_bundle`] builds it.
    pub trust_bundle: Option<(String, Arc<Versioned>)>,
    /// The identity policy secret, as [`EncodedSecrets::identity_policy`]
    /// builds it.
    pub identity_policy: Option<(String, Arc<Versioned>)>,
}

// === impl EncodedSecrets ===

impl EncodedSecrets {
    /// The identity secret of `service` (chain and key, PEM), named as
    /// [`names::identity_secret`].
    pub fn identity(service: &str, chain_pem: &str, key_pem: &str) -> (String, Arc<Versioned>) {
        let name = names::identity_secret(service);
        let secret = tls::identity_secret(name.clone(), chain_pem, key_pem);
        (name, Arc::new(Versioned::encode(&secret)))
    }

    /// The trust-bundle secret of `mesh`, named as [`names::mesh_ca_secret`].
    pub fn trust_bundle(mesh: &str, bundle_pem: &str) -> (String, Arc<Versioned>) {
        let secret = tls::trust_bundle_secret(mesh, bundle_pem);
        (
            names::mesh_ca_secret(mesh),
            Arc::new(Versioned::encode(&secret)),
        )
    }

    /// The identity policy secret of `mesh`, whose workload certificates
    /// live `lifetime` (named as
    /// [`meshlink_proto::identity_policy::secret_name`]).
    pub fn identity_policy(mesh: &str, lifetime: std::time::Duration) -> (String, Arc<Versioned>) {
        let secret = meshlink_proto::identity_policy::to_secret(mesh, lifetime);
        (secret.name.clone(), Arc::new(Versioned::encode(&secret)))
    }
}

/// The load assignment of destination `service` (named
/// [`names::service_cluster`]), built and encoded once per `memo` entry.
/// The hub uses it to patch a proxy whose only change is that service's
/// endpoints, without translating the proxy again.
pub(crate) fn service_load_assignment(
    view: &MeshView,
    memo: &mut Memo,
    service: &str,
) -> Arc<Versioned> {
    memo.assignment(service, || {
        Versioned::encode(&endpoints::service_assignment(view, service))
    })
}

/// The (memoized) load assignment of the `MeshServiceSubset` backend
/// `service` with `tags`.
pub(crate) fn subset_load_assignment(
    view: &MeshView,
    memo: &mut Memo,
    service: &str,
    tags: &meshlink_api::spec::Tags,
) -> Arc<Versioned> {
    memo.subset_assignment(service, names::subset_cluster(service, tags), || {
        Versioned::encode(&endpoints::subset_assignment(view, service, tags))
    })
}

/// Translates the mesh into the resources of one proxy.
///
/// A proxy whose Dataplane is not in the view gets an empty snapshot (all
/// of its resources are removed). Pure: no I/O, no clock.
pub fn translate(proxy: &ProxyContext, view: &MeshView) -> Snapshot {
    translate_shared(
        proxy,
        view,
        &mut Memo::default(),
        &EncodedSecrets::default(),
    )
}

/// [`translate`], sharing what every proxy of the mesh can use through
/// `memo` (which must belong to this `view`), and adding the pre-encoded
/// `encoded` secrets (sidecars with mTLS on) besides those of
/// `proxy.secrets`. The output equals [`translate`]'s for the same inputs.
pub fn translate_shared(
    proxy: &ProxyContext,
    view: &MeshView,
    memo: &mut Memo,
    encoded: &EncodedSecrets,
) -> Snapshot {
    let mut snap = Snapshot::new();
    let Some(dp) = view.dataplane(&proxy.name) else {
        return snap;
    };
    match proxy.client {
        ClientKind::Grpc => grpc::build(&mut snap, view, &proxy.name, dp, memo),
        ClientKind::Envoy | ClientKind::MeshlinkProxy => {
            if view.mtls_enabled() {
                let own = tls::identity_secret_name(dp, &proxy.name);
                if let Some((name, secret)) = &encoded.identity
                    && own.as_ref() == Some(name)
                {
                    snap.insert_shared(name.clone(), secret.clone());
                }
                if let Some((name, secret)) = &encoded.trust_bundle {
                    snap.insert_shared(name.clone(), secret.clone());
                }
                if let Some((name, secret)) = &encoded.identity_policy {
                    snap.insert_shared(name.clone(), secret.clone());
                }
                tls::secrets(&mut snap, view, dp, &proxy.name, &proxy.secrets);
            }
            let meshlink_proxy = proxy.client == ClientKind::MeshlinkProxy;
            sidecar::build(&mut snap, view, &proxy.name, dp, meshlink_proxy, memo);
        }
    }
    snap
}
