//! Kuma's `BackendRef`: where a route sends traffic (`targetRef` fields plus
//! `weight` and `port`), used by MeshHTTPRoute and MeshTCPRoute rules.
//!
//! Owns the shape and its validation (kinds, names, weight and port
//! ranges). It is distinct from the Dataplane outbound `backendRef`
//! (`mesh_service::BackendRef`). It never resolves a reference to
//! endpoints; the translator does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::target_ref::TargetRefKind;
use super::{Port, Tags};
use crate::validate::{self, Errors};

/// The largest `weight` (Kuma's is a `uint32`).
pub const MAX_WEIGHT: i64 = u32::MAX as i64;

/// One backend of a route rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteBackendRef {
    /// `MeshService`, `MeshServiceSubset`, `MeshExternalService` or
    /// `MeshMultiZoneService`.
    pub kind: TargetRefKind,
    /// The destination's name (required but with `labels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The destination's namespace (Kuma on Kubernetes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Selects destinations by labels instead of `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// One port of the destination, by name or number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    /// `MeshServiceSubset` only (required there): endpoint tags.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// Kuma's reserved cross-mesh field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<String>,
    /// The destination port (a real MeshService).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Share of traffic relative to the other backends (default 1; 0 sends
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
}

// === impl RouteBackendRef ===

impl RouteBackendRef {
    /// The weight, 1 when unset.
    pub fn effective_weight(&self) -> u32 {
        self.weight.map_or(1, |w| {
            u32::try_from(w.clamp(0, MAX_WEIGHT)).unwrap_or(u32::MAX)
        })
    }

    /// Reports every problem at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        use TargetRefKind::*;
        let allowed = [
            MeshService,
            MeshServiceSubset,
            MeshExternalService,
            MeshMultiZoneService,
        ];
        let kind_path = format!("{at}.kind");
        let names: Vec<&str> = allowed.iter().map(TargetRefKind::as_str).collect();
        match &self.kind {
            Unknown(given) => errs.add(
                kind_path,
                super::string_enum::unknown_message("backendRef kind", given, &names),
            ),
            k if !allowed.contains(k) => errs.add(
                kind_path,
                format!(
                    "{k} is not allowed in backendRefs (as in Kuma); expected {}",
                    super::string_enum::one_of(&names)
                ),
            ),
            _ => {}
        }
        let named = self.name.as_deref().is_some_and(|n| !n.trim().is_empty());
        match (&self.labels, named) {
            (None, false) => errs.add(
                format!("{at}.name"),
                "required: the destination's name (or select it by labels)",
            ),
            (Some(_), true) => errs.add(
                format!("{at}.labels"),
                "not allowed together with name: reference one destination by name or select by labels",
            ),
            (Some(labels), false) => {
                for (k, v) in labels {
                    validate::label(errs, &format!("{at}.labels[{k:?}]"), k, v);
                }
            }
            (None, true) => {}
        }
        match (self.kind == MeshServiceSubset, self.tags.is_empty()) {
            (true, true) => errs.add(
                format!("{at}.tags"),
                "required when kind is MeshServiceSubset: the endpoint tags to match",
            ),
            (false, false) => errs.add(
                format!("{at}.tags"),
                format!(
                    "not allowed when kind is {}; use kind: MeshServiceSubset to pick endpoints by tags",
                    self.kind
                ),
            ),
            _ => {}
        }
        if let Some(port) = self.port {
            port.validate(errs, &format!("{at}.port"));
        }
        if let Some(w) = self.weight
            && !(0..=MAX_WEIGHT).contains(&w)
        {
            errs.add(
                format!("{at}.weight"),
                format!("must be between 0 and {MAX_WEIGHT} (got {w})"),
            );
        }
    }
}

/// Reports problems of a `backendRefs` list at `at`.
pub(crate) fn validate_list(errs: &mut Errors, at: &str, refs: &[RouteBackendRef]) {
    for (i, r) in refs.iter().enumerate() {
        r.validate(errs, &format!("{at}[{i}]"));
    }
}
