//! Helpers shared by the api integration tests (not a test target).

#![allow(dead_code)]

pub(crate) mod corpus;

use meshlink_api::{ParsedDocument, parse_documents};
use serde_json::Value;

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
