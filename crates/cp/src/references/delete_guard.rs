//! Guarded deletes: an object that others use is not deleted out from
//! under them. One rule for every kind: [`ResourceService::refuse_if_used`]
//! refuses while [`ResourceService::users_of`] finds users, and
//! [`ResourceService::cascade_order`] lists what `--cascade` deletes, users
//! before what they use.
//!
//! Owns the wording of the refusal: the target, each user as `Kind/name`
//! (at most [`SHOWN`], then "and N more"), what a cascade would also
//! delete, and the fix.

use std::collections::BTreeSet;
use std::time::SystemTime;

use meshlink_api::{Kind, Resource};

use super::{ObjectId, User, referrer_kinds};
use crate::resources::{ResourceError, ResourceService, describe};

/// How many names a refusal shows; the rest are counted.
pub(crate) const SHOWN: usize = 10;

/// `A, B and 3 more` (at most [`SHOWN`] names).
pub(crate) fn name_list<T: std::fmt::Display>(items: &[T]) -> String {
    let mut names: Vec<String> = items.iter().take(SHOWN).map(T::to_string).collect();
    let rest = items.len().saturating_sub(SHOWN);
    if rest > 0 {
        return format!("{} and {rest} more", names.join(", "));
    }
    match names.pop() {
        Some(last) if !names.is_empty() => format!("{} and {last}", names.join(", ")),
        Some(last) => last,
        None => String::new(),
    }
}

/// The refusal of deleting `target`, used by `users`; `also` are the
/// objects a cascade would delete besides `users`.
pub(crate) fn in_use(target: &Resource, users: &[User], also: &[ObjectId]) -> ResourceError {
    let what = describe(target.kind(), target.mesh(), target.name());
    let objects = users.iter().any(|u| matches!(u, User::Object { .. }));
    let mut msg = format!("{what} is in use by {}", name_list(users));
    if !also.is_empty() {
        msg.push_str(&format!(
            ", which in turn {} used by {}",
            if users.len() == 1 { "is" } else { "are" },
            name_list(also)
        ));
    }
    if objects {
        msg.push_str(
            "; delete them first, or use --cascade (?cascade=true in the API) to delete them \
             with it",
        );
    } else {
        msg.push_str(
            "; a site holding its token can still link with it: wait until the grant is used \
             or expires, or use --cascade (?cascade=true in the API) to delete it anyway",
        );
    }
    ResourceError::InUse(msg)
}

// === impl ResourceService ===

impl ResourceService {
    /// Refuses deleting `target` (as stored) while anything uses it, with
    /// [`ResourceError::InUse`] naming each user and the fix.
    pub(crate) async fn refuse_if_used(&self, target: &Resource) -> Result<(), ResourceError> {
        let users = self.users_of(target, SystemTime::now()).await?;
        if users.is_empty() {
            return Ok(());
        }
        let direct: BTreeSet<&ObjectId> = users
            .iter()
            .filter_map(|u| match u {
                User::Object { id, .. } => Some(id),
                User::PendingRedemption { .. } => None,
            })
            .collect();
        let also: Vec<ObjectId> = if direct.is_empty() {
            Vec::new()
        } else {
            self.cascade_order(&ObjectId::of(target))
                .await?
                .into_iter()
                .filter(|id| !direct.contains(id))
                .collect()
        };
        Err(in_use(target, &users, &also))
    }

    /// Whether deleting an object of `kind` needs [`Self::refuse_if_used`]
    /// (something may refer to it, or it is an AccessGrant).
    pub(crate) fn may_be_used(kind: Kind) -> bool {
        !referrer_kinds(kind).is_empty() || kind == Kind::AccessGrant
    }

    /// Everything a cascade of `target` deletes besides it: its users,
    /// their users and so on, each after every object that uses it
    /// (depth first, post-order), so a watcher never sees an object go
    /// while something it follows still names it. Cycles (a Mesh and the
    /// Secrets in it it names) are cut where first met.
    pub(crate) async fn cascade_order(
        &self,
        target: &ObjectId,
    ) -> Result<Vec<ObjectId>, ResourceError> {
        let mut visited = BTreeSet::new();
        let mut order = Vec::new();
        let mut stack = vec![(target.clone(), false)];
        while let Some((id, expanded)) = stack.pop() {
            if expanded {
                if id != *target {
                    order.push(id);
                }
                continue;
            }
            if !visited.insert(id.clone()) {
                continue;
            }
            stack.push((id.clone(), true));
            if referrer_kinds(id.kind).is_empty() {
                continue;
            }
            let mut users: Vec<ObjectId> = self
                .referring(&id)
                .await?
                .into_iter()
                .map(|(u, _)| u)
                .collect();
            users.dedup();
            for u in users.into_iter().rev() {
                if !visited.contains(&u) {
                    stack.push((u, false));
                }
            }
        }
        Ok(order)
    }
}
