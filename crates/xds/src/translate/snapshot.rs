//! The translator's output: every xDS resource of one proxy, by type URL.
//!
//! Owns content-hash versioning, so "nothing changed" is "same versions",
//! and the make-before-break order in which types are pushed. It must never
//! hold per-stream state (what was sent or acknowledged): stream owners do.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use sha2::{Digest, Sha256};

pub use meshlink_proto::types::{
    CLUSTER_TYPE, CONNECTOR_TYPE, ENDPOINT_TYPE, LINK_TYPE, LISTENER_TYPE, MESH_INGRESS_TYPE,
    ROUTE_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE, SECRET_TYPE, SITE_TYPE, TYPE_ORDER,
};

/// Hex digits kept from a SHA-256 content hash.
const VERSION_LEN: usize = 16;

/// One resource and the hash of its encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    /// Content hash of `resource.value` (hex, truncated).
    pub version: String,
    /// The encoded resource, ready for a `DiscoveryResponse`.
    pub resource: Any,
}

pub use super::resources::Resources;

/// The resources of one type and, once asked for, their type version.
/// Shared between snapshots (and, through [`SetInterner`], between the
/// proxies whose sets are equal).
#[derive(Debug, Clone, Default)]
pub struct TypeSet {
    resources: Resources,
    /// [`Snapshot::version_of`], computed at most once per set.
    version: OnceLock<String>,
}

/// All resources of one proxy: type URL → name → versioned resource.
///
/// Every type of [`TYPE_ORDER`] is present (possibly empty), so an empty
/// type means "remove everything of this type". Each type's set is shared
/// (an `Arc`): cloning a snapshot is cheap, a snapshot derived from another
/// with [`Snapshot::with_resource`] shares every type it did not touch, and
/// [`Snapshot::shares_type`] lets a stream skip a type that cannot have
/// changed without comparing it.
///
/// The sets sit in a fixed array in [`TYPE_ORDER`], and every empty type
/// points at one process-wide empty set: a proxy's snapshot allocates only
/// the sets it has resources in, and cloning one copies eleven pointers
/// (a map of eleven sets was a node and eleven allocations per proxy).
#[derive(Debug, Clone)]
pub struct Snapshot {
    types: [Arc<TypeSet>; TYPE_ORDER.len()],
}

/// Position of `type_url` in [`TYPE_ORDER`]. Callers mostly pass the
/// constants themselves, which a pointer comparison finds without reading
/// the (long, common-prefixed) URLs.
pub(crate) fn type_index(type_url: &str) -> Option<usize> {
    TYPE_ORDER
        .iter()
        .position(|t| std::ptr::eq(t.as_ptr(), type_url.as_ptr()) && t.len() == type_url.len())
        .or_else(|| TYPE_ORDER.iter().position(|t| *t == type_url))
}

/// The one empty set every snapshot shares for its empty types.
fn empty_set() -> Arc<TypeSet> {
    static EMPTY: OnceLock<Arc<TypeSet>> = OnceLock::new();
    EMPTY.get_or_init(|| Arc::new(TypeSet::default())).clone()
}

// === impl Versioned ===

impl Versioned {
    /// Encodes `msg` and hashes the encoding.
    pub fn encode<M: Message + Name>(msg: &M) -> Versioned {
        let value = msg.encode_to_vec();
        Versioned {
            version: hash_hex(&value),
            resource: Any {
                type_url: M::type_url(),
                value,
            },
        }
    }
}

// === impl Snapshot ===

impl Default for Snapshot {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        TYPE_ORDER
            .iter()
            .all(|t| self.resources(t) == other.resources(t))
    }
}

impl Snapshot {
    /// An empty snapshot (every type present, no resources).
    pub fn new() -> Self {
        Self {
            types: std::array::from_fn(|_| empty_set()),
        }
    }

    /// Adds `msg` under `name`; the type URL comes from the message type.
    /// A second insert under the same name keeps the first (deterministic).
    pub(crate) fn insert<M: Message + Name>(&mut self, name: String, msg: &M) {
        if self.contains(&M::type_url(), &name) {
            return;
        }
        self.insert_shared(name, Arc::new(Versioned::encode(msg)));
    }

    /// Adds an already encoded resource under `name` (its type URL says
    /// where). A second insert under the same name keeps the first.
    pub fn insert_shared(&mut self, name: String, resource: Arc<Versioned>) {
        let Some(set) = self.set_mut(&resource.resource.type_url) else {
            return;
        };
        set.resources.insert_if_absent(name, resource);
    }

    /// This snapshot with `resource` under `name` (replacing what was
    /// there); every other type's set stays shared with `self`.
    pub fn with_resource(&self, name: &str, resource: Arc<Versioned>) -> Snapshot {
        let mut next = self.clone();
        if let Some(set) = next.set_mut(&resource.resource.type_url) {
            set.resources.insert(name.to_owned(), resource);
        }
        next
    }

    /// The type set of `type_url` for writing (copied if shared), with its
    /// cached version cleared.
    fn set_mut(&mut self, type_url: &str) -> Option<&mut TypeSet> {
        let Some(i) = type_index(type_url) else {
            debug_assert!(false, "unexpected resource type {type_url}");
            return None;
        };
        let set = Arc::make_mut(&mut self.types[i]);
        set.version = OnceLock::new();
        Some(set)
    }

    fn contains(&self, type_url: &str, name: &str) -> bool {
        self.resources(type_url).contains_key(name)
    }

    /// Resources of `type_url` by name (empty for an unknown type).
    pub fn resources(&self, type_url: &str) -> &Resources {
        static EMPTY: Resources = Resources::new();
        type_index(type_url).map_or(&EMPTY, |i| &self.types[i].resources)
    }

    /// One resource by type URL and name.
    pub fn get(&self, type_url: &str, name: &str) -> Option<&Versioned> {
        self.resources(type_url).get(name).map(|r| &**r)
    }

    /// Name → version of every resource of `type_url`.
    pub fn versions(&self, type_url: &str) -> BTreeMap<&str, &str> {
        self.resources(type_url)
            .iter()
            .map(|(n, r)| (n.as_str(), r.version.as_str()))
            .collect()
    }

    /// Version of a whole type: a hash over its name → version map, for
    /// state-of-the-world `version_info`. Equal iff nothing of this type
    /// changed. Computed once per type set, however many streams ask.
    pub fn version_of(&self, type_url: &str) -> &str {
        static EMPTY: OnceLock<String> = OnceLock::new();
        match type_index(type_url) {
            Some(i) => {
                let set = &self.types[i];
                set.version.get_or_init(|| version_of(&set.resources))
            }
            None => EMPTY.get_or_init(|| version_of(&Resources::new())),
        }
    }

    /// Whether `type_url` is the very same set (not merely equal) in both
    /// snapshots: then nothing of that type can differ between them.
    pub fn shares_type(&self, other: &Snapshot, type_url: &str) -> bool {
        type_index(type_url).is_some_and(|i| Arc::ptr_eq(&self.types[i], &other.types[i]))
    }

    /// Whether `other` has the same resources at the same versions (the
    /// content-hash test for "nothing changed").
    pub fn same_versions(&self, other: &Snapshot) -> bool {
        TYPE_ORDER.iter().all(|t| self.same_type_versions(other, t))
    }

    fn same_type_versions(&self, other: &Snapshot, t: &str) -> bool {
        if self.shares_type(other, t) {
            return true;
        }
        let (a, b) = (self.resources(t), other.resources(t));
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|((na, ra), (nb, rb))| na == nb && ra.version == rb.version)
    }

    /// Takes over `last`'s set for every type whose versions equal this
    /// snapshot's, so that streams see those types as shared and skip
    /// them. Returns whether every type was taken over (nothing changed).
    pub fn share_unchanged(&mut self, last: &Snapshot) -> bool {
        let mut all = true;
        for t in TYPE_ORDER {
            if self.same_type_versions(last, t) {
                if let Some(i) = type_index(t) {
                    self.types[i] = last.types[i].clone();
                }
            } else {
                all = false;
            }
        }
        all
    }

    /// The set of `type_url` itself (shared), to be handed to another
    /// snapshot with [`Snapshot::with_set`] or compared by pointer.
    pub fn set(&self, type_url: &str) -> Option<&Arc<TypeSet>> {
        type_index(type_url).map(|i| &self.types[i])
    }

    /// This snapshot with `set` as its resources of `type_url`; every
    /// other type stays shared with `self`.
    pub fn with_set(&self, type_url: &str, set: Arc<TypeSet>) -> Snapshot {
        let mut next = self.clone();
        if let Some(i) = type_index(type_url) {
            next.types[i] = set;
        }
        next
    }

    /// Total number of resources, all types together.
    pub fn len(&self) -> usize {
        self.types.iter().map(|s| s.resources.len()).sum()
    }

    /// Whether there are no resources at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Makes equal type sets of different snapshots one shared set: a set
/// equal (by type version) to one interned before, and still alive, is
/// replaced by it. Sharing lets the hub patch a set once for every proxy
/// holding it and lets streams compute its version once. Holds weak
/// references only; dead ones are dropped as the table grows.
#[derive(Debug, Default)]
pub struct SetInterner {
    sets: std::collections::HashMap<String, std::sync::Weak<TypeSet>>,
    /// Table size after the last sweep of dead entries.
    swept_at: usize,
}

impl SetInterner {
    /// Replaces `snap`'s set of `type_url` by an interned equal one, or
    /// interns it.
    pub fn intern(&mut self, snap: &mut Snapshot, type_url: &str) {
        let Some(i) = type_index(type_url) else {
            return;
        };
        if snap.types[i].resources.is_empty() {
            return; // every empty set is already the one shared set
        }
        let version = snap.version_of(type_url).to_owned();
        if let Some(shared) = self.sets.get(&version).and_then(std::sync::Weak::upgrade)
            && shared.resources == snap.types[i].resources
        {
            snap.types[i] = shared;
            return;
        }
        self.sets.insert(version, Arc::downgrade(&snap.types[i]));
        if self.sets.len() > 64 && self.sets.len() > 2 * self.swept_at {
            self.sets.retain(|_, w| w.strong_count() > 0);
            self.swept_at = self.sets.len();
        }
    }
}

fn version_of(resources: &Resources) -> String {
    let mut h = Sha256::new();
    for (name, r) in resources {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(r.version.as_bytes());
        h.update([b'\n']);
    }
    truncate_hex(&h.finalize())
}

fn hash_hex(bytes: &[u8]) -> String {
    truncate_hex(&Sha256::digest(bytes))
}

fn truncate_hex(digest: &[u8]) -> String {
    hex::encode(&digest[..VERSION_LEN / 2])
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;

    use super::*;

    #[test]
    fn versions_follow_content() {
        let mut a = Snapshot::new();
        a.insert(
            "c".into(),
            &Cluster {
                name: "c".into(),
                ..Default::default()
            },
        );
        let mut b = Snapshot::new();
        b.insert(
            "c".into(),
            &Cluster {
                name: "c".into(),
                ..Default::default()
            },
        );
        assert_eq!(a.version_of(CLUSTER_TYPE), b.version_of(CLUSTER_TYPE));
        assert_eq!(a.get(CLUSTER_TYPE, "c").unwrap().version.len(), VERSION_LEN);

        let mut c = Snapshot::new();
        c.insert(
            "c".into(),
            &Cluster {
                name: "other".into(),
                ..Default::default()
            },
        );
        assert_ne!(a.version_of(CLUSTER_TYPE), c.version_of(CLUSTER_TYPE));
        assert_eq!(a.version_of(LISTENER_TYPE), c.version_of(LISTENER_TYPE));
    }
}
