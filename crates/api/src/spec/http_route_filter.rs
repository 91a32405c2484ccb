//! MeshHTTPRoute `rules[].default.filters[]`: header modifiers, redirects,
//! URL rewrites and mirrors, as Kuma defines them.
//!
//! Owns the shapes and their validation: the block named by `type` must be
//! set (and no other), header names are tokens without duplicates,
//! redirects use 301/302/303/307/308, hostnames are DNS names and not IPs,
//! a mirror's percentage is 0-100. It decides nothing about how a proxy
//! applies them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Port;
use super::header_match::header_name;
use super::http_route_match::HttpRouteMatch;
use super::route_backend::RouteBackendRef;
use super::string_enum::string_enum;
use super::target_ref::TargetRefKind;
use crate::validate::Errors;

/// Most entries in one `set`, `add` or `remove` list (Kuma's limit).
pub const MAX_HEADER_MODIFICATIONS: usize = 16;

string_enum! {
    /// What a [`Filter`] does.
    pub enum FilterType ("filter type") {
        /// Set, add or remove request headers.
        RequestHeaderModifier = "RequestHeaderModifier",
        /// Set, add or remove response headers.
        ResponseHeaderModifier = "ResponseHeaderModifier",
        /// Answer with a redirect.
        RequestRedirect = "RequestRedirect",
        /// Rewrite the host or path before forwarding.
        URLRewrite = "URLRewrite",
        /// Copy requests to another backend.
        RequestMirror = "RequestMirror",
    }
}

string_enum! {
    /// How a [`PathRewrite`] rewrites the path.
    pub enum PathRewriteType ("path rewrite type") {
        /// Replace the whole path with `replaceFullPath`.
        ReplaceFullPath = "ReplaceFullPath",
        /// Replace the matched prefix with `replacePrefixMatch`.
        ReplacePrefixMatch = "ReplacePrefixMatch",
    }
}

/// One filter; the block named by `type` holds its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Filter {
    /// Which block applies.
    #[serde(rename = "type")]
    pub type_: FilterType,
    /// For `RequestHeaderModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    /// For `ResponseHeaderModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    /// For `RequestRedirect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,
    /// For `URLRewrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
    /// For `RequestMirror`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
}

/// Header changes: `set` replaces, `add` appends, `remove` deletes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifier {
    /// Headers to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<HeaderKeyValue>>,
    /// Headers to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Vec<HeaderKeyValue>>,
    /// Header names to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<Vec<String>>,
}

/// A header name and value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderKeyValue {
    /// The header name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// `requestRedirect`: answer with a `Location` built from these parts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRedirect {
    /// `http` or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// The host to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// How to change the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// The port in `Location`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// 301, 302 (the default), 303, 307 or 308.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i64>,
}

/// A path change for a redirect or rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathRewrite {
    /// Which of the two fields applies.
    #[serde(rename = "type")]
    pub type_: PathRewriteType,
    /// For `ReplaceFullPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_full_path: Option<String>,
    /// For `ReplacePrefixMatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_prefix_match: Option<String>,
}

/// `urlRewrite`: change the request before forwarding it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UrlRewrite {
    /// The new `Host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// How to change the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// Kuma's gateway-only option; refused (meshlink has no MeshGateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_to_backend_hostname: Option<bool>,
}

/// `requestMirror`: copy a share of requests to another backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestMirror {
    /// Percent of requests to mirror, 0-100 (a number or a decimal string,
    /// as Kuma's int-or-string); all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Value>,
    /// Where to send the copies: a `MeshService` or `MeshServiceSubset`.
    pub backend_ref: RouteBackendRef,
}

// === impl Filter ===

impl Filter {
    /// Reports every problem at `at`; `matches` are the rule's, which a
    /// prefix rewrite depends on.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str, matches: &[HttpRouteMatch]) {
        if !self.type_.validate(errs, &format!("{at}.type")) {
            return;
        }
        let blocks = [
            (
                "requestHeaderModifier",
                self.request_header_modifier.is_some(),
            ),
            (
                "responseHeaderModifier",
                self.response_header_modifier.is_some(),
            ),
            ("requestRedirect", self.request_redirect.is_some()),
            ("urlRewrite", self.url_rewrite.is_some()),
            ("requestMirror", self.request_mirror.is_some()),
        ];
        let wanted = match self.type_ {
            FilterType::RequestHeaderModifier => "requestHeaderModifier",
            FilterType::ResponseHeaderModifier => "responseHeaderModifier",
            FilterType::RequestRedirect => "requestRedirect",
            FilterType::URLRewrite => "urlRewrite",
            _ => "requestMirror",
        };
        for (name, set) in blocks {
            match (name == wanted, set) {
                (true, false) => errs.add(
                    format!("{at}.{name}"),
                    format!("required when type is {}", self.type_),
                ),
                (false, true) => errs.add(
                    format!("{at}.{name}"),
                    format!(
                        "not allowed when type is {}; the type names the block that applies",
                        self.type_
                    ),
                ),
                _ => {}
            }
        }
        let all_prefix = !matches.is_empty() && matches.iter().all(HttpRouteMatch::is_path_prefix);
        if let Some(m) = &self.request_header_modifier {
            m.validate(errs, &format!("{at}.requestHeaderModifier"));
        }
        if let Some(m) = &self.response_header_modifier {
            m.validate(errs, &format!("{at}.responseHeaderModifier"));
        }
        if let Some(r) = &self.request_redirect {
            let rat = format!("{at}.requestRedirect");
            if let Some(s) = r.scheme.as_deref()
                && !matches!(s, "http" | "https")
            {
                errs.add(
                    format!("{rat}.scheme"),
                    format!("unknown scheme {s:?}; expected http or https"),
                );
            }
            precise_hostname(errs, &format!("{rat}.hostname"), r.hostname.as_deref());
            if let Some(p) = &r.path {
                p.validate(errs, &format!("{rat}.path"), all_prefix);
            }
            if let Some(port) = r.port {
                port.validate(errs, &format!("{rat}.port"));
            }
            if let Some(code) = r.status_code
                && ![301, 302, 303, 307, 308].contains(&code)
            {
                errs.add(
                    format!("{rat}.statusCode"),
                    format!("must be 301, 302, 303, 307 or 308 (got {code})"),
                );
            }
        }
        if let Some(u) = &self.url_rewrite {
            let uat = format!("{at}.urlRewrite");
            precise_hostname(errs, &format!("{uat}.hostname"), u.hostname.as_deref());
            if let Some(p) = &u.path {
                p.validate(errs, &format!("{uat}.path"), all_prefix);
            }
            if u.host_to_backend_hostname == Some(true) {
                errs.add(
                    format!("{uat}.hostToBackendHostname"),
                    "can only be set with MeshGateway (as in Kuma), which meshlink does not have",
                );
            }
        }
        if let Some(m) = &self.request_mirror {
            let mat = format!("{at}.requestMirror");
            if let Some(p) = &m.percentage {
                percentage(errs, &format!("{mat}.percentage"), p);
            }
            let b = &m.backend_ref;
            b.validate(errs, &format!("{mat}.backendRef"));
            if !matches!(
                b.kind,
                TargetRefKind::MeshService
                    | TargetRefKind::MeshServiceSubset
                    | TargetRefKind::Unknown(_)
            ) {
                errs.add(
                    format!("{mat}.backendRef.kind"),
                    format!("{} is not allowed for a mirror (as in Kuma); expected MeshService or MeshServiceSubset", b.kind),
                );
            }
        }
    }
}

// === impl HeaderModifier ===

impl HeaderModifier {
    fn validate(&self, errs: &mut Errors, at: &str) {
        if self.set.is_none() && self.add.is_none() && self.remove.is_none() {
            errs.add(at, "must have at least one of set, add or remove");
            return;
        }
        let mut seen: Vec<String> = Vec::new();
        let mut check = |errs: &mut Errors, path: String, name: &str| {
            header_name(errs, &path, name);
            let lower = name.to_ascii_lowercase();
            if seen.contains(&lower) {
                errs.add(
                    path,
                    format!("duplicate header name {name:?}: one action per header (as in Kuma)"),
                );
            }
            seen.push(lower);
        };
        for (field, list) in [("set", &self.set), ("add", &self.add)] {
            let list = list.as_deref().unwrap_or_default();
            too_many(errs, &format!("{at}.{field}"), list.len());
            for (i, kv) in list.iter().enumerate() {
                check(errs, format!("{at}.{field}[{i}].name"), &kv.name);
            }
        }
        let remove = self.remove.as_deref().unwrap_or_default();
        too_many(errs, &format!("{at}.remove"), remove.len());
        for (i, name) in remove.iter().enumerate() {
            check(errs, format!("{at}.remove[{i}]"), name);
        }
    }
}

fn too_many(errs: &mut Errors, path: &str, len: usize) {
    if len > MAX_HEADER_MODIFICATIONS {
        errs.add(
            path,
            format!("at most {MAX_HEADER_MODIFICATIONS} entries (got {len})"),
        );
    }
}

// === impl PathRewrite ===

impl PathRewrite {
    fn validate(&self, errs: &mut Errors, at: &str, all_prefix: bool) {
        if !self.type_.validate(errs, &format!("{at}.type")) {
            return;
        }
        let (wanted, other, value) = match self.type_ {
            PathRewriteType::ReplaceFullPath => (
                "replaceFullPath",
                "replacePrefixMatch",
                &self.replace_full_path,
            ),
            _ => (
                "replacePrefixMatch",
                "replaceFullPath",
                &self.replace_prefix_match,
            ),
        };
        let other_set = match self.type_ {
            PathRewriteType::ReplaceFullPath => self.replace_prefix_match.is_some(),
            _ => self.replace_full_path.is_some(),
        };
        if value.is_none() {
            errs.add(
                format!("{at}.{wanted}"),
                format!("required when type is {}", self.type_),
            );
        }
        if other_set {
            errs.add(
                format!("{at}.{other}"),
                format!("not allowed when type is {}", self.type_),
            );
        }
        if self.replace_prefix_match.is_some() && !all_prefix {
            errs.add(
                format!("{at}.replacePrefixMatch"),
                "can only appear if all matches match a path prefix (as in Kuma)",
            );
        }
    }
}

/// A hostname that is a DNS name and not an IP address (Gateway API's
/// `PreciseHostname`).
fn precise_hostname(errs: &mut Errors, path: &str, host: Option<&str>) {
    let Some(host) = host else { return };
    if host.parse::<std::net::IpAddr>().is_ok() {
        errs.add(
            path,
            format!("{host:?} cannot be an IP address; use a hostname"),
        );
        return;
    }
    let mut sub = Errors::default();
    crate::validate::dns_name(&mut sub, path, host);
    if !sub.into_vec().is_empty() {
        errs.add(
            path,
            format!("{host:?} is not a valid hostname: lowercase letters, digits, '-' and '.'"),
        );
    }
}

/// A mirror percentage: a number, or a decimal string, in 0-100.
fn percentage(errs: &mut Errors, path: &str, value: &Value) {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(p) if (0.0..=100.0).contains(&p) => {}
        Some(_) => errs.add(path, format!("must be between 0 and 100 (got {value})")),
        None => errs.add(
            path,
            format!("must be a number between 0 and 100, e.g. 50 or \"12.5\" (got {value})"),
        ),
    }
}
