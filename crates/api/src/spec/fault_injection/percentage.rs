//! MeshFaultInjection's value types: a [`Percentage`] as Kuma takes it
//! (an integer, or a decimal in a string: `50`, `"50"`, `"2.5"`), and a
//! [`Bandwidth`] (`50Mbps`).
//!
//! Owns parsing and the wording of their errors. An unquoted decimal
//! (`2.5`) is refused, as Kuma's int-or-string refuses it, with the fix.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::validate::Errors;

/// A percentage as written: an integer or a decimal string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Percentage {
    /// `50`.
    Int(i64),
    /// `"50"`, `"2.5"`.
    Text(String),
}

impl Percentage {
    /// The value in parts per million (`"2.5"` is 25,000; `100` is
    /// 1,000,000), rounded to the nearest; `None` when it is not a number
    /// of 0 to 100.
    pub fn per_million(&self) -> Option<u32> {
        let v = match self {
            Percentage::Int(i) => *i as f64,
            Percentage::Text(s) => {
                let s = s.trim();
                let digits = !s.is_empty()
                    && s.chars().all(|c| c.is_ascii_digit() || c == '.')
                    && s.matches('.').count() <= 1
                    && s != ".";
                if !digits {
                    return None;
                }
                s.parse::<f64>().ok()?
            }
        };
        (0.0..=100.0)
            .contains(&v)
            .then(|| (v * 10_000.0).round() as u32)
    }

    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        if self.per_million().is_none() {
            errs.add(
                at,
                format!(
                    "{} is not a percentage; use a number from 0 to 100, e.g. 50 or \"2.5\"",
                    match self {
                        Percentage::Int(i) => i.to_string(),
                        Percentage::Text(s) => format!("{s:?}"),
                    }
                ),
            );
        }
    }
}

impl<'de> Deserialize<'de> for Percentage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Percentage;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a decimal in quotes, e.g. 50 or \"2.5\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Percentage, E> {
                Ok(Percentage::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Percentage, E> {
                i64::try_from(v)
                    .map(Percentage::Int)
                    .map_err(|_| E::custom(format!("{v} is not a percentage (0-100)")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Percentage, E> {
                Err(E::custom(format!(
                    "put a decimal percentage in quotes, as Kuma requires: \"{v}\""
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Percentage, E> {
                Ok(Percentage::Text(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A bandwidth as Kuma writes it: digits, an optional space, and `Gbps`,
/// `Mbps` or `kbps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bandwidth {
    /// Bits per second.
    pub bits_per_second: u64,
}

impl Bandwidth {
    /// Parses `50Mbps`, `10 kbps`, `1Gbps`; `None` otherwise.
    pub fn parse(text: &str) -> Option<Bandwidth> {
        let (num, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
        let scale: u64 = match unit.strip_prefix(' ').unwrap_or(unit) {
            "Gbps" => 1_000_000_000,
            "Mbps" => 1_000_000,
            "kbps" => 1_000,
            _ => return None,
        };
        let n: u64 = num.parse().ok()?;
        Some(Bandwidth {
            bits_per_second: n.checked_mul(scale)?,
        })
    }

    /// Envoy's `limit_kbps` (KiB per second) for this bandwidth, rounded
    /// up, at least 1.
    pub fn kib_per_second(self) -> u64 {
        self.bits_per_second.div_ceil(8 * 1024).max(1)
    }

    pub(crate) fn check(errs: &mut Errors, at: &str, text: &str) {
        match Bandwidth::parse(text) {
            Some(b) if b.bits_per_second > 0 => {}
            Some(_) => errs.add(at, "must be greater than zero, e.g. 50Mbps"),
            None => errs.add(
                at,
                format!(
                    "{text:?} is not a bandwidth; use a whole number and Gbps, Mbps or kbps, \
                     e.g. 50Mbps or 10kbps"
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_read_as_kuma_writes_them() {
        let p = |v: serde_json::Value| serde_json::from_value::<Percentage>(v);
        assert_eq!(p(50.into()).unwrap().per_million(), Some(500_000));
        assert_eq!(p("50".into()).unwrap().per_million(), Some(500_000));
        assert_eq!(p("2.5".into()).unwrap().per_million(), Some(25_000));
        assert_eq!(p("0.0001".into()).unwrap().per_million(), Some(1));
        assert_eq!(p(100.into()).unwrap().per_million(), Some(1_000_000));
        assert_eq!(p("100.5".into()).unwrap().per_million(), None);
        assert_eq!(p((-1).into()).unwrap().per_million(), None);
        assert_eq!(p("5e1".into()).unwrap().per_million(), None);
        let e = p(serde_json::json!(2.5)).unwrap_err().to_string();
        assert!(e.contains("in quotes") && e.contains("\"2.5\""), "{e}");
    }

    #[test]
    fn bandwidths_convert_to_envoys_kib_per_second() {
        let b = |s| Bandwidth::parse(s).map(Bandwidth::kib_per_second);
        assert_eq!(b("50Mbps"), Some(6_104));
        assert_eq!(b("10 kbps"), Some(2));
        assert_eq!(b("8kbps"), Some(1));
        assert_eq!(b("1Gbps"), Some(122_071));
        assert_eq!(b("10bps"), None);
        assert_eq!(b("50mbps"), None);
        assert_eq!(b("Mbps"), None);
    }
}
