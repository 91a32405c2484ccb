//! MeshHTTPRoute rules merged by identical `matches`, as Kuma does
//! (`policyMerge:"mergeValuesByKey"` on `rules`).
//!
//! Owns the fold for one destination: rules of every entry are taken
//! highest-priority policy first (each policy's rules in their own order);
//! rules whose `matches` are equal are one rule, placed where it first
//! appears in that order, whose `default` is the merge patch of the
//! `default`s from lowest to highest priority. It decides nothing about
//! matching requests.

use serde_json::{Map, Value};

use super::merge::{Entry, MergedConf, Origin};
use super::merge_patch;

/// Folds `entries` (lowest priority first) into `{rules: [...]}`.
pub(super) fn fold<'a>(entries: impl Iterator<Item = &'a Entry>) -> MergedConf {
    // (matches, defaults lowest priority first)
    let mut groups: Vec<(Value, Vec<(Value, Origin)>)> = Vec::new();
    let entries: Vec<&Entry> = entries.collect();
    // Highest priority first, each entry's rules in their own order.
    for e in entries.iter().rev() {
        let rules = e.conf.get("rules").and_then(Value::as_array);
        for (j, rule) in rules.into_iter().flatten().enumerate() {
            let matches = rule.get("matches").cloned().unwrap_or(Value::Null);
            let default = rule
                .get("default")
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            let origin = Origin {
                policy: e.origin.policy.clone(),
                entry: format!("{}.rules[{j}]", e.origin.entry),
            };
            match groups.iter_mut().find(|(m, _)| *m == matches) {
                // A lower-priority default: it goes first in the fold.
                Some((_, defaults)) => defaults.insert(0, (default, origin)),
                None => groups.push((matches, vec![(default, origin)])),
            }
        }
    }
    let mut out = MergedConf::default();
    let mut rules = Vec::with_capacity(groups.len());
    for (k, (matches, defaults)) in groups.into_iter().enumerate() {
        let mut conf = Value::Null;
        let at = format!("/rules/{k}/default");
        for (d, origin) in &defaults {
            merge_patch::apply_tracked(&mut conf, d, origin, &at, &mut out.origins);
        }
        if let Some((_, first)) = defaults.last() {
            out.origins
                .insert(format!("/rules/{k}/matches"), first.clone());
        }
        let mut rule = Map::new();
        rule.insert("matches".into(), matches);
        rule.insert("default".into(), conf);
        rules.push(Value::Object(rule));
    }
    let mut m = Map::new();
    m.insert("rules".into(), Value::Array(rules));
    out.conf = Value::Object(m);
    out
}
