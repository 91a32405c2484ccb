//! `meshlink inspect dataplane NAME --rules [-o table|json|yaml]`: for each
//! L7 policy kind and section, what one Dataplane gets from the policies
//! that select it, and which policy entry set each field (Kuma's
//! `kumactl inspect dataplane --type=rules`).
//!
//! It reads the Dataplane and the policies of its mesh through the REST
//! API and folds them with the API crate's policy engine
//! (`meshlink_api::policy`), the same one the translator will use. It never
//! changes anything.

use std::time::Duration;

use meshlink_api::policy::{KindRules, RULE_KINDS, dataplane_rules, rules_json};
use meshlink_api::{Kind, Resource};
use reqwest::Method;
use serde_json::Value;

use super::inspect::Format;
use super::table::{aligned, text};
use crate::client::ApiClient;
use crate::failure::Failure;

/// Runs `inspect dataplane NAME --rules`.
pub(crate) async fn rules(
    client: &ApiClient,
    name: &str,
    mesh: &str,
    format: Option<Format>,
) -> Result<(), Failure> {
    let dataplane = resource(get(client, &format!("/api/v1/dataplanes/{name}"), mesh).await?)?;
    let policies = mesh_policies(client, mesh).await?;
    let rules = dataplane_rules(&dataplane, &policies);
    match format.unwrap_or(Format::Table) {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&rules_json(&rules)).expect("JSON prints")
        ),
        Format::Yaml => print!(
            "{}",
            serde_yaml_ng::to_string(&rules_json(&rules)).expect("JSON prints as YAML")
        ),
        Format::Table => print!("{}", table(mesh, name, &rules)),
    }
    Ok(())
}

/// Every resource of `kind` in `mesh`.
pub(super) async fn list(
    client: &ApiClient,
    kind: Kind,
    mesh: &str,
) -> Result<Vec<Resource>, Failure> {
    let mut body = get(client, &format!("/api/v1/{}", kind.plural()), mesh).await?;
    match body["items"].take() {
        Value::Array(items) => items.into_iter().map(resource).collect(),
        _ => Ok(Vec::new()),
    }
}

/// Every policy of `mesh` whose kind the rules are computed from
/// ([`RULE_KINDS`]).
pub(super) async fn mesh_policies(
    client: &ApiClient,
    mesh: &str,
) -> Result<Vec<Resource>, Failure> {
    let mut policies = Vec::new();
    for (kind, _) in RULE_KINDS {
        policies.extend(list(client, kind, mesh).await?);
    }
    Ok(policies)
}

/// `GET path?mesh=MESH`.
async fn get(client: &ApiClient, path: &str, mesh: &str) -> Result<Value, Failure> {
    client
        .call(
            Method::GET,
            path,
            &[("mesh", mesh.to_string())],
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())
}

fn resource(v: Value) -> Result<Resource, Failure> {
    Resource::from_json_unvalidated(v).map_err(|errors| {
        Failure::Runtime(format!(
            "the control plane sent a resource this CLI cannot read ({}); is the CLI older than the control plane?",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        ))
    })
}

/// The human form: a block per kind and section, a row per merged field.
fn table(mesh: &str, name: &str, rules: &[KindRules]) -> String {
    if rules.is_empty() {
        let kinds: Vec<&str> = RULE_KINDS.iter().map(|(k, _)| k.as_str()).collect();
        return format!(
            "no policy of kind {} selects dataplane {mesh}/{name}\n",
            kinds.join(", ")
        );
    }
    let mut out = String::new();
    for r in rules {
        let json = rules_json(std::slice::from_ref(r));
        out.push_str(&format!(
            "{} {} (policies, lowest priority first: {})\n",
            r.kind,
            r.section.field(),
            r.policies.join(", ")
        ));
        for (label, set) in [("", &json[0]["rules"]), (" (shadow)", &json[0]["shadow"])] {
            let Some(set) = set.as_array() else {
                continue;
            };
            let mut rows = vec![[
                format!("  TARGET{label}"),
                "FIELD".to_string(),
                "VALUE".to_string(),
                "SET BY".to_string(),
            ]];
            for rule in set {
                let origins = rule["origins"].as_object().cloned().unwrap_or_default();
                for (pointer, by) in origins {
                    let value = rule["conf"].pointer(&pointer).map(text).unwrap_or_default();
                    rows.push([
                        format!("  {}", target(&rule["target"], r.kind)),
                        pointer,
                        value,
                        text(&by),
                    ]);
                }
            }
            out.push_str(&aligned(&rows));
        }
        out.push('\n');
    }
    out
}

/// A rule's target: `Mesh`, `MeshService backend`, `MeshSubset version=v2`,
/// or a `rules[]` entry's `matches` as JSON.
fn target(key: &Value, kind: Kind) -> String {
    let Some(kind_name) = key["kind"].as_str() else {
        return if key.is_null() {
            "every client".to_string()
        } else {
            format!("{kind} matches {key}")
        };
    };
    let mut parts = vec![kind_name.to_string()];
    if let Some(name) = key["name"].as_str() {
        parts.push(name.to_string());
    }
    if let Some(tags) = key["tags"].as_object() {
        parts.extend(tags.iter().map(|(k, v)| format!("{k}={}", text(v))));
    }
    if let Some(section) = key["sectionName"].as_str() {
        parts.push(format!("section {section}"));
    }
    parts.join(" ")
}
