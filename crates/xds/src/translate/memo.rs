//! Resources shared by every proxy of a mesh, built and encoded once.
//!
//! Owns the memo a caller may keep across translations of one mesh: the
//! load assignment of each destination service, the Cluster of each
//! `(service, identity secret, client shape, protocol)`, and the RBAC principals of
//! each inbound tag set (with the Dataplane name, labels and inbound port
//! when a permission selects by them). Entries are keyed by their inputs within one
//! view; the caller must forget what a view change invalidates
//! ([`Memo::forget_service`], [`Memo::forget_permissions`], [`Memo::clear`]).
//! It must never hold anything specific to one proxy (names with an
//! address, secrets with a key).

use std::collections::HashMap;
use std::sync::Arc;

use super::protocol::Protocol;
use super::rbac::{RbacKey, RbacSources};
use super::snapshot::Versioned;

/// What identifies a destination Cluster besides the mesh.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClusterKey {
    /// Destination service.
    pub(crate) service: String,
    /// The SDS identity secret a sidecar presents (`None`: plaintext or gRPC).
    pub(crate) identity: Option<String>,
    /// Proxyless gRPC shape (certificate providers instead of SDS).
    pub(crate) grpc: bool,
    /// The destination's protocol: an HTTP one's Cluster speaks HTTP/2
    /// (ALPN `h2`), so a tcp and an http view never share an encoding.
    pub(crate) protocol: Protocol,
    /// MeshTimeout's `connectionTimeout` (seconds, nanos); `None`: the
    /// default.
    pub(crate) connect_timeout: Option<(i64, i32)>,
    /// MeshCircuitBreaker's conf as canonical JSON; `None`: none applies.
    pub(crate) circuit_breaker: Option<String>,
    /// MeshLoadBalancingStrategy's conf, as JSON (`None`: none applies).
    pub(crate) load_balancing: Option<String>,
    /// MeshHealthCheck's conf, as JSON (`None`: none applies).
    pub(crate) health_check: Option<String>,
}

/// Shared, encoded resources of one mesh view (see the module doc).
#[derive(Debug, Default)]
pub struct Memo {
    assignments: HashMap<String, Arc<Versioned>>,
    /// `kuma.io/service` → subset cluster → its load assignment.
    subset_assignments: HashMap<String, HashMap<String, Arc<Versioned>>>,
    clusters: HashMap<ClusterKey, Arc<Versioned>>,
    rbac: HashMap<RbacKey, Arc<RbacSources>>,
}

// === impl Memo ===

impl Memo {
    /// Forgets what depends on the endpoints of `service` (its subsets'
    /// load assignments included).
    pub fn forget_service(&mut self, service: &str) {
        self.assignments.remove(service);
        self.subset_assignments.remove(service);
    }

    /// Forgets the load assignment and Clusters of destination `name`
    /// (a MeshService port: its endpoints and accepted identities).
    pub fn forget_destination(&mut self, name: &str) {
        self.assignments.remove(name);
        self.clusters.retain(|k, _| k.service != name);
    }

    /// Forgets what depends on MeshTrafficPermissions (or on the services
    /// a `MeshSubset` source selects).
    pub fn forget_permissions(&mut self) {
        self.rbac.clear();
    }

    /// Forgets everything (the Mesh spec changed, or the view was rebuilt).
    pub fn clear(&mut self) {
        self.assignments.clear();
        self.subset_assignments.clear();
        self.clusters.clear();
        self.rbac.clear();
    }

    /// Number of memoized resources.
    pub fn len(&self) -> usize {
        let subsets: usize = self.subset_assignments.values().map(HashMap::len).sum();
        self.assignments.len() + subsets + self.clusters.len() + self.rbac.len()
    }

    /// Whether nothing is memoized.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn assignment(
        &mut self,
        service: &str,
        build: impl FnOnce() -> Versioned,
    ) -> Arc<Versioned> {
        if let Some(r) = self.assignments.get(service) {
            return r.clone();
        }
        let r = Arc::new(build());
        self.assignments.insert(service.to_owned(), r.clone());
        r
    }

    pub(crate) fn subset_assignment(
        &mut self,
        service: &str,
        cluster: String,
        build: impl FnOnce() -> Versioned,
    ) -> Arc<Versioned> {
        self.subset_assignments
            .entry(service.to_owned())
            .or_default()
            .entry(cluster)
            .or_insert_with(|| Arc::new(build()))
            .clone()
    }

    pub(crate) fn cluster(
        &mut self,
        key: ClusterKey,
        build: impl FnOnce() -> Versioned,
    ) -> Arc<Versioned> {
        self.clusters
            .entry(key)
            .or_insert_with(|| Arc::new(build()))
            .clone()
    }

    pub(crate) fn rbac(
        &mut self,
        key: RbacKey,
        build: impl FnOnce() -> RbacSources,
    ) -> Arc<RbacSources> {
        self.rbac
            .entry(key)
            .or_insert_with(|| Arc::new(build()))
            .clone()
    }
}
