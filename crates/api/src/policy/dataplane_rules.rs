//! The rules one Dataplane gets from the policies that select it, kind by
//! kind and section by section, as `meshlink inspect dataplane --rules`
//! shows them (Kuma's `kumactl inspect dataplane --type=rules`).
//!
//! Owns selection: a policy selects a Dataplane when its top-level
//! `targetRef` (`Mesh` when unset) selects one of its inbounds, or it is
//! `Mesh` or a `Dataplane` target naming it. The folding is the engine's
//! ([`super::merge`]). Pure: it reads resources and never fetches them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::input::{PolicyInput, Section};
use super::merge::{Merged, RuleSet, merge};
use crate::spec::{DataplaneSpec, InboundTarget, TargetRef, TargetRefKind};
use crate::{Kind, Resource};

/// The kinds whose rules are computed per Dataplane, and their sections.
pub const RULE_KINDS: [(Kind, &[Section]); 10] = [
    (Kind::MeshHTTPRoute, &[Section::To]),
    (Kind::MeshTCPRoute, &[Section::To]),
    (
        Kind::MeshTimeout,
        &[Section::To, Section::From, Section::Rules],
    ),
    (Kind::MeshRetry, &[Section::To]),
    (
        Kind::MeshRateLimit,
        &[Section::To, Section::From, Section::Rules],
    ),
    (
        Kind::MeshAccessLog,
        &[Section::To, Section::From, Section::Rules],
    ),
    (Kind::MeshLoadBalancingStrategy, &[Section::To]),
    (Kind::MeshHealthCheck, &[Section::To]),
    (Kind::MeshFaultInjection, &[Section::To, Section::From]),
    (
        Kind::MeshCircuitBreaker,
        &[Section::To, Section::From, Section::Rules],
    ),
];

/// The folded rules of one section of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct KindRules {
    /// The policy kind.
    pub kind: Kind,
    /// The section folded.
    pub section: Section,
    /// The names of the policies that select the Dataplane, lowest
    /// priority first.
    pub policies: Vec<String>,
    /// What the engine folded.
    pub merged: Merged,
}

/// Whether a policy with top-level `target` selects `dataplane`.
pub fn selects(target: &TargetRef, dataplane: &Resource) -> bool {
    if target.kind == TargetRefKind::Mesh {
        return true;
    }
    let Some(spec) = dataplane.spec.as_dataplane() else {
        return false;
    };
    selects_dataplane(target, dataplane.name(), dataplane.labels(), spec)
}

/// [`selects`] for a Dataplane given by its parts (name, labels, spec),
/// for callers that keep no whole [`Resource`] (the translator's view).
pub fn selects_dataplane(
    target: &TargetRef,
    name: &str,
    labels: &BTreeMap<String, String>,
    spec: &DataplaneSpec,
) -> bool {
    if target.kind == TargetRefKind::Mesh {
        return true;
    }
    spec.networking.inbound.iter().any(|inbound| {
        target.selects(&InboundTarget {
            dataplane: name,
            labels,
            port: inbound.port.get(),
            name: inbound.name.as_deref(),
            tags: &inbound.tags,
        })
    })
}

/// The rules `dataplane` gets from `policies` (any kinds, any meshes: the
/// ones of its mesh and of [`RULE_KINDS`] are used). A section no policy
/// has entries in is left out.
pub fn dataplane_rules(dataplane: &Resource, policies: &[Resource]) -> Vec<KindRules> {
    let mesh = dataplane.mesh().unwrap_or_default();
    let mut out = Vec::new();
    for (kind, sections) in RULE_KINDS {
        let selected: Vec<PolicyInput> = policies
            .iter()
            .filter(|p| p.kind() == kind && p.mesh().unwrap_or_default() == mesh)
            .filter_map(PolicyInput::from_resource)
            .filter(|p| selects(&p.target_ref, dataplane))
            .collect();
        for &section in sections {
            if selected.iter().all(|p| p.entries(section).is_empty()) {
                continue;
            }
            let merged = merge(kind, &selected, section);
            let mut policies: Vec<String> = Vec::new();
            for e in merged
                .applied
                .entries
                .iter()
                .chain(merged.shadow.iter().flat_map(|s| &s.entries))
            {
                if !policies.contains(&e.origin.policy) {
                    policies.push(e.origin.policy.clone());
                }
            }
            out.push(KindRules {
                kind,
                section,
                policies,
                merged,
            });
        }
    }
    out
}

/// The rules as JSON: one object per kind and section, each target (or
/// `matches`) with its merged conf and, per leaf field, the policy entry
/// that set it; the shadow result beside the applied one.
pub fn rules_json(rules: &[KindRules]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("kind".into(), json!(r.kind.as_str()));
                o.insert("section".into(), json!(r.section.field()));
                o.insert("policies".into(), json!(r.policies));
                o.insert("rules".into(), set_json(&r.merged.applied));
                if let Some(shadow) = &r.merged.shadow {
                    o.insert("shadow".into(), set_json(shadow));
                }
                Value::Object(o)
            })
            .collect(),
    )
}

fn set_json(set: &RuleSet) -> Value {
    Value::Array(
        set.by_key()
            .into_iter()
            .map(|(key, conf)| {
                let origins: Map<String, Value> = conf
                    .origins
                    .iter()
                    .map(|(ptr, o)| (ptr.clone(), json!(format!("{} ({})", o.policy, o.entry))))
                    .collect();
                json!({"target": key, "conf": conf.conf, "origins": origins})
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_documents;

    fn resources(yaml: &str) -> Vec<Resource> {
        parse_documents(yaml)
            .into_iter()
            .map(|d| d.outcome.expect("valid"))
            .collect()
    }

    const DOCS: &str = r#"
type: Dataplane
mesh: default
name: web-1
networking:
  address: 127.0.0.1
  inbound:
    - port: 8080
      tags: {kuma.io/service: web, version: v1}
---
type: MeshTimeout
mesh: default
name: mesh-timeout-all-default
spec:
  targetRef: {kind: Mesh}
  to:
    - targetRef: {kind: Mesh}
      default:
        connectionTimeout: 5s
        idleTimeout: 1h
        http: {requestTimeout: 15s, streamIdleTimeout: 30m}
---
type: MeshTimeout
mesh: default
name: web-to-backend
spec:
  targetRef: {kind: MeshService, name: web}
  to:
    - targetRef: {kind: MeshService, name: backend}
      default:
        http: {requestTimeout: 1s}
---
type: MeshTimeout
mesh: default
name: only-db
spec:
  targetRef: {kind: MeshService, name: db}
  to:
    - targetRef: {kind: Mesh}
      default: {idleTimeout: 5m}
---
type: MeshRetry
mesh: other
name: elsewhere
spec:
  targetRef: {kind: Mesh}
  to:
    - targetRef: {kind: Mesh}
      default: {http: {numRetries: 9}}
"#;

    #[test]
    fn a_dataplane_gets_the_folded_rules_of_the_policies_that_select_it() {
        let all = resources(DOCS);
        let dp = &all[0];
        let rules = dataplane_rules(dp, &all[1..]);
        // Only MeshTimeout's `to` has entries for web-1 in its mesh.
        let [timeouts] = rules.as_slice() else {
            panic!("one section: {rules:?}")
        };
        assert_eq!(
            (timeouts.kind, timeouts.section),
            (Kind::MeshTimeout, Section::To)
        );
        assert_eq!(
            timeouts.policies,
            ["mesh-timeout-all-default", "web-to-backend"]
        );
        let json = rules_json(&rules);
        let backend = json[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["target"]["kind"] == "MeshService")
            .expect("a rule for backend");
        assert_eq!(backend["conf"]["http"]["requestTimeout"], "1s");
        assert_eq!(
            backend["origins"]["/http/requestTimeout"],
            "web-to-backend (to[0])"
        );
    }

    #[test]
    fn selection_follows_the_top_level_target() {
        let all = resources(DOCS);
        let dp = &all[0];
        let target = |p: &Resource| PolicyInput::from_resource(p).unwrap().target_ref;
        assert!(selects(&target(&all[1]), dp), "Mesh");
        assert!(selects(&target(&all[2]), dp), "MeshService web");
        assert!(!selects(&target(&all[3]), dp), "MeshService db");
    }
}
