//! The reference index: the one place that decides what references what.
//!
//! For a resource, [`outgoing`] says what it needs (each reference with its
//! target kind, mesh and name, what it asks of the target and the field
//! that makes it); `ResourceService::users_of` ([`incoming`]) says who uses an object,
//! computed from the stored set with the same rule read backwards. Both
//! apply and delete consult it:
//!
//! - apply ([`apply_check`]): a reference marked [`OnApply::Required`]
//!   must find its target (a Mesh's `metadata.mesh`, a Mesh's provided-CA
//!   `secret:`); one marked [`OnApply::IfPresent`] is checked only against
//!   a target that exists (a Dataplane `backendRef` port); an update that
//!   would break what others use (a MeshService dropping a port Dataplanes
//!   name) is refused;
//! - delete ([`delete_guard`]): an object with users is refused with
//!   [`crate::resources::ResourceError::InUse`] listing them as `Kind/name`; `cascade` deletes
//!   the users (and theirs) first, in one store batch.
//!
//! It never writes and never reads a secret's value.

pub(crate) mod apply_check;
pub(crate) mod delete_guard;
pub(crate) mod incoming;
mod outgoing;
#[cfg(test)]
mod tests;

use meshlink_api::Kind;

pub(crate) use outgoing::{outgoing, referrer_kinds};

/// What apply asks of a reference's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnApply {
    /// The target must be stored (or applied earlier in the same apply).
    Required,
    /// A stored target must satisfy [`Reference::want`]; a missing one is
    /// accepted (resources arrive in any order, I2).
    IfPresent,
    /// Not checked at apply time; the reference only guards deletes.
    Never,
}

/// What a reference needs of its target beyond existing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Any object of the kind.
    Any,
    /// A Kuma Secret (`type: system.kuma.io/secret`).
    KumaSecret,
    /// A MeshService with this port.
    Port(u16),
}

/// One object, by kind, mesh and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObjectId {
    /// Its kind.
    pub(crate) kind: Kind,
    /// Its mesh (`None` for global objects).
    pub(crate) mesh: Option<String>,
    /// Its name.
    pub(crate) name: String,
}

/// One outgoing reference of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// The target's kind.
    pub(crate) kind: Kind,
    /// The target's mesh (`None` for global kinds).
    pub(crate) mesh: Option<String>,
    /// The target's name; `None` means every object of the kind (the Site
    /// of this control plane, whatever its name).
    pub(crate) name: Option<String>,
    /// What the target must offer.
    pub(crate) want: Want,
    /// The field that makes the reference, e.g. `metadata.mesh`.
    pub(crate) field: String,
    /// Whether the reference is plain membership (in a mesh, in the
    /// site), which a refusal does not spell out.
    pub(crate) membership: bool,
    /// What apply checks.
    pub(crate) on_apply: OnApply,
}

/// Someone that uses an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum User {
    /// A stored resource with a reference to it, through `field` (`None`
    /// for membership).
    Object {
        /// The user.
        id: ObjectId,
        /// The field that makes the reference.
        field: Option<String>,
    },
    /// An AccessGrant that another site may still redeem.
    PendingRedemption {
        /// Redemptions left.
        left: u64,
        /// Redemptions allowed.
        allowed: u64,
        /// When the grant expires (RFC 3339).
        until: String,
    },
}

// === impl ObjectId ===

impl ObjectId {
    /// The id of `r`.
    pub(crate) fn of(r: &meshlink_api::Resource) -> Self {
        ObjectId {
            kind: r.kind(),
            mesh: r.mesh().map(str::to_owned),
            name: r.name().to_owned(),
        }
    }
}

impl std::fmt::Display for ObjectId {
    /// `Kind/name`, as a refusal lists users.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

// === impl Reference ===

impl Reference {
    /// Whether this reference points at `target` (whatever it offers).
    pub(crate) fn points_at(&self, target: &ObjectId) -> bool {
        self.kind == target.kind
            && self.mesh == target.mesh
            && self.name.as_ref().is_none_or(|n| *n == target.name)
    }

    /// Whether `target` (which [`Self::points_at`]) offers what this
    /// reference wants.
    pub(crate) fn satisfied_by(&self, target: &meshlink_api::Resource) -> bool {
        match self.want {
            Want::Any => true,
            Want::KumaSecret => target
                .spec
                .as_secret()
                .is_some_and(|s| s.type_.as_deref() == Some(meshlink_api::spec::KUMA_SECRET_TYPE)),
            Want::Port(p) => target
                .spec
                .as_mesh_service()
                .is_some_and(|s| s.port(p).is_some()),
        }
    }
}

// === impl User ===

impl std::fmt::Display for User {
    /// `Dataplane/web (spec.networking.outbound[0].backendRef.port)`,
    /// `Listener/db`, or the pending redemption.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            User::Object { id, field: None } => write!(f, "{id}"),
            User::Object {
                id,
                field: Some(field),
            } => write!(f, "{id} ({field})"),
            User::PendingRedemption {
                left,
                allowed,
                until,
            } => write!(
                f,
                "a pending redemption ({left} of {allowed} left, until {until})"
            ),
        }
    }
}
