//! Helpers shared by the api integration tests (not a test target).

#![allow(dead_code)]

pub(crate) mod corpus;

use std::path::PathBuf;

use meshlink_api::{ParsedDocument, parse_documents};
use serde_json::Value;

/// This crate's directory, as the test runner gives it (cargo and nextest
/// set `CARGO_MANIFEST_DIR` when they run a test), else as it was at
/// build time. The runner's is right when a target dir is shared between
/// checkouts at different paths: cargo then reuses a test binary built in
/// the other checkout, whose compile-time path may no longer exist.
pub(crate) fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The canonical JSON of a document that must have parsed.
pub(crate) fn ok(doc: &ParsedDocument) -> Value {
    doc.outcome
        .as_ref()
        .unwrap_or_else(|e| panic!("document {} failed: {e:?}", doc.index))
        .to_json()
}

/// Every error of `text` (one or more documents), without location.
pub(crate) fn errors(text: &str) -> Vec<String> {
    parse_documents(text)
        .into_iter()
        .flat_map(|d| d.outcome.err().unwrap_or_default())
        .map(|e| e.to_string())
        .collect()
}
