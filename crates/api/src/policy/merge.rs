//! Folding the entries of selected policies into per-target confs.
//!
//! Owns the engine's entry point [`merge`]: entries of `to[]`, `from[]` or
//! `rules[]` are concatenated in priority order (see `order`), then, for
//! each distinct sub-target (a `targetRef`, or `matches` for `rules[]`),
//! their `default`s are folded with JSON merge patch; a caller may instead
//! fold every entry that applies to one destination
//! ([`RuleSet::merged_where`]), as a `Mesh` entry and a `MeshService` entry
//! both apply to that service. Shadow policies (`kuma.io/effect: shadow`)
//! are folded into a separate result that never changes the applied one.
//! Every merged field remembers the policy entry that set it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::input::{PolicyInput, Section};
use super::merge_patch;
use super::order::{self, to_entry_rank};
use super::routes;
use crate::Kind;
use crate::spec::TargetRef;

/// Which policy entry set a field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin {
    /// The policy's name.
    pub policy: String,
    /// The entry, e.g. `to[1]` or `to[0].rules[2]`.
    pub entry: String,
}

/// One entry of one policy, ready to fold.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What it applies to: its `targetRef` (`to[]`, `from[]`) or its
    /// `matches` (`rules[]`; `null` when absent).
    pub key: Value,
    /// `key` parsed as a targetRef, when it is one.
    pub target_ref: Option<TargetRef>,
    /// What it contributes: its `default` (for a MeshHTTPRoute, `{rules}`;
    /// for a MeshTCPRoute, its first rule).
    pub conf: Value,
    /// Where it comes from.
    pub origin: Origin,
}

/// A conf folded from one or more entries, with provenance.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergedConf {
    /// The merged JSON.
    pub conf: Value,
    /// For each merged leaf field (JSON pointer into `conf`), the entry
    /// that set it.
    pub origins: BTreeMap<String, Origin>,
}

impl MergedConf {
    /// The conf as a typed value (e.g. `RetryConf`, `TimeoutConf`).
    pub fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.conf.clone())
    }
}

/// The ordered entries of one section of the selected policies of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    /// The policies' kind (it decides how entries fold).
    pub kind: Kind,
    /// The section folded.
    pub section: Section,
    /// Entries, lowest priority first.
    pub entries: Vec<Entry>,
}

/// The result of [`merge`].
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// What applies: every policy but the shadow ones.
    pub applied: RuleSet,
    /// What would apply with the shadow policies too; `None` when no
    /// policy is a shadow.
    pub shadow: Option<RuleSet>,
}

/// Orders and folds the `section` entries of the `policies` of `kind`
/// (others are ignored). The result does not depend on the input order.
pub fn merge(kind: Kind, policies: &[PolicyInput], section: Section) -> Merged {
    let of_kind: Vec<&PolicyInput> = policies.iter().filter(|p| p.kind == kind).collect();
    let applied: Vec<&PolicyInput> = of_kind.iter().copied().filter(|p| !p.is_shadow()).collect();
    let shadow = (applied.len() != of_kind.len()).then(|| rule_set(kind, &of_kind, section));
    Merged {
        applied: rule_set(kind, &applied, section),
        shadow,
    }
}

/// An entry with what it sorts by: (top-level rank, `to[]` entry rank),
/// its policy and its index in the policy.
type Keyed<'a> = ((u8, (u8, bool)), &'a PolicyInput, usize, Entry);

fn rule_set(kind: Kind, policies: &[&PolicyInput], section: Section) -> RuleSet {
    let mut keyed: Vec<Keyed<'_>> = Vec::new();
    for p in policies {
        for (i, raw) in p.entries(section).iter().enumerate() {
            let entry = entry(kind, section, p, i, raw);
            let sub = match section {
                Section::To => to_entry_rank(entry.target_ref.as_ref()),
                Section::From | Section::Rules => (0, false),
            };
            keyed.push(((p.target_ref.rank(), sub), p, i, entry));
        }
    }
    keyed.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| order::names(a.1, b.1))
            .then_with(|| a.2.cmp(&b.2))
            .then_with(|| a.3.conf.to_string().cmp(&b.3.conf.to_string()))
    });
    RuleSet {
        kind,
        section,
        entries: keyed.into_iter().map(|k| k.3).collect(),
    }
}

/// Extracts one entry's key and conf.
fn entry(kind: Kind, section: Section, p: &PolicyInput, i: usize, raw: &Value) -> Entry {
    let key = match section {
        Section::Rules => raw.get("matches").cloned().unwrap_or(Value::Null),
        Section::To | Section::From => raw.get("targetRef").cloned().unwrap_or(Value::Null),
    };
    let target_ref = serde_json::from_value(key.clone()).ok();
    let conf = match (kind, section) {
        (Kind::MeshHTTPRoute, Section::To) => {
            let mut m = Map::new();
            m.insert(
                "rules".into(),
                raw.get("rules")
                    .cloned()
                    .unwrap_or(Value::Array(Vec::new())),
            );
            Value::Object(m)
        }
        // Kuma: the first rule, or all traffic to the destination itself.
        (Kind::MeshTCPRoute, Section::To) => match raw.get("rules").and_then(|r| r.get(0)) {
            Some(rule) => rule.clone(),
            None => {
                let mut backend = key.as_object().cloned().unwrap_or_default();
                backend.insert("weight".into(), 1.into());
                serde_json::json!({"default": {"backendRefs": [backend]}})
            }
        },
        _ => raw
            .get("default")
            .cloned()
            .unwrap_or(Value::Object(Map::new())),
    };
    Entry {
        key,
        target_ref,
        conf,
        origin: Origin {
            policy: p.name.clone(),
            entry: format!("{}[{i}]", section.field()),
        },
    }
}

// === impl RuleSet ===

impl RuleSet {
    /// The distinct keys, in the order they first appear.
    pub fn keys(&self) -> Vec<&Value> {
        let mut out: Vec<&Value> = Vec::new();
        for e in &self.entries {
            if !out.contains(&&e.key) {
                out.push(&e.key);
            }
        }
        out
    }

    /// For each distinct key, the fold of the entries with exactly that key.
    pub fn by_key(&self) -> Vec<(Value, MergedConf)> {
        self.keys()
            .into_iter()
            .map(|k| {
                (
                    k.clone(),
                    self.fold(self.entries.iter().filter(|e| e.key == *k)),
                )
            })
            .collect()
    }

    /// The fold of every entry `applies` accepts (e.g. the `Mesh` entries
    /// and those naming one MeshService); `None` when none does.
    pub fn merged_where(&self, applies: impl Fn(&Entry) -> bool) -> Option<MergedConf> {
        let mut chosen = self.entries.iter().filter(|e| applies(e)).peekable();
        chosen.peek()?;
        Some(self.fold(chosen))
    }

    fn fold<'a>(&self, entries: impl Iterator<Item = &'a Entry>) -> MergedConf {
        if self.kind == Kind::MeshHTTPRoute && self.section == Section::To {
            return routes::fold(entries);
        }
        let mut out = MergedConf::default();
        for e in entries {
            merge_patch::apply_tracked(&mut out.conf, &e.conf, &e.origin, "", &mut out.origins);
        }
        out
    }
}
