//! The router translator's input: everything of one site that a router's
//! configuration depends on, as plain data.
//!
//! Owns [`SiteView`] and how one changed object patches it (newer revisions
//! win, so a listing and the change feed can interleave in any order). It
//! must never do I/O: the control plane's source fills it.

use std::collections::BTreeMap;
use std::time::Instant;

use meshlink_api::spec::Tags;
use meshlink_api::{Kind, Resource};

use super::tombstones::Tombstones;
use crate::hub::Update;

/// The TLS material of one `kubernetes.io/tls` Secret, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    /// `tls.crt`: the certificate chain, leaf first (may be empty).
    pub cert_chain_pem: String,
    /// `tls.key`: the private key (may be empty).
    pub private_key_pem: String,
    /// `ca.crt`: the CA that verifies the peer (may be empty).
    pub ca_pem: String,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("cert_chain_pem", &self.cert_chain_pem.len())
            .field("private_key_pem", &"<redacted>")
            .field("ca_pem", &self.ca_pem.len())
            .finish()
    }
}

/// One changed object of a site, as the change feed carries it.
#[derive(Debug, Clone)]
pub enum SiteChange {
    /// A Site, RouterAccess, Link, Listener, MultiKeyListener, Connector
    /// or Dataplane.
    Resource(Box<Update>),
    /// A Secret was created or updated (`Some`) or deleted (`None`), at
    /// store revision `revision`.
    Secret {
        /// The Secret's name.
        name: String,
        /// Its TLS material; `None` when deleted.
        material: Option<TlsMaterial>,
        /// The store revision of the change.
        revision: u64,
    },
}

/// Everything the router of one site is configured from. Maps are keyed by
/// name (Dataplanes by `(mesh, name)`), so iteration order is fixed.
#[derive(Debug, Clone, Default)]
pub struct SiteView {
    /// The Site (one per control plane), if applied.
    pub site: Option<Resource>,
    /// RouterAccesses by name.
    pub router_accesses: BTreeMap<String, Resource>,
    /// Links by name.
    pub links: BTreeMap<String, Resource>,
    /// Listeners by name.
    pub listeners: BTreeMap<String, Resource>,
    /// MultiKeyListeners by name.
    pub multi_key_listeners: BTreeMap<String, Resource>,
    /// Connectors by name.
    pub connectors: BTreeMap<String, Resource>,
    /// Mesh Dataplanes by `(mesh, name)`, for Connector selectors and the
    /// mesh ingress: only what those read (with 10,000 Dataplanes, whole
    /// resources here held about 2 KiB more each in every control plane,
    /// router or not).
    pub dataplanes: BTreeMap<(String, String), SelectableDataplane>,
    /// Secrets by name, with the store revision they were read at.
    pub secrets: BTreeMap<String, (u64, TlsMaterial)>,
    /// Meshes by name (whether mTLS is on, the trust domain), for the
    /// mesh ingress.
    pub meshes: BTreeMap<String, Resource>,
    /// The router's identity per mesh, issued by the control plane (the
    /// hub fills it; a source leaves it empty).
    pub mesh_identities: BTreeMap<String, super::MeshRouterIdentity>,
    /// Revisions of recent deletions, so an older listing cannot revive
    /// an object (each is forgotten after a minute).
    tombstones: Tombstones,
}

/// What a Connector `selector` and the mesh ingress need of one mesh
/// Dataplane.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelectableDataplane {
    /// Whether a proxy is connected for it (Skupper's "ready pod").
    pub online: bool,
    /// Each inbound's tags and the address flows to it go to (the
    /// inbound's `address`, else the Dataplane's).
    pub inbounds: Vec<SelectableInbound>,
    /// The service its identity names (`None`: it has none).
    pub identity_service: Option<String>,
    /// The routing keys its outbounds reach through the router.
    pub routing_keys: Vec<String>,
    /// The store revision it was read at.
    revision: u64,
}

/// One inbound of a [`SelectableDataplane`]: its tags and where its flows
/// go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelectableInbound {
    /// The inbound's tags.
    pub tags: Tags,
    /// The inbound's `address`, else the Dataplane's.
    pub address: String,
}

// === impl SelectableDataplane ===

impl SelectableDataplane {
    /// The selector's view of Dataplane `r` (`None` if `r` is not one).
    pub fn of(r: &Resource) -> Option<Self> {
        let spec = r.spec.as_dataplane()?;
        Some(Self {
            online: r.status.details.as_dataplane().is_some_and(|s| s.online),
            inbounds: spec
                .networking
                .inbound
                .iter()
                .map(|i| SelectableInbound {
                    tags: i.tags.clone(),
                    address: i.effective_address(&spec.networking.address).to_owned(),
                })
                .collect(),
            identity_service: spec.identity_service(r.name()).map(str::to_owned),
            routing_keys: spec
                .networking
                .outbound
                .iter()
                .filter_map(|o| o.routing_key().map(str::to_owned))
                .collect(),
            revision: revision(r),
        })
    }

    /// Whether it has an outbound to a routing key, so the mesh ingress
    /// may change with it.
    pub fn uses_network(&self) -> bool {
        !self.routing_keys.is_empty()
    }

    /// Whether a selector or the mesh ingress could treat `self` and
    /// `other` differently.
    fn differs(&self, other: &Self) -> bool {
        self.online != other.online
            || self.inbounds != other.inbounds
            || self.identity_service != other.identity_service
            || self.routing_keys != other.routing_keys
    }
}

/// Upserts or removes the selector's view of Dataplane `r` under `key`;
/// returns whether what a selector sees changed.
fn patch_dataplane(
    map: &mut BTreeMap<(String, String), SelectableDataplane>,
    key: (String, String),
    r: &Resource,
    deleted: bool,
) -> bool {
    let rev = revision(r);
    if map.get(&key).is_some_and(|held| held.revision > rev) {
        return false;
    }
    if deleted {
        return map.remove(&key).is_some();
    }
    let Some(dp) = SelectableDataplane::of(r) else {
        return map.remove(&key).is_some();
    };
    let changed = map.get(&key).is_none_or(|held| held.differs(&dp));
    map.insert(key, dp);
    changed
}

/// The store revision a resource was read at (0 when unknown).
pub(crate) fn revision(r: &Resource) -> u64 {
    r.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether the router's configuration could differ between `a` and `b`.
fn differs(a: &Resource, b: &Resource) -> bool {
    a.spec != b.spec || a.status != b.status || a.metadata.labels != b.metadata.labels
}

/// Upserts or removes `r` under `key`; returns whether the map changed.
fn patch<K: Ord>(map: &mut BTreeMap<K, Resource>, key: K, r: Resource, deleted: bool) -> bool {
    let rev = revision(&r);
    if map.get(&key).is_some_and(|held| revision(held) > rev) {
        return false;
    }
    if deleted {
        return map.remove(&key).is_some();
    }
    let changed = map.get(&key).is_none_or(|held| differs(held, &r));
    map.insert(key, r);
    changed
}

// === impl SiteView ===

impl SiteView {
    /// Adds or replaces `r` (kinds the router does not use are ignored).
    pub fn upsert(&mut self, r: Resource) -> bool {
        self.apply(SiteChange::Resource(Box::new(Update::Upserted(r))))
    }

    /// Adds or replaces a Secret read at `revision`.
    pub fn upsert_secret(
        &mut self,
        name: impl Into<String>,
        material: TlsMaterial,
        revision: u64,
    ) -> bool {
        self.apply(SiteChange::Secret {
            name: name.into(),
            material: Some(material),
            revision,
        })
    }

    /// Applies one change unless the view holds a newer state of the
    /// object (or saw it deleted later). Returns whether the view changed.
    pub fn apply(&mut self, change: SiteChange) -> bool {
        self.apply_at(change, Instant::now())
    }

    /// [`Self::apply`] at `now`, which dates a deletion's record and
    /// expires the old ones.
    fn apply_at(&mut self, change: SiteChange, now: Instant) -> bool {
        self.tombstones.expire(now);
        match change {
            SiteChange::Secret {
                name,
                material,
                revision,
            } => {
                let tomb = (Kind::Site, "secret".to_owned(), name.clone());
                let held = self.secrets.get(&name).map(|(r, _)| *r);
                let gone = self.tombstones.get(&tomb);
                if held.max(gone).is_some_and(|r| r > revision) {
                    return false;
                }
                match material {
                    Some(m) => {
                        self.tombstones.remove(&tomb);
                        let changed = self.secrets.get(&name).is_none_or(|(_, held)| *held != m);
                        self.secrets.insert(name, (revision, m));
                        changed
                    }
                    None => {
                        self.tombstones.bury(tomb, revision, now);
                        self.secrets.remove(&name).is_some()
                    }
                }
            }
            SiteChange::Resource(update) => {
                let (r, deleted) = match *update {
                    Update::Upserted(r) => (r, false),
                    Update::Deleted(r) => (r, true),
                };
                let kind = r.kind();
                let mesh = r.metadata.mesh.clone().unwrap_or_default();
                let name = r.name().to_owned();
                let rev = revision(&r);
                let tomb = (kind, mesh.clone(), name.clone());
                if self.tombstones.get(&tomb).is_some_and(|t| t > rev) {
                    return false;
                }
                if deleted {
                    self.tombstones.bury(tomb, rev, now);
                } else {
                    self.tombstones.remove(&tomb);
                }
                match kind {
                    Kind::Site => {
                        if self.site.as_ref().is_some_and(|held| revision(held) > rev) {
                            return false;
                        }
                        if deleted {
                            let same = self.site.as_ref().is_some_and(|s| s.name() == name);
                            same && self.site.take().is_some()
                        } else {
                            let changed = self
                                .site
                                .as_ref()
                                .is_none_or(|held| held.name() != r.name() || differs(held, &r));
                            self.site = Some(r);
                            changed
                        }
                    }
                    Kind::RouterAccess => patch(&mut self.router_accesses, name, r, deleted),
                    Kind::Link => patch(&mut self.links, name, r, deleted),
                    Kind::Listener => patch(&mut self.listeners, name, r, deleted),
                    Kind::MultiKeyListener => {
                        patch(&mut self.multi_key_listeners, name, r, deleted)
                    }
                    Kind::Connector => patch(&mut self.connectors, name, r, deleted),
                    Kind::Dataplane => {
                        patch_dataplane(&mut self.dataplanes, (mesh, name), &r, deleted)
                    }
                    Kind::Mesh => patch(&mut self.meshes, name, r, deleted),
                    _ => false,
                }
            }
        }
    }

    /// Whether a Dataplane (before or after a change) has an outbound to
    /// a routing key, so the mesh ingress may change with it.
    pub fn uses_network(dp: &Resource) -> bool {
        dp.spec.as_dataplane().is_some_and(|s| {
            s.networking
                .outbound
                .iter()
                .any(|o| o.routing_key().is_some())
        })
    }

    /// Whether a change to this Dataplane can change the configuration:
    /// only when some Connector selects by tags.
    pub fn selects_dataplanes(&self) -> bool {
        self.connectors.values().any(|c| {
            c.spec
                .as_connector()
                .is_some_and(|s| s.host.is_none() && s.selector.is_some())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::tombstones::TOMBSTONE_TTL;
    use super::*;

    fn dataplane(name: &str, revision: u64) -> Resource {
        let mut r = Resource::from_json(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": name, "mesh": "default"},
            "spec": {"networking": {"address": "10.0.0.1",
                "inbound": [{"port": 9000, "servicePort": 19000,
                             "tags": {"kuma.io/service": "backend"}}]}},
        }))
        .expect("a valid Dataplane");
        r.set_resource_version(Some(revision.to_string()));
        r
    }

    fn change(r: Resource, deleted: bool) -> SiteChange {
        SiteChange::Resource(Box::new(if deleted {
            Update::Deleted(r)
        } else {
            Update::Upserted(r)
        }))
    }

    #[test]
    fn a_deleted_object_is_not_revived_by_an_older_change_while_its_deletion_is_remembered() {
        let t0 = Instant::now();
        let mut view = SiteView::default();
        assert!(view.apply_at(change(dataplane("web-1", 5), false), t0));
        assert!(view.apply_at(change(dataplane("web-1", 7), true), t0));
        // A listing read before the deletion arrives late.
        assert!(!view.apply_at(change(dataplane("web-1", 5), false), t0));
        assert!(view.dataplanes.is_empty());
        // Created again, later: it is there.
        assert!(view.apply_at(change(dataplane("web-1", 9), false), t0));
        assert_eq!(view.dataplanes.len(), 1);
        assert_eq!(view.tombstones.len(), 0);
    }

    #[test]
    fn deletions_are_forgotten_after_the_ttl_so_churn_leaves_the_view_at_its_baseline() {
        let t0 = Instant::now();
        let mut view = SiteView::default();
        for i in 0..1_000u64 {
            let name = format!("pod-{i}");
            view.apply_at(change(dataplane(&name, 2 * i + 1), false), t0);
            view.apply_at(change(dataplane(&name, 2 * i + 2), true), t0);
        }
        assert!(view.dataplanes.is_empty());
        assert_eq!(view.tombstones.len(), 1_000);
        // The next change after the TTL sweeps them.
        let later = t0 + TOMBSTONE_TTL + Duration::from_secs(1);
        view.apply_at(change(dataplane("web-1", 5_000), false), later);
        assert_eq!(view.tombstones.len(), 0);
        assert_eq!(view.dataplanes.len(), 1);
    }
}
