//! Label selectors (skeleton: filled in by the store work).

use std::collections::BTreeMap;

/// An equality-based label selector: `a=b,c!=d,e,!f`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    raw: String,
}

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong.
    pub reason: String,
}

impl LabelSelector {
    /// Parses a selector.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Ok(LabelSelector { raw: s.to_string() })
    }

    /// Whether `labels` match.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let _ = labels;
        true
    }
}
