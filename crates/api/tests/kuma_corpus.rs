//! Kuma's documented targetRef and label shapes, written for this repository
//! (one file per shape in `kuma_corpus/`), apply as they would through
//! `meshlink apply`: each parses and validates with no warning (but the
//! documented ones for a Kubernetes `metadata.namespace`, a `BUILTIN`
//! gateway and a `meshServices.mode` that has Kuma generate MeshServices),
//! is stored as
//! the canonical resource in `kuma_corpus/stored/`, and that canonical YAML
//! (what `get -o yaml` prints) parses back to the same resource.
//!
//! `UPDATE_CORPUS=1 cargo test -p meshlink-api --test kuma_corpus` rewrites
//! the stored files; review the diff.

use std::path::{Path, PathBuf};

use meshlink_api::{Resource, parse_documents};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kuma_corpus")
}

/// The one resource `text` holds, parsed and validated as `apply` does.
fn apply(name: &str, text: &str) -> Resource {
    let mut docs = parse_documents(text);
    assert_eq!(docs.len(), 1, "{name}: one document per corpus file");
    let doc = docs.remove(0);
    // Kubernetes namespaces are not modelled yet (a documented warning).
    let unexpected: Vec<_> = doc
        .warnings
        .iter()
        .filter(|w| !w.starts_with("metadata.namespace: not implemented yet"))
        // A BUILTIN gateway is stored but not served (a documented warning).
        .filter(|w| !w.contains("networking.gateway.type: BUILTIN gateway accepted"))
        .filter(|w| !w.contains("meshlink does not generate MeshServices"))
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

#[test]
fn every_corpus_shape_applies_and_its_canonical_yaml_reapplies_unchanged() {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "corpus is missing: {files:?}");
    let update = std::env::var_os("UPDATE_CORPUS").is_some();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let resource = apply(&name, &std::fs::read_to_string(&path).unwrap());
        let canonical = resource.to_yaml();
        let stored_path = dir.join("stored").join(&name);
        if update {
            std::fs::write(&stored_path, &canonical).unwrap();
        }
        let stored = std::fs::read_to_string(&stored_path)
            .unwrap_or_else(|e| panic!("{}: {e}", stored_path.display()));
        assert_eq!(canonical, stored, "{name}: stored form changed");
        let again = apply(&format!("{name} (canonical)"), &canonical);
        assert!(
            again.same_desired_state(&resource) && again == resource,
            "{name}: canonical YAML re-parses to a different resource"
        );
    }
}

#[test]
fn kuma_universal_dataplane_labels_become_metadata_labels() {
    let dp = apply(
        "dataplane-labels.universal.yaml",
        &std::fs::read_to_string(corpus_dir().join("dataplane-labels.universal.yaml")).unwrap(),
    );
    assert_eq!(dp.labels().get("app").map(String::as_str), Some("ledger"));
    assert_eq!(dp.labels().get("tier").map(String::as_str), Some("core"));
}
