//! The check every corpus of documented examples goes through: each file
//! applies as `meshlink apply` would (no warning but the allowed ones),
//! is stored as the canonical resource in `stored/`, and that canonical
//! YAML (what `get -o yaml` prints) parses back to the same resource.
//! `UPDATE_CORPUS=1` rewrites the stored files.

use std::path::{Path, PathBuf};

use meshlink_api::{Resource, parse_documents};

/// The one resource `text` holds, parsed and validated as `apply` does;
/// a warning is allowed only if it contains one of `allowed`.
pub(crate) fn apply(name: &str, text: &str, allowed: &[&str]) -> Resource {
    let mut docs = parse_documents(text);
    assert_eq!(docs.len(), 1, "{name}: one document per corpus file");
    let doc = docs.remove(0);
    let unexpected: Vec<_> = doc
        .warnings
        .iter()
        .filter(|w| !allowed.iter().any(|a| w.contains(a)))
        .collect();
    assert!(unexpected.is_empty(), "{name}: warnings {unexpected:?}");
    let resource = doc
        .outcome
        .unwrap_or_else(|e| panic!("{name} was refused: {e:?}"));
    assert!(
        resource.validate().is_empty(),
        "{name}: invalid once parsed"
    );
    resource
}

/// Checks every `*.yaml` of `dir` (at least `min_files`) against its
/// stored canonical form and returns the resources, in file order.
pub(crate) fn check_all(dir: &Path, min_files: usize, allowed: &[&str]) -> Vec<Resource> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= min_files, "corpus is missing: {files:?}");
    let update = std::env::var_os("UPDATE_CORPUS").is_some();
    let mut out = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let resource = apply(&name, &std::fs::read_to_string(&path).unwrap(), allowed);
        let canonical = resource.to_yaml();
        let stored_path = dir.join("stored").join(&name);
        if update {
            std::fs::write(&stored_path, &canonical).unwrap();
        }
        let stored = std::fs::read_to_string(&stored_path)
            .unwrap_or_else(|e| panic!("{}: {e}", stored_path.display()));
        assert_eq!(canonical, stored, "{name}: stored form changed");
        let again = apply(&format!("{name} (canonical)"), &canonical, allowed);
        assert!(
            again.same_desired_state(&resource) && again == resource,
            "{name}: canonical YAML re-parses to a different resource"
        );
        out.push(resource);
    }
    out
}
