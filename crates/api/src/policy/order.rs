//! The order policies and their entries are folded in: lowest priority
//! first, so later entries win.
//!
//! Owns Kuma's comparators (`pkg/plugins/policies/core/rules/sort` and
//! `outbound/sort.go`): top-level `targetRef` (Mesh < Dataplane < Dataplane
//! with labels < with labels and sectionName < with name < with name and
//! sectionName < MeshSubset < MeshService < MeshExternalService <
//! MeshMultiZoneService < MeshServiceSubset < MeshHTTPRoute, see
//! [`TargetRef::rank`]); for `to[]` entries then the entry's own
//! `targetRef` (same kind order, a MeshService with `sectionName` above
//! one without); then the display name in *inverted* lexicographic order
//! (`zzz` has the least priority, `aaa` the most). Kuma's origin
//! (global/zone) and policy-role criteria do not apply to a single-zone
//! control plane without namespaces. The name, then the entry index, break
//! the remaining ties, so the order never depends on the input order.

use std::cmp::Ordering;

use super::input::PolicyInput;
use crate::spec::{TargetRef, TargetRefKind};

/// Compares two policies by priority (`Less`: `a` has less priority, so
/// it is folded first and `b` overrides it).
pub fn compare_policies(a: &PolicyInput, b: &PolicyInput) -> Ordering {
    a.target_ref
        .rank()
        .cmp(&b.target_ref.rank())
        .then_with(|| names(a, b))
}

/// Inverted lexicographic order of the display name, then of the name.
pub(super) fn names(a: &PolicyInput, b: &PolicyInput) -> Ordering {
    b.display_name()
        .cmp(a.display_name())
        .then_with(|| b.name.cmp(&a.name))
}

/// The rank of a `to[].targetRef` (its kind, then `sectionName` for a
/// MeshService); `None` (unparsable) ranks lowest.
pub(super) fn to_entry_rank(target: Option<&TargetRef>) -> (u8, bool) {
    match target {
        Some(t) => (
            t.rank(),
            t.kind == TargetRefKind::MeshService && t.section_name.is_some(),
        ),
        None => (0, false),
    }
}
