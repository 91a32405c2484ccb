//! Kuma's `HeaderMatch` (`{type, name, value}`), shared by MeshHTTPRoute
//! `matches[].headers` and MeshRetry `retriableRequestHeaders` /
//! `retriableResponseHeaders`, and header names as Kuma defines them.
//!
//! Owns the shape and its validation (a `value` only where the type uses
//! one, regexes compiled with the size limit). It decides nothing about how
//! a proxy compares headers.

use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;
use crate::validate::Errors;

string_enum! {
    /// How a [`HeaderMatch`] compares a header.
    pub enum HeaderMatchType ("header match type") {
        /// The header equals `value` (the default).
        Exact = "Exact",
        /// The header is present, whatever its value.
        Present = "Present",
        /// The header is absent.
        Absent = "Absent",
        /// The header starts with `value`.
        Prefix = "Prefix",
        /// The header matches the regular expression `value` (RE2).
        RegularExpression = "RegularExpression",
    }
}

/// One header condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderMatch {
    /// How to compare (default `Exact`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<HeaderMatchType>,
    /// The header name.
    pub name: String,
    /// What to compare with; not allowed for `Present` and `Absent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

// === impl HeaderMatch ===

impl HeaderMatch {
    /// The match type, `Exact` when unset.
    pub fn effective_type(&self) -> HeaderMatchType {
        self.type_.clone().unwrap_or(HeaderMatchType::Exact)
    }

    /// Reports every problem at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        header_name(errs, &format!("{at}.name"), &self.name);
        let ty = self.effective_type();
        if !ty.validate(errs, &format!("{at}.type")) {
            return;
        }
        let value_path = format!("{at}.value");
        match (ty, self.value.as_deref()) {
            (HeaderMatchType::Present | HeaderMatchType::Absent, Some(_)) => errs.add(
                value_path,
                "must not be set when type is Present or Absent (as in Kuma); remove value",
            ),
            (HeaderMatchType::RegularExpression, Some(re)) => {
                super::regex_check::check(errs, &value_path, re)
            }
            (HeaderMatchType::RegularExpression | HeaderMatchType::Prefix, None) => {
                errs.add(value_path, "required for this match type")
            }
            _ => {}
        }
    }
}

/// An HTTP header name: an RFC 9110 token of at most 256 characters.
pub(crate) fn header_name(errs: &mut Errors, path: &str, name: &str) {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > 256 || !name.bytes().all(token) {
        errs.add(
            path,
            format!(
                "invalid header name {name:?}: use 1-256 letters, digits or !#$%&'*+-.^_`|~ \
                 (e.g. x-request-id)"
            ),
        );
    }
}
