//! `meshlink apply -f FILE|-`: parse every document, refuse the whole input
//! if any document is invalid, check every document against the server
//! without writing (`POST /api/v1/apply?dryRun=true`: validation, references
//! such as "the mesh exists", `resourceVersion`), refuse the whole input if
//! any fails there, then apply each and report created / configured /
//! unchanged (`--dry-run` stops after the checks and prints what each
//! document would do and how the proxies' L7 rules would change, see
//! `apply_preview`). Secrets go first, then Meshes (each in file order), so a Mesh
//! whose provided CA names a Secret (`secret:`), and the Dataplanes and
//! MeshServices of a Mesh, apply with it from one file in any order.

use std::io::Read;
use std::time::Duration;

use meshlink_api::parse_documents;
use reqwest::Method;

use super::table::text;
use crate::client::{ApiClient, ApiFailure, scope_query};
use crate::failure::Failure;

/// Reads `path` (`-` for stdin) and returns its text and display name.
pub(crate) fn read_input(path: &str) -> Result<(String, String), Failure> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure::BadInput(format!("cannot read standard input: {e}")))?;
        Ok((s, "<stdin>".to_string()))
    } else {
        let s = std::fs::read_to_string(path)
            .map_err(|e| Failure::BadInput(format!("cannot read {path}: {e}")))?;
        Ok((s, path.to_string()))
    }
}

/// Runs `apply`; with `dry_run`, only its checks, what each document would
/// do, and how the proxies' computed L7 rules would change.
pub(crate) async fn run(client: &ApiClient, file: &str, dry_run_only: bool) -> Result<(), Failure> {
    let (text, source) = read_input(file)?;
    let mut docs = parse_documents(&text);
    // Stable: Secrets, then Meshes, then everything else, each in file
    // order: a Mesh may name Secrets (`secret:`) and be listed after what
    // it contains.
    docs.sort_by_key(|d| match d.outcome.as_ref().map(|r| r.kind()) {
        Ok(meshlink_api::Kind::Secret) => 0,
        Ok(meshlink_api::Kind::Mesh) => 1,
        _ => 2,
    });
    let mut errors = Vec::new();
    for d in &docs {
        for w in &d.warnings {
            eprintln!("warning: {source}[{}] {w}", d.index);
        }
        if let Err(errs) = &d.outcome {
            errors.extend(errs.iter().map(|e| e.located(&source, d.index)));
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("error: {e}");
        }
        return Err(Failure::BadInput(format!(
            "{source}: {} error(s); nothing was applied",
            errors.len()
        )));
    }
    if docs.is_empty() {
        return Err(Failure::BadInput(format!("{source}: no resources found")));
    }
    let outcomes = dry_run(client, &source, &docs).await?;
    if dry_run_only {
        let valid: Vec<meshlink_api::Resource> =
            docs.into_iter().filter_map(|d| d.outcome.ok()).collect();
        for (r, outcome) in valid.iter().zip(&outcomes) {
            let name = display_name(r.kind(), r.name(), r.mesh());
            println!("{name} would be {outcome} (dry run)");
        }
        super::apply_preview::print_rule_changes(client, &valid).await?;
        println!("dry run: nothing was applied");
        return Ok(());
    }
    let mut worst: Option<Failure> = None;
    for d in docs {
        let Ok(r) = d.outcome else { continue };
        let name = display_name(r.kind(), r.name(), r.mesh());
        let path = format!("/api/v1/{}/{}", r.kind().plural(), r.name());
        let query = scope_query(r.kind(), r.mesh());
        match client
            .call(
                Method::PUT,
                &path,
                &query,
                Some(&r.to_json()),
                Duration::from_secs(30),
            )
            .await
        {
            Ok(resp) => {
                let result = resp["result"].as_str().unwrap_or("applied");
                println!("{name} {result}");
            }
            Err(ApiFailure::Status { status, fields, .. }) if !fields.is_empty() => {
                for f in &fields {
                    eprintln!("error: {}", f.located(&source, d.index));
                }
                worst = Some(
                    ApiFailure::Status {
                        status,
                        message: format!("{source}[{}] {name} was not applied", d.index),
                        fields,
                    }
                    .into_failure(),
                );
            }
            Err(e) => {
                let f = e.into_failure();
                eprintln!("error: {source}[{}] {name}: {f}", d.index);
                let first_runtime = matches!(f, Failure::Runtime(_));
                worst = Some(f);
                if first_runtime {
                    // The server is unreachable or refusing: stop here.
                    break;
                }
            }
        }
    }
    match worst {
        None => Ok(()),
        Some(Failure::BadInput(_)) => Err(Failure::BadInput(
            "some documents were not applied".to_string(),
        )),
        Some(Failure::Runtime(_)) => Err(Failure::Runtime(
            "some documents were not applied".to_string(),
        )),
    }
}

/// Most documents per dry-run request, and roughly most bytes (the server
/// reads at most 1 MiB per request).
const DRY_RUN_ITEMS: usize = 200;
const DRY_RUN_BYTES: usize = 512 * 1024;

/// Checks every document against the server without writing. Reports every
/// failure and fails if there is any: then nothing is applied. Returns what
/// each valid document would do (`created`, `configured`, `unchanged`), in
/// input order.
async fn dry_run(
    client: &ApiClient,
    source: &str,
    docs: &[meshlink_api::ParsedDocument],
) -> Result<Vec<String>, Failure> {
    let mut chunks: Vec<Vec<(usize, serde_json::Value)>> = vec![Vec::new()];
    let mut bytes = 0;
    for d in docs {
        let Ok(r) = &d.outcome else { continue };
        let json = r.to_json();
        let size = json.to_string().len();
        let last = chunks.last_mut().expect("one chunk");
        if !last.is_empty() && (last.len() >= DRY_RUN_ITEMS || bytes + size > DRY_RUN_BYTES) {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        chunks.last_mut().expect("one chunk").push((d.index, json));
    }
    // Secrets and Meshes of the input are applied before the rest (see
    // `run`), so every valid one counts as present for the others.
    let valid = || docs.iter().filter_map(|d| d.outcome.as_ref().ok());
    let pending_meshes: Vec<String> = valid()
        .filter(|r| r.kind() == meshlink_api::Kind::Mesh)
        .map(|r| r.name().to_string())
        .collect();
    let pending_secrets: Vec<serde_json::Value> = valid()
        .filter(|r| r.kind() == meshlink_api::Kind::Secret)
        .filter_map(|r| Some(serde_json::json!({ "mesh": r.mesh()?, "name": r.name() })))
        .collect();
    let mut errors = 0;
    let mut runtime = false;
    let mut outcomes = Vec::new();
    for chunk in chunks.iter().filter(|c| !c.is_empty()) {
        let items: Vec<_> = chunk.iter().map(|(_, j)| j.clone()).collect();
        let body = serde_json::json!({
            "items": items,
            "pendingMeshes": pending_meshes,
            "pendingSecrets": pending_secrets,
        });
        let resp = client
            .call(
                Method::POST,
                "/api/v1/apply",
                &[("dryRun", "true".to_string())],
                Some(&body),
                Duration::from_secs(60),
            )
            .await
            .map_err(|e| e.into_failure())?;
        let results = resp["items"].as_array().cloned().unwrap_or_default();
        for (pos, (index, json)) in chunk.iter().enumerate() {
            let res = &results.get(pos).cloned().unwrap_or_default();
            let err = &res["error"];
            if err.is_null() {
                outcomes.push(text(&res["result"]));
                continue;
            }
            errors += 1;
            let status = err["status"].as_u64().unwrap_or(0);
            runtime |= !matches!(status, 400 | 422 | 413);
            let fields: Vec<meshlink_api::FieldError> =
                serde_json::from_value(err["fields"].clone()).unwrap_or_default();
            if fields.is_empty() {
                let name = match (json["kind"].as_str(), json["metadata"]["name"].as_str()) {
                    (Some(k), Some(n)) => match k.parse() {
                        Ok(k) => display_name(k, n, json["metadata"]["mesh"].as_str()),
                        Err(_) => format!("{k}/{n}"),
                    },
                    _ => "resource".to_string(),
                };
                eprintln!(
                    "error: {source}[{index}] {name}: {}",
                    err["message"].as_str().unwrap_or("rejected")
                );
            }
            for f in &fields {
                eprintln!("error: {}", f.located(source, *index));
            }
        }
    }
    if errors == 0 {
        return Ok(outcomes);
    }
    let msg = format!(
        "{source}: {errors} document(s) rejected by the control plane; nothing was applied"
    );
    Err(if runtime {
        Failure::Runtime(msg)
    } else {
        Failure::BadInput(msg)
    })
}

/// `kind/name` or `kind/name (mesh m)`, as printed in results.
pub(crate) fn display_name(kind: meshlink_api::Kind, name: &str, mesh: Option<&str>) -> String {
    let k = kind.as_str().to_ascii_lowercase();
    match mesh {
        Some(m) => format!("{k}/{name} (mesh {m})"),
        None => format!("{k}/{name}"),
    }
}
