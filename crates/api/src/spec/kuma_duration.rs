//! Kuma's durations: Kubernetes `metav1.Duration`, i.e. Go's
//! `time.ParseDuration` syntax (`5s`, `1h30m`, `0.025s`, `250ms`, `0s`).
//!
//! Owns parsing and the "unparsable duration" wording for policy fields.
//! Values are stored as the user wrote them (so canonical output round-trips);
//! this module only checks them and computes their length. It must never
//! accept a negative duration: no Kuma timeout or interval is negative.

use std::time::Duration;

use crate::validate::Errors;

/// Parses a Go duration: one or more `<decimal><unit>` pairs, units `ns`,
/// `us` (or `µs`), `ms`, `s`, `m`, `h`; `0` alone is zero. `None` when it
/// does not parse, is negative, or overflows.
pub fn parse_kuma_duration(text: &str) -> Option<Duration> {
    let s = text.strip_prefix('+').unwrap_or(text);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_len);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = next;
    }
    // Go's limit: about 292 years.
    (total <= i64::MAX as f64 / 1e9).then(|| Duration::from_secs_f64(total))
}

/// Checks a Kuma duration field at `path`.
pub(crate) fn check(errs: &mut Errors, path: &str, value: &str) -> Option<Duration> {
    let parsed = parse_kuma_duration(value);
    if parsed.is_none() {
        errs.add(
            path,
            format!(
                "unparsable duration {value:?}; use a number and a unit (ns, us, ms, s, m, h), \
                 e.g. 5s, 1h30m, 250ms or 0s"
            ),
        );
    }
    parsed
}

/// Checks an optional duration that must be greater than zero.
pub(crate) fn check_positive(errs: &mut Errors, path: &str, value: Option<&str>) {
    let Some(value) = value else { return };
    if check(errs, path, value).is_some_and(|d| d.is_zero()) {
        errs.add(path, format!("must be greater than zero (got {value:?})"));
    }
}

/// Checks an optional duration field (zero allowed).
pub(crate) fn check_opt(errs: &mut Errors, path: &str, value: Option<&str>) {
    if let Some(v) = value {
        check(errs, path, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let ms = |v: &str| parse_kuma_duration(v).map(|d| d.as_millis());
        assert_eq!(ms("5s"), Some(5_000));
        assert_eq!(ms("1h"), Some(3_600_000));
        assert_eq!(ms("0s"), Some(0));
        assert_eq!(ms("0"), Some(0));
        assert_eq!(ms("250ms"), Some(250));
        assert_eq!(ms("0.025s"), Some(25));
        assert_eq!(ms("1h30m"), Some(5_400_000));
        assert_eq!(ms("20m"), Some(1_200_000));
        for bad in ["", "5", "-1s", "5 s", "1d", "s", "1.2.3s", "5sec", "abc"] {
            assert_eq!(parse_kuma_duration(bad), None, "{bad:?}");
        }
    }
}
