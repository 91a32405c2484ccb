//! MeshTrafficPermission `spec.rules`: Kuma's experimental form, which
//! matches clients by SPIFFE ID instead of `from[].targetRef`.
//!
//! Owns the shape (`rules[].default.{allow, allowWithShadowDeny, deny}`,
//! each a list of `{spiffeID: {type: Exact | Prefix, value}}` matches) and
//! its validation. Kuma's `sni` matches are refused: meshlink-proxy does
//! not read the TLS server name when it authorizes a connection. How rules
//! of several policies combine belongs to the translator.

use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;
use crate::validate::Errors;

string_enum! {
    /// How a [`SpiffeIdMatch`] compares a client's SPIFFE ID.
    pub enum SpiffeIdMatchType ("spiffeID match type") {
        /// The client's SPIFFE ID equals `value`.
        Exact = "Exact",
        /// The client's SPIFFE ID starts with `value`.
        Prefix = "Prefix",
    }
}

/// One entry of `spec.rules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionRule {
    /// Who is allowed and denied.
    #[serde(rename = "default")]
    pub default_: RuleConf,
}

/// `spec.rules[].default`: a client matching any `deny` entry is refused;
/// otherwise one matching any `allow` or `allowWithShadowDeny` entry is
/// let in; anyone else is refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleConf {
    /// Clients to refuse.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<ClientMatch>,
    /// Clients to let in while logging that a deny would refuse them
    /// (meshlink lets them in; the shadow log is not implemented).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_with_shadow_deny: Vec<ClientMatch>,
    /// Clients to let in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<ClientMatch>,
}

/// One match of a rule: Kuma's `Match`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientMatch {
    /// The client's SPIFFE ID (required in meshlink).
    #[serde(default, rename = "spiffeID", skip_serializing_if = "Option::is_none")]
    pub spiffe_id: Option<SpiffeIdMatch>,
    /// Kuma's SNI match; refused by validation (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<serde_json::Value>,
}

/// `spiffeID` of a [`ClientMatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpiffeIdMatch {
    /// `Exact` or `Prefix`.
    #[serde(rename = "type")]
    pub type_: SpiffeIdMatchType,
    /// A SPIFFE ID, e.g. `spiffe://example.org/web`.
    pub value: String,
}

// === impl RuleConf ===

impl RuleConf {
    /// The matches that let a client in: `allow`, then
    /// `allowWithShadowDeny`.
    pub fn allowing(&self) -> impl Iterator<Item = &SpiffeIdMatch> {
        self.allow
            .iter()
            .chain(&self.allow_with_shadow_deny)
            .filter_map(|m| m.spiffe_id.as_ref())
    }

    /// The matches that refuse a client.
    pub fn denying(&self) -> impl Iterator<Item = &SpiffeIdMatch> {
        self.deny.iter().filter_map(|m| m.spiffe_id.as_ref())
    }
}

/// Reports every problem of `rules` (at `spec.rules[i]`).
pub(super) fn validate(errs: &mut Errors, rules: &[PermissionRule]) {
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("spec.rules[{i}].default");
        let conf = &rule.default_;
        if conf.deny.is_empty() && conf.allow.is_empty() && conf.allow_with_shadow_deny.is_empty() {
            errs.add(
                &at,
                "at least one of allow, allowWithShadowDeny or deny is required, e.g. allow: \
                 [{spiffeID: {type: Exact, value: spiffe://default/web}}]",
            );
        }
        for (field, matches) in [
            ("deny", &conf.deny),
            ("allowWithShadowDeny", &conf.allow_with_shadow_deny),
            ("allow", &conf.allow),
        ] {
            for (j, m) in matches.iter().enumerate() {
                validate_match(errs, &format!("{at}.{field}[{j}]"), m);
            }
        }
    }
}

/// Validates the `matches` of `spec.rules[i]`.
pub(super) fn validate_rule_matches(
    errs: &mut Errors,
    i: usize,
    matches: Option<&Vec<ClientMatch>>,
) {
    for (j, m) in matches.into_iter().flatten().enumerate() {
        validate_match(errs, &format!("spec.rules[{i}].matches[{j}]"), m);
    }
}

/// Reports every problem of one client match at `at` (also used by
/// MeshTimeout `rules[].matches`).
pub(super) fn validate_match(errs: &mut Errors, at: &str, m: &ClientMatch) {
    if m.sni.is_some() {
        errs.add(
            format!("{at}.sni"),
            "not supported: meshlink-proxy authorizes a connection by the client's SPIFFE ID, \
             not the TLS server name; match with spiffeID instead",
        );
    }
    let Some(id) = &m.spiffe_id else {
        if m.sni.is_none() {
            errs.add(
                format!("{at}.spiffeID"),
                "required: the client's SPIFFE ID to match, e.g. {type: Exact, value: \
                 spiffe://default/web}",
            );
        }
        return;
    };
    id.type_.validate(errs, &format!("{at}.spiffeID.type"));
    if let Err(why) = spiffe_id(&id.value) {
        errs.add(
            format!("{at}.spiffeID.value"),
            format!(
                "{:?} must be a valid SPIFFE ID (as in Kuma): {why}; e.g. spiffe://default/web, \
                 or spiffe://default for a Prefix matching the whole trust domain",
                id.value
            ),
        );
    }
}

/// Checks a SPIFFE ID as the SPIFFE standard (and Kuma) defines it:
/// `spiffe://` + a trust domain of lowercase letters, digits, `.`, `-` and
/// `_`, then an optional path of non-empty segments of letters, digits,
/// `.`, `-` and `_` (not `.` or `..`), with no trailing `/`.
fn spiffe_id(id: &str) -> Result<(), &'static str> {
    let rest = id
        .strip_prefix("spiffe://")
        .ok_or("it must start with spiffe://")?;
    let (domain, path) = match rest.split_once('/') {
        Some((d, p)) => (d, Some(p)),
        None => (rest, None),
    };
    if domain.is_empty() {
        return Err("the trust domain is missing");
    }
    if !domain
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("the trust domain may only hold lowercase letters, digits, '.', '-' and '_'");
    }
    let Some(path) = path else { return Ok(()) };
    for segment in path.split('/') {
        if segment.is_empty() {
            return Err("the path has an empty segment or a trailing '/'");
        }
        if segment == "." || segment == ".." {
            return Err("the path may not hold '.' or '..' segments");
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            return Err("path segments may only hold letters, digits, '.', '-' and '_'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::spiffe_id;

    #[test]
    fn spiffe_ids_follow_the_standard() {
        for ok in [
            "spiffe://default",
            "spiffe://example.org/web",
            "spiffe://example.org/ns/shop/sa/web_1",
        ] {
            assert_eq!(spiffe_id(ok), Ok(()), "{ok}");
        }
        for bad in [
            "web",
            "spiffe://",
            "spiffe://Example.org/web",
            "spiffe://example.org/",
            "spiffe://example.org//web",
            "spiffe://example.org/../web",
            "spiffe://example.org/w%20b",
        ] {
            assert!(spiffe_id(bad).is_err(), "{bad}");
        }
    }
}
