//! The MeshTrafficPermission kind: who may talk to whom inside a mesh.
//!
//! Owns the Kuma "new policy" shape (`targetRef` + `from[]`), its validation
//! and target matching. It decides nothing about precedence between
//! policies; that belongs to the translator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dataplane::service_from_tags;
use super::string_enum::string_enum;
use crate::validate::Errors;

/// `spec` of a MeshTrafficPermission.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTrafficPermissionSpec {
    /// Which destinations the policy applies to (default: the whole mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Rules by source; at least one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<FromRule>,
}

string_enum! {
    /// What a [`TargetRef`] selects.
    pub enum TargetRefKind ("targetRef kind") {
        /// Every proxy in the mesh.
        Mesh = "Mesh",
        /// Proxies serving the service `name`.
        MeshService = "MeshService",
        /// Proxies whose inbound tags include all of `tags`.
        MeshSubset = "MeshSubset",
    }
}

string_enum! {
    /// The verdict of a permission rule.
    pub enum Action ("action") {
        /// Allow the traffic.
        Allow = "Allow",
        /// Deny the traffic.
        Deny = "Deny",
        /// Allow, but log what a Deny would have blocked.
        AllowWithShadowDeny = "AllowWithShadowDeny",
    }
}

/// A selection of proxies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetRef {
    /// `Mesh`, `MeshService` or `MeshSubset`.
    pub kind: TargetRefKind,
    /// Service name; required for `MeshService`, not allowed otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tags; required for `MeshSubset`, not allowed otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// One entry of `from`: sources and the action applied to them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FromRule {
    /// Which sources the rule matches.
    pub target_ref: TargetRef,
    /// What to do with them.
    #[serde(rename = "default")]
    pub default_: PermissionConf,
}

/// `from[].default`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionConf {
    /// The verdict.
    pub action: Action,
}

// === impl MeshTrafficPermissionSpec ===

impl MeshTrafficPermissionSpec {
    /// The effective destination selection (`Mesh` when unset).
    pub fn effective_target_ref(&self) -> TargetRef {
        self.target_ref.clone().unwrap_or(TargetRef {
            kind: TargetRefKind::Mesh,
            name: None,
            tags: BTreeMap::new(),
        })
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(t) = &self.target_ref {
            t.validate(errs, "spec.targetRef");
        }
        if self.from.is_empty() {
            errs.add(
                "spec.from",
                "at least one rule is required, e.g. from: [{targetRef: {kind: Mesh}, \
                 default: {action: Allow}}]",
            );
        }
        for (i, rule) in self.from.iter().enumerate() {
            rule.target_ref
                .validate(errs, &format!("spec.from[{i}].targetRef"));
            rule.default_
                .action
                .validate(errs, &format!("spec.from[{i}].default.action"));
        }
    }
}

// === impl TargetRef ===

impl TargetRef {
    /// Whether a proxy with these inbound tags is selected (never, for an
    /// unknown kind).
    pub fn matches(&self, tags: &BTreeMap<String, String>) -> bool {
        match self.kind {
            TargetRefKind::Mesh => true,
            TargetRefKind::MeshService => {
                self.name.is_some() && service_from_tags(tags) == self.name.as_deref()
            }
            TargetRefKind::MeshSubset => self.tags.iter().all(|(k, v)| tags.get(k) == Some(v)),
            TargetRefKind::Unknown(_) => false,
        }
    }

    fn validate(&self, errs: &mut Errors, at: &str) {
        // Which of name and tags apply depends on the kind: with an unknown
        // kind, only the kind is reported.
        if !self.kind.validate(errs, &format!("{at}.kind")) {
            return;
        }
        let has_name = self.name.as_deref().is_some_and(|n| !n.trim().is_empty());
        match self.kind {
            TargetRefKind::MeshService if !has_name => errs.add(
                format!("{at}.name"),
                "required when kind is MeshService: the service name",
            ),
            TargetRefKind::Mesh | TargetRefKind::MeshSubset if self.name.is_some() => errs.add(
                format!("{at}.name"),
                format!("not allowed when kind is {}", self.kind),
            ),
            _ => {}
        }
        match self.kind {
            TargetRefKind::MeshSubset if self.tags.is_empty() => errs.add(
                format!("{at}.tags"),
                "required when kind is MeshSubset: the tags to match",
            ),
            TargetRefKind::Mesh | TargetRefKind::MeshService if !self.tags.is_empty() => errs.add(
                format!("{at}.tags"),
                format!(
                    "not allowed when kind is {}; use kind: MeshSubset to select by tags",
                    self.kind
                ),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn target_matching() {
        let web = tags(&[("meshlink.dev/service", "web"), ("version", "v2")]);
        let mesh = MeshTrafficPermissionSpec::default().effective_target_ref();
        assert!(mesh.matches(&web));
        let svc = |n: &str| TargetRef {
            kind: TargetRefKind::MeshService,
            name: Some(n.into()),
            tags: BTreeMap::new(),
        };
        assert!(svc("web").matches(&web));
        assert!(!svc("db").matches(&web));
        let subset = |t| TargetRef {
            kind: TargetRefKind::MeshSubset,
            name: None,
            tags: t,
        };
        assert!(subset(tags(&[("version", "v2")])).matches(&web));
        assert!(!subset(tags(&[("version", "v1")])).matches(&web));
    }
}
