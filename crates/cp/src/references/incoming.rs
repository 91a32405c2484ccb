//! Incoming references: who uses an object, computed from the stored set
//! with [`super::outgoing`] read backwards (list the kinds that may refer
//! to it, keep the resources whose references point at it).
//!
//! Also owns the one use that is not a stored reference: an AccessGrant
//! another site may still redeem (Ready, not expired, redemptions left).

use std::time::SystemTime;

use meshlink_api::{ConditionStatus, Kind, Resource};

use super::{ObjectId, Reference, User, Want, outgoing, referrer_kinds};
use crate::resources::{ResourceError, ResourceService};

// === impl ResourceService ===

impl ResourceService {
    /// Every stored resource that refers to `target`, with the reference,
    /// in [`referrer_kinds`] order and then store order.
    pub(crate) async fn referring(
        &self,
        target: &ObjectId,
    ) -> Result<Vec<(ObjectId, Reference)>, ResourceError> {
        let mut out = Vec::new();
        let mesh = match target.kind {
            Kind::Mesh => Some(target.name.as_str()),
            _ => target.mesh.as_deref(),
        };
        for kind in referrer_kinds(target.kind) {
            let scope = mesh.filter(|_| kind.allows_mesh());
            self.for_each(kind, scope, |r| {
                for reference in outgoing(&r) {
                    if reference.points_at(target) {
                        out.push((ObjectId::of(&r), reference));
                    }
                }
            })
            .await?;
        }
        Ok(out)
    }

    /// Who uses `target`: the stored resources that refer to it (one entry
    /// per resource, naming its first reference) and, for an AccessGrant,
    /// a redemption still pending at `now`.
    pub(crate) async fn users_of(
        &self,
        target: &Resource,
        now: SystemTime,
    ) -> Result<Vec<User>, ResourceError> {
        let mut users: Vec<User> = Vec::new();
        let mut last: Option<ObjectId> = None;
        for (id, reference) in self.referring(&ObjectId::of(target)).await? {
            if last.as_ref() == Some(&id) {
                continue;
            }
            last = Some(id.clone());
            let field = (!reference.membership).then_some(reference.field);
            users.push(User::Object { id, field });
        }
        users.extend(pending_redemption(target, now));
        Ok(users)
    }

    /// The users of `current` that `next` (the same object, changed) would
    /// no longer satisfy: Dataplanes naming a port a MeshService drops.
    pub(crate) async fn users_broken_by(
        &self,
        current: &Resource,
        next: &Resource,
    ) -> Result<Vec<User>, ResourceError> {
        if !narrows(current, next) {
            return Ok(Vec::new());
        }
        Ok(self
            .referring(&ObjectId::of(current))
            .await?
            .into_iter()
            .filter(|(_, r)| r.satisfied_by(current) && !r.satisfied_by(next))
            .map(|(id, r)| {
                let field = match r.want {
                    Want::Port(p) => format!("{} = {p}", r.field),
                    _ => r.field,
                };
                User::Object {
                    id,
                    field: Some(field),
                }
            })
            .collect())
    }
}

/// Whether `next` may offer less than `current` to what refers to it (a
/// MeshService port gone, a Kuma Secret no longer one); cheap, so an
/// apply lists referrers only when it matters.
fn narrows(current: &Resource, next: &Resource) -> bool {
    match (current.spec.as_mesh_service(), next.spec.as_mesh_service()) {
        (Some(c), Some(n)) => c.ports.iter().any(|p| n.port(p.port.get()).is_none()),
        _ => match (current.spec.as_secret(), next.spec.as_secret()) {
            (Some(c), Some(n)) => c.type_ != n.type_,
            _ => false,
        },
    }
}

/// A grant that another site may still redeem: Ready, not expired, with
/// redemptions left. Deleting it fails that site's token.
pub(crate) fn pending_redemption(grant: &Resource, now: SystemTime) -> Option<User> {
    let spec = grant.spec.as_access_grant()?;
    let status = grant.status.details.as_access_grant()?;
    let ready = grant
        .condition("Ready")
        .is_some_and(|c| c.status == ConditionStatus::True);
    let until = status.expiration_time.clone()?;
    let allowed = spec.redemptions_allowed();
    let left = allowed.saturating_sub(status.redemptions.unwrap_or(0));
    let live = ready && left > 0 && !crate::grants::redeem::expired(Some(&until), now);
    live.then_some(User::PendingRedemption {
        left,
        allowed,
        until,
    })
}
