//! Port numbers in specs.
//!
//! Owns [`Port`]: an integer kept exactly as the user wrote it, so canonical
//! output round-trips, and range-checked (1-65535) by validation rather than
//! by parsing, so an out-of-range port is reported together with every other
//! error of its document. Parsing still rejects anything that is not an
//! integer. This module must never clamp or rewrite the stored value.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::validate::Errors;

/// Lowest valid port.
const MIN: i64 = 1;
/// Highest valid port.
const MAX: i64 = u16::MAX as i64;

/// A port number as written in a spec.
///
/// Any integer deserializes; resource validation ([`crate::Resource::validate`])
/// reports values outside 1-65535 at the field's path. Use [`Port::get`] on
/// validated resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Port(i64);

// === impl Port ===

impl Port {
    /// A port from a valid `u16`.
    pub const fn new(port: u16) -> Port {
        Port(port as i64)
    }

    /// A port holding any integer, e.g. to test validation.
    pub const fn from_raw(value: i64) -> Port {
        Port(value)
    }

    /// The port number. Exact for a validated resource; an out-of-range
    /// value (only possible before validation) saturates to 1 or 65535.
    pub fn get(self) -> u16 {
        self.0.clamp(MIN, MAX) as u16
    }

    /// The integer exactly as written.
    pub const fn raw(self) -> i64 {
        self.0
    }

    /// Whether the value is in 1-65535.
    pub const fn is_valid(self) -> bool {
        MIN <= self.0 && self.0 <= MAX
    }

    /// Reports an out-of-range value at `path`; returns whether it is valid.
    pub(crate) fn validate(self, errs: &mut Errors, path: &str) -> bool {
        if !self.is_valid() {
            errs.add(path, format!("{} is out of range {MIN}-{MAX}", self.0));
        }
        self.is_valid()
    }
}

impl From<u16> for Port {
    fn from(port: u16) -> Port {
        Port::new(port)
    }
}

impl PartialEq<u16> for Port {
    fn eq(&self, other: &u16) -> bool {
        self.0 == i64::from(*other)
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_was_written_and_saturates_only_in_get() {
        for (json, raw, get) in [("80", 80, 80), ("70000", 70000, 65535), ("-1", -1, 1)] {
            let p: Port = serde_json::from_str(json).unwrap();
            assert_eq!(p.raw(), raw);
            assert_eq!(p.get(), get);
            assert_eq!(serde_json::to_string(&p).unwrap(), json);
        }
        assert_eq!(Port::new(65535).get(), 65535);
        assert!(Port::new(1).is_valid() && !Port::new(0).is_valid());
    }

    #[test]
    fn validation_names_the_range() {
        let mut errs = Errors::default();
        assert!(Port::new(443).validate(&mut errs, "p"));
        assert!(!Port::from_raw(0).validate(&mut errs, "p"));
        assert!(!Port::from_raw(65536).validate(&mut errs, "p"));
        let msgs: Vec<String> = errs.into_vec().iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "p: 0 is out of range 1-65535",
                "p: 65536 is out of range 1-65535"
            ]
        );
    }

    #[test]
    fn non_integers_are_structural_errors() {
        let err = serde_json::from_str::<Port>(r#""80""#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"invalid type: string "80", expected i64"#),
            "{err}"
        );
        assert!(serde_json::from_str::<Port>("80.5").is_err());
    }
}
