//! MeshHTTPRoute `rules[].matches[]`: path, method, headers and query
//! parameters, as Kuma (and Gateway API) define them.
//!
//! Owns the shapes and their validation: absolute paths, no trailing slash
//! on a prefix, RE2 regexes within the size limit, one condition per query
//! parameter. It decides nothing about match order; that is the proxy's.

use serde::{Deserialize, Serialize};

use super::header_match::HeaderMatch;
use super::string_enum::string_enum;
use crate::validate::Errors;

string_enum! {
    /// How a [`PathMatch`] compares the request path.
    pub enum PathMatchType ("path match type") {
        /// The path equals `value`.
        Exact = "Exact",
        /// The path is `value` or starts with `value` followed by `/`.
        PathPrefix = "PathPrefix",
        /// The path matches the regular expression `value` (RE2).
        RegularExpression = "RegularExpression",
    }
}

string_enum! {
    /// An HTTP method a match requires.
    pub enum HttpMethod ("HTTP method") {
        /// CONNECT.
        Connect = "CONNECT",
        /// DELETE.
        Delete = "DELETE",
        /// GET.
        Get = "GET",
        /// HEAD.
        Head = "HEAD",
        /// OPTIONS.
        Options = "OPTIONS",
        /// PATCH.
        Patch = "PATCH",
        /// POST.
        Post = "POST",
        /// PUT.
        Put = "PUT",
        /// TRACE.
        Trace = "TRACE",
    }
}

string_enum! {
    /// How a [`QueryParamMatch`] compares a query parameter.
    pub enum QueryParamMatchType ("query parameter match type") {
        /// The parameter equals `value`.
        Exact = "Exact",
        /// The parameter matches the regular expression `value` (RE2).
        RegularExpression = "RegularExpression",
    }
}

/// One match: every condition set must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteMatch {
    /// The request path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,
    /// The request method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<HttpMethod>,
    /// Query parameters, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<QueryParamMatch>,
    /// Headers, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
}

/// `matches[].path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` or `RegularExpression`.
    #[serde(rename = "type")]
    pub type_: PathMatchType,
    /// An absolute path, or a regular expression.
    pub value: String,
}

/// `matches[].queryParams[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryParamMatch {
    /// `Exact` or `RegularExpression`.
    #[serde(rename = "type")]
    pub type_: QueryParamMatchType,
    /// The parameter name.
    pub name: String,
    /// The value, or a regular expression.
    pub value: String,
}

// === impl HttpRouteMatch ===

impl HttpRouteMatch {
    /// Whether the match only constrains the path by prefix (what
    /// `replacePrefixMatch` rewrites require).
    pub fn is_path_prefix(&self) -> bool {
        self.path
            .as_ref()
            .is_some_and(|p| p.type_ == PathMatchType::PathPrefix)
    }

    /// Reports every problem at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        if let Some(path) = &self.path {
            path.validate(errs, &format!("{at}.path"));
        }
        if let Some(m) = &self.method {
            m.validate(errs, &format!("{at}.method"));
        }
        let mut seen = Vec::new();
        for (i, q) in self.query_params.iter().enumerate() {
            let qat = format!("{at}.queryParams[{i}]");
            q.type_.validate(errs, &format!("{qat}.type"));
            if q.name.is_empty() {
                errs.add(
                    format!("{qat}.name"),
                    "required: the query parameter's name",
                );
            } else if seen.contains(&q.name.as_str()) {
                errs.add(
                    format!("{qat}.name"),
                    format!(
                        "multiple entries for name {:?} (as in Kuma); combine them into one",
                        q.name
                    ),
                );
            }
            seen.push(q.name.as_str());
            if q.type_ == QueryParamMatchType::RegularExpression {
                super::regex_check::check(errs, &format!("{qat}.value"), &q.value);
            }
        }
        for (i, h) in self.headers.iter().enumerate() {
            h.validate(errs, &format!("{at}.headers[{i}]"));
        }
    }
}

// === impl PathMatch ===

impl PathMatch {
    fn validate(&self, errs: &mut Errors, at: &str) {
        if !self.type_.validate(errs, &format!("{at}.type")) {
            return;
        }
        let path = format!("{at}.value");
        let v = self.value.as_str();
        match self.type_ {
            PathMatchType::RegularExpression => super::regex_check::check(errs, &path, v),
            _ if !v.starts_with('/') => errs.add(
                path,
                format!("{v:?} must be an absolute path, starting with '/'"),
            ),
            PathMatchType::PathPrefix if v != "/" && v.ends_with('/') => errs.add(
                path,
                format!(
                    "{v:?} does not need a trailing slash: a prefix matches whole \
                     '/'-separated segments (as in Kuma); use {:?}",
                    v.trim_end_matches('/')
                ),
            ),
            _ => {}
        }
    }
}
