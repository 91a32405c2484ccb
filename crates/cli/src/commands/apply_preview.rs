//! What `meshlink apply --dry-run` shows once the server's checks passed:
//! which proxies the change would touch, and how the rules the L7
//! policies give each of them would change, field by field, with the
//! policy that would set each value.
//!
//! It reads the Dataplanes and policies of each mesh the input touches
//! through the REST API and folds them twice with the policy engine
//! (`meshlink_api::policy`): as they are, and with the input applied. It
//! never writes.

use std::collections::{BTreeMap, BTreeSet};

use meshlink_api::policy::{RULE_KINDS, dataplane_rules, rules_json};
use meshlink_api::{Kind, Resource};
use serde_json::Value;

use super::inspect_rules::{list, mesh_policies};
use super::table::text;
use crate::client::ApiClient;
use crate::failure::Failure;

/// One merged field: where it is (kind, section, target, pointer) and
/// what it is (value, the policy entry that set it).
type Fields = BTreeMap<String, (String, String)>;

/// Prints, per mesh the input touches, the proxies whose computed rules
/// would change and how.
pub(crate) async fn print_rule_changes(
    client: &ApiClient,
    input: &[Resource],
) -> Result<(), Failure> {
    let touches_rules =
        |r: &&Resource| r.kind().is_outbound_policy() || r.kind() == Kind::Dataplane;
    let meshes: BTreeSet<&str> = input
        .iter()
        .filter(touches_rules)
        .filter_map(|r| r.mesh())
        .collect();
    for mesh in meshes {
        let dataplanes = list(client, Kind::Dataplane, mesh).await?;
        let policies = mesh_policies(client, mesh).await?;
        let after_dataplanes = with_input(&dataplanes, input, mesh, Kind::Dataplane);
        let after_policies = RULE_KINDS
            .iter()
            .flat_map(|(kind, _)| with_input(&policies, input, mesh, *kind))
            .collect::<Vec<_>>();
        let mut changed = Vec::new();
        for dp in &after_dataplanes {
            let before = dataplanes
                .iter()
                .find(|d| d.name() == dp.name())
                .map(|d| fields(&rules_json(&dataplane_rules(d, &policies))))
                .unwrap_or_default();
            let after = fields(&rules_json(&dataplane_rules(dp, &after_policies)));
            let lines = diff(&before, &after);
            if !lines.is_empty() {
                changed.push((dp.name().to_string(), lines));
            }
        }
        println!(
            "mesh {mesh}: {} of {} proxies would get different L7 rules",
            changed.len(),
            after_dataplanes.len()
        );
        for (name, lines) in changed {
            println!("  {mesh}/{name}:");
            for l in lines {
                println!("    {l}");
            }
        }
    }
    Ok(())
}

/// `current` with the input's `kind` resources of `mesh` put in place
/// (replacing the one of the same name, or added).
fn with_input(current: &[Resource], input: &[Resource], mesh: &str, kind: Kind) -> Vec<Resource> {
    let mut out: Vec<Resource> = current
        .iter()
        .filter(|r| r.kind() == kind)
        .cloned()
        .collect();
    for r in input
        .iter()
        .filter(|r| r.kind() == kind && r.mesh() == Some(mesh))
    {
        match out.iter_mut().find(|o| o.name() == r.name()) {
            Some(o) => *o = r.clone(),
            None => out.push(r.clone()),
        }
    }
    out
}

/// The merged fields of `rules` (as [`rules_json`] prints them), keyed by
/// `KIND SECTION TARGET POINTER`.
fn fields(rules: &Value) -> Fields {
    let mut out = Fields::new();
    for r in rules.as_array().into_iter().flatten() {
        for (set, label) in [("rules", ""), ("shadow", " (shadow)")] {
            for rule in r[set].as_array().into_iter().flatten() {
                let target = rule["target"].to_string();
                for (pointer, by) in rule["origins"].as_object().into_iter().flatten() {
                    let value = rule["conf"].pointer(pointer).map(text).unwrap_or_default();
                    let key = format!(
                        "{} {}{label} {target} {pointer}",
                        text(&r["kind"]),
                        text(&r["section"])
                    );
                    out.insert(key, (value, text(by)));
                }
            }
        }
    }
    out
}

/// One line per field that differs: `KEY: OLD (BY) -> NEW (BY)`, `-` for
/// a field that is absent on one side.
fn diff(before: &Fields, after: &Fields) -> Vec<String> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let side = |f: Option<&(String, String)>| match f {
        Some((value, by)) => format!("{value} ({by})"),
        None => "-".to_string(),
    };
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {} -> {}", side(before.get(k)), side(after.get(k))))
        .collect()
}
