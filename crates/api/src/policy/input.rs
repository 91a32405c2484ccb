//! What the merge engine takes: one already-selected policy, by name, mesh,
//! labels, top-level `targetRef` and spec JSON.
//!
//! Owns the conversion from a stored [`Resource`] and the two labels the
//! engine reads (`kuma.io/effect`, `kuma.io/display-name`). It never
//! decides whether a policy selects a proxy.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::spec::{TargetRef, TargetRefKind};
use crate::{Kind, Resource};

/// The label that marks a policy as computed but not applied.
pub const EFFECT_LABEL: &str = "kuma.io/effect";

/// The [`EFFECT_LABEL`] value of a shadow policy.
pub const SHADOW: &str = "shadow";

/// The label Kuma orders policies by when set (else the name).
pub const DISPLAY_NAME_LABEL: &str = "kuma.io/display-name";

/// Which list of a policy's spec to fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    /// `spec.to[]`: outbound, per destination (or route).
    To,
    /// `spec.from[]`: inbound, per client selection.
    From,
    /// `spec.rules[]`: inbound, per `matches` (absent: every client).
    Rules,
}

impl Section {
    /// The spec field name.
    pub fn field(self) -> &'static str {
        match self {
            Section::To => "to",
            Section::From => "from",
            Section::Rules => "rules",
        }
    }
}

/// One policy selected for a proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyInput {
    /// The policy's kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its mesh.
    pub mesh: String,
    /// Its labels (`kuma.io/effect`, `kuma.io/display-name`, ...).
    pub labels: BTreeMap<String, String>,
    /// Its top-level `targetRef` (`Mesh` when unset).
    pub target_ref: TargetRef,
    /// Its spec as canonical JSON.
    pub spec: Value,
}

// === impl PolicyInput ===

impl PolicyInput {
    /// A policy from its parts; `target_ref` `None` means `Mesh`.
    pub fn new(
        kind: Kind,
        name: impl Into<String>,
        mesh: impl Into<String>,
        labels: BTreeMap<String, String>,
        target_ref: Option<TargetRef>,
        spec: Value,
    ) -> Self {
        PolicyInput {
            kind,
            name: name.into(),
            mesh: mesh.into(),
            labels,
            target_ref: target_ref.unwrap_or_else(|| TargetRef::of_kind(TargetRefKind::Mesh)),
            spec,
        }
    }

    /// The input for a stored policy (MeshTrafficPermission or an outbound
    /// policy); `None` for other kinds.
    pub fn from_resource(r: &Resource) -> Option<Self> {
        let kind = r.kind();
        if !(kind.is_outbound_policy() || kind == Kind::MeshTrafficPermission) {
            return None;
        }
        Some(PolicyInput::new(
            kind,
            r.name(),
            r.mesh().unwrap_or_default(),
            r.labels().clone(),
            r.spec.policy_target_ref().cloned(),
            r.spec.to_value(),
        ))
    }

    /// Whether `kuma.io/effect: shadow` marks it as computed, not applied.
    pub fn is_shadow(&self) -> bool {
        self.labels.get(EFFECT_LABEL).map(String::as_str) == Some(SHADOW)
    }

    /// The name Kuma orders by: `kuma.io/display-name`, else the name.
    pub fn display_name(&self) -> &str {
        self.labels
            .get(DISPLAY_NAME_LABEL)
            .map_or(self.name.as_str(), String::as_str)
    }

    /// The entries of `section` in the spec (none when absent).
    pub fn entries(&self, section: Section) -> &[Value] {
        self.spec
            .get(section.field())
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}
