//! The store conformance suite against the SQLite backend, plus checks
//! specific to the embedded file.

mod conformance;

use conformance::{Harness, conformance_suite};

/// A fresh database file in a new temporary directory.
async fn harness() -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("data/store.db").display());
    Harness::new(url, dir)
}

conformance_suite!(harness());

#[tokio::test]
async fn database_file_is_private_and_parent_dirs_are_created() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/store.db");
    let store = meshlink_store::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(store.backend(), "sqlite");
    conformance::create(&*store, "default", "web").await;
    for file in [path.clone(), path.with_extension("db-wal")] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} mode {mode:o}", file.display());
    }
}

#[tokio::test]
async fn open_explains_unsupported_urls_and_unusable_paths() {
    let err = meshlink_store::open("mysql://localhost/db")
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("use sqlite://PATH or postgres://"),
        "{err}"
    );
    let err = meshlink_store::open("sqlite://").await.err().unwrap();
    assert!(err.to_string().contains("SQLite path is empty"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let err = meshlink_store::open(&format!("sqlite://{}", dir.path().display()))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}
