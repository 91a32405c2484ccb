//! Stream ownership (invariant I1): exactly one owner per proxy key, and
//! teardown that can only ever remove what it owns.
//!
//! # What this module owns
//!
//! The [`OwnerRegistry`] keeps, per [`ProxyKey`], one owner record
//! `{stream_id, generation, cancel, tasks, state}`. An ADS stream calls
//! [`OwnerRegistry::register`] and holds the returned [`OwnerLease`] for its
//! whole life. All per-proxy work (reconcile loops, certificate renewal
//! timers, pushes) is started with [`OwnerLease::spawn`]. Reconcilers publish
//! desired state "to whoever owns key K now" with [`OwnerRegistry::publish`].
//!
//! It must never: wait for an old stream before admitting a new one, reject a
//! stream, remove or modify a record it did not create, or run per-proxy work
//! that outlives its owner. It knows nothing about xDS, gRPC or translation.
//!
//! # Why it is correct
//!
//! Every mutation of the owner map happens under one `std::sync::Mutex`,
//! held only for short synchronous sections (never across `.await`), so the
//! operations below are linearizable.
//!
//! 1. **A late cleanup can never remove a newer owner.** A lease is identified
//!    by an [`OwnerId`] whose `stream_id` comes from a global monotonic
//!    counter, so no two leases ever share one (no ABA, even after a key's
//!    record was deleted and recreated). [`OwnerLease::release`] and `Drop`
//!    remove the record for their key only if the record's `OwnerId` equals
//!    their own; otherwise they change nothing in the map. A stale stream's
//!    cleanup, however late, therefore finds a different `OwnerId` and leaves
//!    the newer owner alone. The same proof gates every keyed action by a
//!    detached task ([`OwnerRegistry::with_owner`], [`OwnerRegistry::publish_as`]).
//! 2. **All per-proxy work dies with its owner.** Each lease has its own
//!    `CancellationToken` and `TaskTracker`; the record holds clones. Every
//!    future passed to [`OwnerLease::spawn`] races that token (cancellation
//!    wins ties) and is tracked by both the lease and the registry. The token
//!    is cancelled, and the tracker closed, on takeover (by the newer stream,
//!    right after it removed the old record from the map) and on release or
//!    drop (by the lease itself, whether or not it still owns the key). Work
//!    spawned after that ends at its first poll. A stale owner's state
//!    channel loses its only sender when its record leaves the map, so it can
//!    never receive another snapshot.
//! 3. **Takeover never waits.** [`OwnerRegistry::register`] is synchronous:
//!    under the lock it bumps the generation, cancels the previous owner
//!    (cancel is non-blocking) and installs the new record. It never awaits
//!    the old stream's tasks or cleanup; they wind down on their own.
//! 4. **No snapshot is lost at takeover.** `register` and `publish` take the
//!    same lock, and a new record is seeded with the previous owner's latest
//!    snapshot. A publish is thus either seen by the old owner and inherited,
//!    or lands in the new owner's channel.
//!
//! The registry is generic over the published state `S` (for the ADS server:
//! the proxy's translated snapshot and secrets).

mod lease;
mod registry;
#[cfg(test)]
mod tests;

pub use lease::OwnerLease;
pub use registry::OwnerRegistry;

use std::fmt;

/// Identifies one proxy across reconnects: its mesh and its name. A site's
/// router has an empty mesh (no mesh name is empty) and the site's name
/// ([`ProxyKey::router`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProxyKey {
    /// The mesh the proxy belongs to.
    pub mesh: String,
    /// The proxy's name inside the mesh.
    pub name: String,
}

// === impl ProxyKey ===

impl ProxyKey {
    /// Builds a key from a mesh and a proxy name.
    pub fn new(mesh: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            mesh: mesh.into(),
            name: name.into(),
        }
    }
}

impl ProxyKey {
    /// The key of the router of `site`.
    pub fn router(site: impl Into<String>) -> Self {
        Self::new("", site)
    }

    /// Whether this is a site's router (its `name` is the site's name).
    pub fn is_router(&self) -> bool {
        self.mesh.is_empty()
    }

    /// The xDS `node.id` the proxy must send: `<mesh>.<name>` for a
    /// dataplane, `site.<site>` for a router.
    pub fn node_id(&self) -> String {
        if self.is_router() {
            format!("site.{}", self.name)
        } else {
            format!("{}.{}", self.mesh, self.name)
        }
    }
}

impl fmt::Display for ProxyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_router() {
            write!(f, "router of site {}", self.name)
        } else {
            write!(f, "{}/{}", self.mesh, self.name)
        }
    }
}

/// The identity of one owner: which stream, and which generation of its key.
///
/// `stream_id` is unique across the whole registry and never reused, so an
/// `OwnerId` proves ownership on its own; `generation` counts takeovers of
/// the key (1 for the first owner after the key had none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId {
    /// Globally unique, monotonically increasing stream id.
    pub stream_id: u64,
    /// Per-key generation, bumped on every takeover.
    pub generation: u64,
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stream {} (generation {})",
            self.stream_id, self.generation
        )
    }
}

/// Errors of the owner registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The caller acted on a key it no longer owns (or never owned).
    #[error(
        "{expected} no longer owns proxy {key} (current owner: {}); \
         a newer stream took over, stop acting on this key",
        current.map_or_else(|| "none".to_owned(), |c| c.to_string())
    )]
    NotOwner {
        /// The key the caller tried to act on.
        key: ProxyKey,
        /// The owner the caller claimed to be.
        expected: OwnerId,
        /// The owner actually installed, if any.
        current: Option<OwnerId>,
    },
}
