//! Equality-based label selectors, as in Kubernetes: `a=b,c!=d,e,!f`.
//!
//! Owns parsing a selector string and matching it against an object's
//! labels. It must never touch the database: backends filter in Rust after
//! their SQL query, so both backends agree on the semantics by construction.

use std::collections::BTreeMap;
use std::fmt;

/// An equality-based label selector: comma-separated requirements, all of
/// which must hold.
///
/// | requirement | matches when |
/// |---|---|
/// | `key=value` or `key==value` | the label is present with that value |
/// | `key!=value` | the label is absent or has another value |
/// | `key` | the label is present (any value) |
/// | `!key` | the label is absent |
///
/// The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong, and how to write it instead.
    pub reason: String,
}

// === impl LabelSelector ===

impl LabelSelector {
    /// Parses a selector such as `app=web,tier!=db,canary,!legacy`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let fail = |reason: String| SelectorError {
            selector: s.to_string(),
            reason,
        };
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for (index, part) in s.split(',').enumerate() {
            let part = part.trim();
            if part.is_empty() {
                return Err(fail(format!(
                    "requirement {} is empty; separate requirements with single commas, e.g. a=b,c!=d",
                    index + 1
                )));
            }
            requirements.push(Requirement::parse(part).map_err(fail)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether this selector matches everything (it has no requirements).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form, which [`LabelSelector::parse`] accepts back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::NotExists(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

// === impl Requirement ===

impl Requirement {
    fn parse(part: &str) -> Result<Self, String> {
        if let Some((key, value)) = part.split_once("!=") {
            let (key, value) = (
                check_key(key.trim())?,
                check_value(key.trim(), value.trim())?,
            );
            return Ok(Requirement::NotEquals(key, value));
        }
        if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
            let (key, value) = (
                check_key(key.trim())?,
                check_value(key.trim(), value.trim())?,
            );
            return Ok(Requirement::Equals(key, value));
        }
        if let Some(key) = part.strip_prefix('!') {
            return Ok(Requirement::NotExists(check_key(key.trim())?));
        }
        let words: Vec<&str> = part.split_whitespace().collect();
        if words.len() > 1 && matches!(words[1], "in" | "notin") {
            return Err(format!(
                "set-based requirement {part:?} is not supported; use one equality per label, e.g. {}=VALUE",
                words[0]
            ));
        }
        Ok(Requirement::Exists(check_key(part)?))
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        }
    }
}

/// Label keys: an optional DNS-style prefix and a name, e.g.
/// `kuma.io/service`: letters, digits, `-`, `_`, `.` and one `/`.
fn check_key(key: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err(
            "a requirement has an empty label key; write key=value, key!=value, key or !key".into(),
        );
    }
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || name.contains('/') {
                return Err(format!(
                    "label key {key:?} must be NAME or PREFIX/NAME with one '/', e.g. kuma.io/service"
                ));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "label key {key:?}: the name part must be 1 to 63 characters"
        ));
    }
    if let Some(c) = key.chars().find(|c| !is_label_char(*c) && *c != '/') {
        return Err(format!(
            "label key {key:?} contains {c:?}; use letters, digits, '-', '_', '.' and one '/'"
        ));
    }
    Ok(key.to_string())
}

/// Label values: up to 63 of letters, digits, `-`, `_`, `.` (may be empty).
fn check_value(key: &str, value: &str) -> Result<String, String> {
    if value.len() > 63 {
        return Err(format!(
            "the value for label {key:?} is longer than 63 characters"
        ));
    }
    if let Some(c) = value.chars().find(|c| !is_label_char(*c)) {
        return Err(format!(
            "the value {value:?} for label {key:?} contains {c:?}; use letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(value.to_string())
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn all_requirement_forms_match_as_documented() {
        let s = LabelSelector::parse("app=web, tier!=db,canary,!legacy,zone==a").unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("canary", ""), ("zone", "a")])));
        assert!(s.matches(&labels(&[
            ("app", "web"),
            ("canary", "1"),
            ("zone", "a"),
            ("tier", "fe")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("canary", "1"),
            ("zone", "a"),
            ("tier", "db")
        ])));
        assert!(!s.matches(&labels(&[("app", "api"), ("canary", "1"), ("zone", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("zone", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("canary", "1"),
            ("zone", "a"),
            ("legacy", "x")
        ])));
        assert_eq!(s.to_string(), "app=web,tier!=db,canary,!legacy,zone=a");
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn empty_selector_matches_everything_and_prefixed_keys_work() {
        let empty = LabelSelector::parse("  ").unwrap();
        assert!(empty.is_empty());
        assert!(empty.matches(&labels(&[("a", "b")])));
        let s = LabelSelector::parse("kuma.io/service=web_80,x=").unwrap();
        assert!(s.matches(&labels(&[("kuma.io/service", "web_80"), ("x", "")])));
        assert!(!s.matches(&labels(&[("kuma.io/service", "web_80"), ("x", "y")])));
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            ("a=b,,c", "requirement 2 is empty"),
            ("=b", "empty label key"),
            ("a b=c", "contains ' '"),
            ("a=b c", "contains ' '"),
            ("env in (a,b)", "set-based requirement"),
            ("a/b/c=d", "one '/'"),
            ("!", "empty label key"),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(input).unwrap_err();
            assert_eq!(err.selector, input);
            assert!(err.to_string().contains(want), "{input:?}: {err}");
        }
        let long = format!("a={}", "v".repeat(64));
        assert!(
            LabelSelector::parse(&long)
                .unwrap_err()
                .reason
                .contains("longer than 63")
        );
    }
}
