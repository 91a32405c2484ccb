//! The pure xDS translator: `(proxy, view of the mesh) -> Snapshot`.
//!
//! Owns how meshlink resources (Mesh, Dataplane, MeshTrafficPermission)
//! become Envoy v3 resources for one proxy: sidecar proxies (meshlink-proxy
//! and Envoy) get inbound/outbound listeners with RBAC and SDS-backed TLS;
//! proxyless gRPC clients get API listeners and certificate-provider TLS.
//!
//! It must never do I/O, read a clock, or depend on input order: the same
//! input gives byte-identical output, so versions are content hashes and
//! "nothing changed" means "same versions". Secret *contents* are whatever
//! the caller passes in [`SecretsInput`]; this module never creates keys.

mod endpoints;
mod grpc;
pub mod names;
mod rbac;
mod sidecar;
mod snapshot;
mod tls;

use std::collections::{BTreeSet, HashMap};

use envoy_types::pb::google::protobuf::{Struct, value::Kind as ValueKind};
use meshlink_api::Resource;
use meshlink_api::spec::{DataplaneSpec, MeshSpec};

pub use snapshot::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE, Snapshot, TYPE_ORDER,
    Versioned,
};

/// Node metadata key that selects the [`ClientKind`].
pub const CLIENT_METADATA_KEY: &str = "meshlink.dev/client";

/// Which kind of xDS client a proxy is; selects how TLS material is
/// delivered and which resource shapes it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    /// `meshlink-proxy`: CSR for its own key, SDS for the trust bundle.
    MeshlinkProxy,
    /// `envoy` (the default): SDS secrets including the key.
    #[default]
    Envoy,
    /// `grpc`: proxyless gRPC, certificate-provider instances.
    Grpc,
}

/// A `meshlink.dev/client` node metadata value that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node.metadata[\"meshlink.dev/client\"] is {given:?}; expected \"meshlink-proxy\", \
     \"envoy\" or \"grpc\" (or leave it unset for envoy)"
)]
pub struct UnknownClientKind {
    /// The value as given.
    pub given: String,
}

// === impl ClientKind ===

impl ClientKind {
    /// Parses the metadata value; `None` (absent) means [`ClientKind::Envoy`].
    pub fn from_metadata_value(value: Option<&str>) -> Result<Self, UnknownClientKind> {
        match value {
            None | Some("envoy") => Ok(Self::Envoy),
            Some("meshlink-proxy") => Ok(Self::MeshlinkProxy),
            Some("grpc") => Ok(Self::Grpc),
            Some(other) => Err(UnknownClientKind {
                given: other.to_owned(),
            }),
        }
    }

    /// Reads [`CLIENT_METADATA_KEY`] from an xDS `node.metadata`. A
    /// non-string value is reported as unknown.
    pub fn from_node_metadata(metadata: Option<&Struct>) -> Result<Self, UnknownClientKind> {
        let value = metadata.and_then(|m| m.fields.get(CLIENT_METADATA_KEY));
        match value.and_then(|v| v.kind.as_ref()) {
            None => Self::from_metadata_value(None),
            Some(ValueKind::StringValue(s)) => Self::from_metadata_value(Some(s)),
            Some(other) => Err(UnknownClientKind {
                given: format!("{other:?}"),
            }),
        }
    }

    /// The metadata value naming this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MeshlinkProxy => "meshlink-proxy",
            Self::Envoy => "envoy",
            Self::Grpc => "grpc",
        }
    }
}

/// Secret contents the control plane has for this proxy, at send time.
/// Secrets are emitted only for what is given here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsInput {
    /// Identity certificate chain and private key (PEM), for clients that
    /// take their key over SDS (Envoy).
    pub identity: Option<(String, String)>,
    /// The mesh's trust bundle (PEM, possibly several roots).
    pub trust_bundle_pem: Option<String>,
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

/// What the translator sees of one mesh; the control plane fills it from
/// the store. Order of the input vectors does not matter.
///
/// Built once per change and shared by every proxy of the mesh, so it
/// indexes what translation looks up per proxy: dataplanes by name and
/// endpoints by service (both would otherwise be linear scans, making a
/// mesh-wide recompute quadratic).
#[derive(Debug, Clone)]
pub struct MeshView {
    mesh: Resource,
    dataplanes: Vec<Resource>,
    permissions: Vec<Resource>,
    by_name: HashMap<String, usize>,
    endpoints: HashMap<String, BTreeSet<(String, u16)>>,
}

// === impl MeshView ===

impl MeshView {
    /// Builds the view of `mesh` from its Dataplanes and
    /// MeshTrafficPermissions (resources of other kinds are ignored).
    pub fn new(mesh: Resource, dataplanes: Vec<Resource>, permissions: Vec<Resource>) -> Self {
        let mut by_name = HashMap::with_capacity(dataplanes.len());
        let mut endpoints: HashMap<String, BTreeSet<(String, u16)>> = HashMap::new();
        for (i, r) in dataplanes.iter().enumerate() {
            let Some(dp) = r.spec.as_dataplane() else {
                continue;
            };
            by_name.insert(r.name().to_owned(), i);
            for inbound in &dp.networking.inbound {
                if let Some(service) = inbound.service() {
                    endpoints
                        .entry(service.to_owned())
                        .or_default()
                        .insert((dp.networking.address.clone(), inbound.port.get()));
                }
            }
        }
        Self {
            mesh,
            dataplanes,
            permissions,
            by_name,
            endpoints,
        }
    }

    /// The same view with its MeshTrafficPermissions replaced.
    pub fn with_permissions(mut self, permissions: Vec<Resource>) -> Self {
        self.permissions = permissions;
        self
    }

    /// The Mesh resource.
    pub fn mesh(&self) -> &Resource {
        &self.mesh
    }

    /// Every Dataplane of the mesh, in input order.
    pub fn dataplanes(&self) -> &[Resource] {
        &self.dataplanes
    }

    /// Every MeshTrafficPermission of the mesh.
    pub fn permissions(&self) -> &[Resource] {
        &self.permissions
    }

    /// The mesh name.
    pub fn mesh_name(&self) -> &str {
        self.mesh.name()
    }

    fn mesh_spec(&self) -> Option<&MeshSpec> {
        self.mesh.spec.as_mesh()
    }

    /// The trust domain of the mesh (default: the mesh name).
    pub fn trust_domain(&self) -> &str {
        match self.mesh_spec() {
            Some(m) => m.trust_domain(self.mesh.name()),
            None => self.mesh.name(),
        }
    }

    /// Whether mTLS is on (an enabled CA backend exists).
    pub fn mtls_enabled(&self) -> bool {
        self.mesh_spec()
            .and_then(MeshSpec::enabled_backend)
            .is_some()
    }

    /// The Dataplane named `name`.
    pub fn dataplane(&self, name: &str) -> Option<&DataplaneSpec> {
        let i = *self.by_name.get(name)?;
        self.dataplanes[i].spec.as_dataplane()
    }

    /// Number of Dataplanes in the view.
    pub fn dataplane_count(&self) -> usize {
        self.by_name.len()
    }

    /// `(address, port)` of every inbound tagged with `service`, sorted.
    pub(crate) fn endpoints_of(&self, service: &str) -> impl Iterator<Item = &(String, u16)> {
        self.endpoints.get(service).into_iter().flatten()
    }

    /// Every Dataplane's name and spec.
    fn dataplane_specs(&self) -> impl Iterator<Item = (&str, &DataplaneSpec)> {
        self.dataplanes
            .iter()
            .filter_map(|r| Some((r.name(), r.spec.as_dataplane()?)))
    }
}

/// Translates the mesh into the resources of one proxy.
///
/// A proxy whose Dataplane is not in the view gets an empty snapshot (all
/// of its resources are removed). Pure: no I/O, no clock.
pub fn translate(proxy: &ProxyContext, view: &MeshView) -> Snapshot {
    let mut snap = Snapshot::new();
    let Some(dp) = view.dataplane(&proxy.name) else {
        return snap;
    };
    match proxy.client {
        ClientKind::Grpc => grpc::build(&mut snap, view, dp),
        ClientKind::Envoy | ClientKind::MeshlinkProxy => {
            if view.mtls_enabled() {
                tls::secrets(&mut snap, view, dp, &proxy.secrets);
            }
            sidecar::build(&mut snap, view, dp);
        }
    }
    snap
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Value;

    use super::*;

    #[test]
    fn client_kind_defaults_to_envoy_and_rejects_unknown_values() {
        assert_eq!(ClientKind::from_node_metadata(None), Ok(ClientKind::Envoy));
        let md = |v: &str| Struct {
            fields: HashMap::from([(
                CLIENT_METADATA_KEY.to_owned(),
                Value {
                    kind: Some(ValueKind::StringValue(v.to_owned())),
                },
            )]),
        };
        for kind in [
            ClientKind::Grpc,
            ClientKind::MeshlinkProxy,
            ClientKind::Envoy,
        ] {
            assert_eq!(
                ClientKind::from_node_metadata(Some(&md(kind.as_str()))),
                Ok(kind)
            );
        }
        let err = ClientKind::from_node_metadata(Some(&md("istio"))).unwrap_err();
        assert!(err.to_string().contains("\"istio\""), "{err}");
    }
}
