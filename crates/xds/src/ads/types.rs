//! Per-stream, per-type protocol state shared by the SotW and delta engines,
//! and what a stream reports about itself (for `meshlink inspect`).
//!
//! Owns the bookkeeping of what was sent, acknowledged and rejected for one
//! type on one stream. It must never decide *what* to send: the engines do.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tonic::Status;

use super::subscription::Subscription;
use crate::translate::{
    CLUSTER_TYPE, CONNECTOR_TYPE, ENDPOINT_TYPE, LINK_TYPE, LISTENER_TYPE, MESH_INGRESS_TYPE,
    ROUTE_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE, Resources, SECRET_TYPE, SITE_TYPE,
    TYPE_ORDER, Versioned, type_index,
};

/// The type URL as one of the served constants, or a clear error.
pub(crate) fn known_type(type_url: &str) -> Result<&'static str, Status> {
    TYPE_ORDER
        .iter()
        .copied()
        .find(|t| *t == type_url)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "unknown or unsupported type URL {type_url:?}; this control plane serves {}",
                TYPE_ORDER.join(", ")
            ))
        })
}

/// Short name of a served type (`Listener`, `Cluster`, ...), for reports
/// and metric labels.
pub fn short_type(type_url: &str) -> &'static str {
    match type_url {
        LISTENER_TYPE => "Listener",
        ROUTE_TYPE => "RouteConfiguration",
        CLUSTER_TYPE => "Cluster",
        ENDPOINT_TYPE => "ClusterLoadAssignment",
        SECRET_TYPE => "Secret",
        SITE_TYPE => "meshlink.Site",
        ROUTER_ACCESS_TYPE => "meshlink.RouterAccess",
        LINK_TYPE => "meshlink.Link",
        ROUTER_LISTENER_TYPE => "meshlink.Listener",
        CONNECTOR_TYPE => "meshlink.Connector",
        MESH_INGRESS_TYPE => "meshlink.MeshIngress",
        _ => "unknown",
    }
}

/// Whether a SotW response of this type must list every resource the
/// client wants (absence means "deleted"): Listener, Cluster and every
/// router type.
pub(crate) fn is_full_state(type_url: &str) -> bool {
    matches!(
        type_url,
        LISTENER_TYPE
            | CLUSTER_TYPE
            | SITE_TYPE
            | ROUTER_ACCESS_TYPE
            | LINK_TYPE
            | ROUTER_LISTENER_TYPE
            | CONNECTOR_TYPE
            | MESH_INGRESS_TYPE
    )
}

/// A NACK as the stream saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NackReport {
    /// The version the client rejected.
    pub version: String,
    /// The client's `error_detail.message`.
    pub detail: String,
}

/// What one stream sent and got back for one type. Kept per type per
/// stream, so its fields are compact (boxed strings, a boxed NACK).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeReport {
    /// Version of the last response sent.
    pub last_sent_version: Option<Box<str>>,
    /// Version the client last acknowledged.
    pub last_acked_version: Option<Box<str>>,
    /// The last NACK, if any.
    pub last_nack: Option<Box<NackReport>>,
    /// Number of resources the client holds (as far as the server knows).
    pub resources: usize,
    /// Responses sent.
    pub responses: u64,
}

/// A stream's per-type states, one slot per served type in [`TYPE_ORDER`].
/// Boxed: a stream uses four or five of the eleven types, and a slot it
/// never uses costs one pointer (a map node of eleven slots cost ~280
/// bytes per stream, inline states ~3 KiB).
#[derive(Debug, Default)]
pub(crate) struct TypeStates([Option<Box<TypeState>>; TYPE_ORDER.len()]);

impl TypeStates {
    /// The state of `t`, created on first use.
    pub(crate) fn entry(&mut self, t: &'static str) -> &mut TypeState {
        let i = type_index(t).expect("a served type");
        self.0[i].get_or_insert_with(Box::default)
    }

    /// The state of `t`, if the stream used it.
    pub(crate) fn get(&self, t: &str) -> Option<&TypeState> {
        self.0[type_index(t)?].as_deref()
    }

    /// The state of `t` for writing, if the stream used it.
    pub(crate) fn get_mut(&mut self, t: &str) -> Option<&mut TypeState> {
        self.0[type_index(t)?].as_deref_mut()
    }

    /// The types the stream used, in [`TYPE_ORDER`], with their states.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'static str, &TypeState)> {
        TYPE_ORDER
            .iter()
            .zip(&self.0)
            .filter_map(|(t, s)| Some((*t, s.as_deref()?)))
    }
}

impl std::ops::Index<&str> for TypeStates {
    type Output = TypeState;

    /// The state of `t`; panics if the stream never used it.
    fn index(&self, t: &str) -> &TypeState {
        self.get(t).expect("a type the stream used")
    }
}

/// A small map from resource name to `V`, sorted by name: a sorted vector
/// of boxed names, not a `BTreeMap` (whose node is eleven slots, ~280 to
/// ~370 bytes) for the handful of names a stream holds or asks for per
/// type. [`Sent`] maps names to versions; a subscription's names are a
/// `NameMap<()>`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct NameMap<V>(Vec<(Box<str>, V)>);

impl<V> NameMap<V> {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// The value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&V> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }

    /// Puts `value` under `name`; whether the name was new. An existing
    /// value is replaced only if `replace` says so (saving a reallocation
    /// when it is equal).
    pub(crate) fn put(&mut self, name: &str, value: V, replace: impl FnOnce(&V) -> bool) -> bool {
        match self.find(name) {
            Ok(i) => {
                if replace(&self.0[i].1) {
                    self.0[i].1 = value;
                }
                false
            }
            Err(i) => {
                self.0.insert(i, (name.into(), value));
                true
            }
        }
    }

    /// Forgets `name`; whether it was there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        match self.find(name) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// The names, sorted.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| &**n)
    }

    /// Number of names.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Forgets every name (and the memory they took).
    pub(crate) fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// A map of `items`, sorted; of two items with one name, the first
    /// stays.
    pub(crate) fn from_items(items: impl IntoIterator<Item = (Box<str>, V)>) -> Self {
        let mut v: Vec<(Box<str>, V)> = items.into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v.shrink_to_fit();
        NameMap(v)
    }
}

/// Name → version: what a stream's client holds of one type.
pub(crate) type Sent = NameMap<Box<str>>;

impl Sent {
    /// The version held of `name`.
    pub(crate) fn version(&self, name: &str) -> Option<&str> {
        self.get(name).map(|v| &**v)
    }

    /// Records that the client holds `name` at `version`.
    pub(crate) fn insert(&mut self, name: &str, version: &str) {
        self.put(name, version.into(), |held| **held != *version);
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Sent {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(items: I) -> Self {
        NameMap::from_items(items.into_iter().map(|(n, v)| (n.into(), v.into())))
    }
}

/// Protocol state of one type on one stream (one per type a stream uses,
/// boxed; nonces are kept as numbers, versions as boxed strings).
#[derive(Debug, Default)]
pub(crate) struct TypeState {
    pub(crate) sub: Subscription,
    /// Nonce of the latest response.
    pub(crate) nonce: Option<u64>,
    /// Name → version the client holds (delta), or that the latest
    /// response listed (SotW).
    pub(crate) sent: Sent,
    /// SotW: a version the client NACKed; not re-sent.
    pub(crate) nacked_version: Option<Box<str>>,
    /// The latest response awaiting an ACK (its nonce), and when the
    /// change it carries was first seen by the control plane.
    pub(crate) pending: Option<(u64, Instant)>,
    pub(crate) report: TypeReport,
    /// Whether what was sent for this type was worked out against the
    /// state the engine last handled, with no subscription change since:
    /// then a next state that shares this type's set with it needs no
    /// comparison.
    pub(crate) synced: bool,
}

// === impl TypeState ===

/// A nonce this server handed out, as its number (every nonce is one:
/// [`Nonces`]); `None` for anything else.
fn nonce_number(nonce: &str) -> Option<u64> {
    nonce.parse().ok()
}

impl TypeState {
    /// Whether `nonce` is the nonce of the latest response.
    pub(crate) fn is_latest(&self, nonce: &str) -> bool {
        self.nonce.is_some() && self.nonce == nonce_number(nonce)
    }

    /// Records a response: its nonce, version and the change it carries.
    pub(crate) fn sent_response(
        &mut self,
        nonce: &str,
        version: &str,
        changed_at: Option<Instant>,
    ) {
        let nonce = nonce_number(nonce);
        self.nonce = nonce;
        if self.report.last_sent_version.as_deref() != Some(version) {
            self.report.last_sent_version = Some(version.into());
        }
        self.report.responses += 1;
        self.report.resources = self.sent.len();
        let since = match (&self.pending, changed_at) {
            (Some((_, old)), Some(new)) => Some((*old).min(new)),
            (Some((_, old)), None) => Some(*old),
            (None, new) => new,
        };
        self.pending = nonce.zip(since);
    }

    /// Handles an ACK of `nonce`; returns the change-to-ACK latency if the
    /// response carried a change.
    pub(crate) fn acked(&mut self, nonce: &str, version: &str) -> Option<Duration> {
        if self.report.last_acked_version.as_deref() != Some(version) {
            self.report.last_acked_version = Some(version.into());
        }
        match self.pending.take() {
            Some((n, at)) if Some(n) == nonce_number(nonce) => Some(at.elapsed()),
            other => {
                self.pending = other;
                None
            }
        }
    }

    /// Handles a NACK of the response with `version`.
    pub(crate) fn nacked(&mut self, nonce: &str, version: &str, detail: String) {
        if matches!(self.pending, Some((n, _)) if Some(n) == nonce_number(nonce)) {
            self.pending = None;
        }
        self.report.last_nack = Some(Box::new(NackReport {
            version: version.to_owned(),
            detail,
        }));
    }
}

/// What handling one request or one new snapshot produced.
#[derive(Debug)]
pub(crate) struct Outcome<R> {
    /// Responses to send, in order.
    pub(crate) responses: Vec<R>,
    /// Types acknowledged, with the change-to-ACK latency when known.
    pub(crate) acks: Vec<(&'static str, Option<Duration>)>,
    /// Types rejected, with the client's detail.
    pub(crate) nacks: Vec<(&'static str, String)>,
}

impl<R> Default for Outcome<R> {
    fn default() -> Self {
        Self {
            responses: Vec::new(),
            acks: Vec::new(),
            nacks: Vec::new(),
        }
    }
}

/// Hands out nonces; unique within a stream.
#[derive(Debug, Default)]
pub(crate) struct Nonces(AtomicU64);

impl Nonces {
    pub(crate) fn next(&self) -> String {
        (self.0.fetch_add(1, Ordering::Relaxed) + 1).to_string()
    }
}

/// The resources of one type a client wants, from a snapshot.
/// The items borrow only `resources`, not `sub`.
pub(crate) fn wanted<'r, 's: 'a, 'a>(
    resources: &'r Resources,
    sub: &'s Subscription,
) -> impl Iterator<Item = (&'r String, &'r Arc<Versioned>)> + 'a
where
    'r: 'a,
{
    let all = sub.is_wildcard();
    let names: Box<dyn Iterator<Item = (&'r String, &'r Arc<Versioned>)> + 'a> = if all {
        Box::new(resources.iter())
    } else {
        Box::new(
            sub.names()
                .iter()
                .filter_map(move |n| resources.get_key_value(n)),
        )
    };
    names
}

/// A version over a set of `(name, version)` pairs (SotW `version_info`).
pub(crate) fn version_over<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut h = Sha256::new();
    for (name, version) in items {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(version.as_bytes());
        h.update([b'\n']);
    }
    let digest = h.finalize();
    hex::encode(&digest[..8])
}

/// Names in `sent` that are no longer wanted or no longer exist.
pub(crate) fn gone(sent: &Sent, resources: &Resources, sub: &Subscription) -> BTreeSet<String> {
    sent.keys()
        .filter(|n| !sub.wants(n) || !resources.contains_key(n))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Sent;

    #[test]
    fn sent_keeps_names_sorted_and_one_version_each() {
        let mut sent = Sent::default();
        sent.insert("b", "1");
        sent.insert("a", "1");
        sent.insert("c", "1");
        sent.insert("b", "2");
        assert_eq!(sent.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(sent.version("b"), Some("2"));
        assert_eq!(sent.version("zz"), None);
        assert!(sent.remove("a"));
        assert!(!sent.remove("a"));
        assert_eq!(sent.len(), 2);
        let listed: Sent = [("y", "1"), ("x", "1"), ("y", "2")].into_iter().collect();
        assert_eq!(listed.keys().collect::<Vec<_>>(), ["x", "y"]);
        assert!(Sent::default().is_empty());
    }
}
