//! `meshlink apply -f FILE|-`: parse every document, refuse the whole input
//! if any document is invalid, then apply each and report
//! created / configured / unchanged.

use std::io::Read;
use std::time::Duration;

use meshlink_api::parse_documents;
use reqwest::Method;

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

/// Runs `apply`.
pub(crate) async fn run(client: &ApiClient, file: &str) -> Result<(), Failure> {
    let (text, source) = read_input(file)?;
    let docs = parse_documents(&text);
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

/// `kind/name` or `kind/name (mesh m)`, as printed in results.
pub(crate) fn display_name(kind: meshlink_api::Kind, name: &str, mesh: Option<&str>) -> String {
    let k = kind.as_str().to_ascii_lowercase();
    match mesh {
        Some(m) => format!("{k}/{name} (mesh {m})"),
        None => format!("{k}/{name}"),
    }
}
