//! The MeshTrafficPermission kind: who may talk to whom inside a mesh.
//!
//! Owns the Kuma "new policy" shape (`targetRef` + `from[]`, or `rules[]`,
//! see `permission_rules`), its validation and target matching. It decides nothing about precedence between
//! policies; that belongs to the translator.

use serde::{Deserialize, Serialize};

use super::permission_rules::PermissionRule;
use super::string_enum::string_enum;
use super::target_ref::{Position, TargetRef, TargetRefKind};
use crate::validate::Errors;

/// `spec` of a MeshTrafficPermission.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTrafficPermissionSpec {
    /// Which destinations the policy applies to (default: the whole mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Rules by source; at least one, unless `rules` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<FromRule>,
    /// Kuma's experimental `rules` (clients matched by SPIFFE ID); not
    /// together with `from`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PermissionRule>,
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
        self.target_ref
            .clone()
            .unwrap_or_else(|| TargetRef::of_kind(TargetRefKind::Mesh))
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(t) = &self.target_ref {
            t.validate(errs, "spec.targetRef", Position::Top);
        }
        match (self.from.is_empty(), self.rules.is_empty()) {
            (true, true) => errs.add(
                "spec.from",
                "at least one rule is required, e.g. from: [{targetRef: {kind: Mesh}, \
                 default: {action: Allow}}] (or Kuma's rules: [...])",
            ),
            (false, false) => errs.add(
                "spec.from",
                "from must be empty when rules is defined (as in Kuma): a policy matches \
                 clients by from[].targetRef or by rules[] SPIFFE IDs; split it in two",
            ),
            _ => {}
        }
        super::permission_rules::validate(errs, &self.rules);
        for (i, rule) in self.from.iter().enumerate() {
            rule.target_ref
                .validate(errs, &format!("spec.from[{i}].targetRef"), Position::From);
            rule.default_
                .action
                .validate(errs, &format!("spec.from[{i}].default.action"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::target_ref::{InboundTarget, NAMESPACE_LABEL};

    /// Tags or labels (both are string maps) from `pairs`.
    fn tags<T: FromIterator<(String, String)>>(pairs: &[(&str, &str)]) -> T {
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
            name: Some(n.into()),
            ..TargetRef::of_kind(TargetRefKind::MeshService)
        };
        assert!(svc("web").matches(&web));
        assert!(!svc("db").matches(&web));
        let subset = |t| TargetRef {
            tags: t,
            ..TargetRef::of_kind(TargetRefKind::MeshSubset)
        };
        assert!(subset(tags(&[("version", "v2")])).matches(&web));
        assert!(!subset(tags(&[("version", "v1")])).matches(&web));
    }

    #[test]
    fn dataplane_targets_select_by_name_labels_and_section() {
        let web = tags(&[("kuma.io/service", "web")]);
        let labels = tags(&[("app", "web"), (NAMESPACE_LABEL, "shop")]);
        let inbound = InboundTarget {
            dataplane: "web-1",
            labels: &labels,
            port: 8080,
            name: Some("http"),
            tags: &web,
        };
        let dp = TargetRef::of_kind(TargetRefKind::Dataplane);
        assert!(dp.selects(&inbound), "a bare Dataplane selects every one");
        let by = |f: fn(&mut TargetRef)| {
            let mut t = dp.clone();
            f(&mut t);
            t.selects(&inbound)
        };
        assert!(by(|t| t.labels = Some(tags(&[("app", "web")]))));
        assert!(!by(|t| t.labels = Some(tags(&[("app", "backend")]))));
        assert!(by(|t| t.name = Some("web-1".into())));
        assert!(!by(|t| t.name = Some("web-2".into())));
        assert!(by(|t| {
            t.name = Some("web-1".into());
            t.namespace = Some("shop".into());
        }));
        assert!(!by(|t| {
            t.name = Some("web-1".into());
            t.namespace = Some("other".into());
        }));
        assert!(by(|t| t.section_name = Some("8080".into())));
        assert!(!by(|t| t.section_name = Some("9090".into())));
        // sectionName names the inbound first, then its port.
        assert!(by(|t| t.section_name = Some("http".into())));
        assert!(!by(|t| t.section_name = Some("grpc".into())));
        // Ranks follow Kuma's order, most general first.
        let ranks: Vec<u8> = [
            TargetRef::of_kind(TargetRefKind::Mesh),
            dp.clone(),
            TargetRef {
                labels: Some(labels.clone()),
                ..dp.clone()
            },
            TargetRef {
                labels: Some(labels.clone()),
                section_name: Some("8080".into()),
                ..dp.clone()
            },
            TargetRef {
                name: Some("web-1".into()),
                ..dp.clone()
            },
            TargetRef {
                name: Some("web-1".into()),
                section_name: Some("8080".into()),
                ..dp.clone()
            },
        ]
        .iter()
        .map(TargetRef::rank)
        .collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
    }
}
