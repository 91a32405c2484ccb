//! The MeshMetric filter of the proxy's own exposition: the text is cut
//! into families (a family starts at its `# HELP`/`# TYPE`/`# UNIT`
//! line and holds the samples after it) and each family is kept or left
//! out whole by [`MetricsPolicy::keeps`]; unless `includeUnused`, the
//! series that never moved are left out too (a sample at 0; a histogram
//! series whose count is 0, with its buckets and sum), and a family left
//! with none goes whole (Envoy's `usedonly`). Cheap: one pass over the
//! lines, labels compared as text.

use crate::model::metrics::MetricsPolicy;

/// The OpenMetrics end marker.
const EOF: &str = "# EOF";

/// `text` (OpenMetrics, as the registry encodes it) with the families
/// `policy` does not serve left out; the `# EOF` line is kept only when
/// `eof` (the caller may append more text after it).
pub fn filter(text: &str, policy: &MetricsPolicy, eof: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut family: Option<(&str, Vec<&str>)> = None;
    for line in text.lines() {
        if line == EOF {
            continue;
        }
        if let Some(name) = metadata_name(line)
            && family.as_ref().is_none_or(|(current, _)| *current != name)
        {
            if let Some((name, lines)) = family.take() {
                flush(&mut out, policy, name, &lines);
            }
            family = Some((name, Vec::new()));
        }
        match &mut family {
            Some((_, lines)) => lines.push(line),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if let Some((name, lines)) = family {
        flush(&mut out, policy, name, &lines);
    }
    if eof {
        out.push_str(EOF);
        out.push('\n');
    }
    out
}

/// The family a `# HELP`, `# TYPE` or `# UNIT` line describes.
fn metadata_name(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("# HELP ")
        .or_else(|| line.strip_prefix("# TYPE "))
        .or_else(|| line.strip_prefix("# UNIT "))?;
    rest.split(' ').next()
}

/// Writes the family `name` (its `lines`) when `policy` serves it;
/// without `includeUnused`, only its series that moved.
fn flush(out: &mut String, policy: &MetricsPolicy, name: &str, lines: &[&str]) {
    let mut names: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with('#'))
        .map(|s| s.split(['{', ' ']).next().unwrap_or(s))
        .collect();
    names.dedup();
    if !policy.keeps(name, &names) {
        return;
    }
    let unused = if policy.include_unused {
        Vec::new()
    } else {
        unused_series(name, lines)
    };
    let kept: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with('#') || !unused.contains(&series_of(name, l)))
        .copied()
        .collect();
    if kept.iter().all(|l| l.starts_with('#')) && !policy.include_unused {
        return;
    }
    for line in kept {
        out.push_str(line);
        out.push('\n');
    }
}

/// The series of family `family` that never moved, as [`series_of`] names
/// them: a sample at 0, or a histogram's series whose `_count` is 0 (its
/// buckets and sum go with it).
fn unused_series<'a>(family: &str, lines: &[&'a str]) -> Vec<(bool, &'a str)> {
    let count = format!("{family}_count");
    lines
        .iter()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| value(l) == Some(0.0))
        .filter_map(|l| {
            let (sample, labels) = split(l);
            if sample == count {
                Some((true, labels))
            } else if is_histogram_part(family, sample) {
                None
            } else {
                Some((false, *l))
            }
        })
        .collect()
}

/// What identifies the series of a sample line: (true, its labels without
/// `le`) for a histogram's `_bucket`, `_sum` and `_count`, else (false,
/// the whole line).
fn series_of<'a>(family: &str, line: &'a str) -> (bool, &'a str) {
    let (sample, labels) = split(line);
    if is_histogram_part(family, sample) || sample == format!("{family}_count") {
        (true, labels)
    } else {
        (false, line)
    }
}

fn is_histogram_part(family: &str, sample: &str) -> bool {
    sample
        .strip_prefix(family)
        .is_some_and(|suffix| matches!(suffix, "_bucket" | "_sum" | "_count"))
}

/// (sample name, labels with any `le` pair removed) of a sample line;
/// prometheus-client writes `le` first.
fn split(line: &str) -> (&str, &str) {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    let labels = rest
        .strip_prefix('{')
        .and_then(|r| r.split_once('}'))
        .map_or("", |(labels, _)| labels);
    let labels = match labels.strip_prefix("le=\"") {
        Some(after) => after.split_once("\",").map_or("", |(_, rest)| rest),
        None => labels,
    };
    (name, labels)
}

fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metrics::{NameMatch, Profile};

    const TEXT: &str = "\
# HELP meshlink_proxy_connections Connections accepted.
# TYPE meshlink_proxy_connections counter
meshlink_proxy_connections_total{listener=\"in\",direction=\"inbound\"} 3
# HELP meshlink_proxy_xds_updates xDS responses accepted.
# TYPE meshlink_proxy_xds_updates counter
meshlink_proxy_xds_updates_total{type=\"Listener\"} 2
# HELP meshlink_proxy_http_request_duration_seconds Time.
# TYPE meshlink_proxy_http_request_duration_seconds histogram
meshlink_proxy_http_request_duration_seconds_sum{direction=\"inbound\"} 0.0
meshlink_proxy_http_request_duration_seconds_count{direction=\"inbound\"} 0
meshlink_proxy_http_request_duration_seconds_bucket{le=\"+Inf\",direction=\"inbound\"} 0
# HELP meshlink_proxy_rbac_denied Refused.
# TYPE meshlink_proxy_rbac_denied counter
# EOF
";

    fn policy(profiles: Vec<Profile>, include_unused: bool) -> MetricsPolicy {
        MetricsPolicy {
            profiles,
            include_unused,
            ..MetricsPolicy::default()
        }
    }

    #[test]
    fn all_with_unused_serves_the_text_unchanged() {
        assert_eq!(filter(TEXT, &policy(vec![Profile::All], true), true), TEXT);
    }

    #[test]
    fn basic_leaves_out_hidden_families_whole() {
        let out = filter(TEXT, &policy(vec![Profile::Basic], true), true);
        assert!(!out.contains("xds_updates"), "{out}");
        assert!(out.contains("meshlink_proxy_connections_total{"), "{out}");
        assert!(out.contains("# TYPE meshlink_proxy_http_request_duration_seconds histogram"));
        assert!(out.ends_with("# EOF\n"));
    }

    #[test]
    fn unused_series_are_left_out_and_used_ones_of_the_same_family_kept() {
        let text = "\
# TYPE meshlink_proxy_upstream_connect_failures counter
meshlink_proxy_upstream_connect_failures_total{cluster=\"a\"} 0
meshlink_proxy_upstream_connect_failures_total{cluster=\"b\"} 2
# TYPE meshlink_proxy_http_request_duration_seconds histogram
meshlink_proxy_http_request_duration_seconds_sum{direction=\"inbound\"} 0.5
meshlink_proxy_http_request_duration_seconds_count{direction=\"inbound\"} 1
meshlink_proxy_http_request_duration_seconds_bucket{le=\"0.1\",direction=\"inbound\"} 0
meshlink_proxy_http_request_duration_seconds_bucket{le=\"+Inf\",direction=\"inbound\"} 1
meshlink_proxy_http_request_duration_seconds_sum{direction=\"outbound\"} 0.0
meshlink_proxy_http_request_duration_seconds_count{direction=\"outbound\"} 0
meshlink_proxy_http_request_duration_seconds_bucket{le=\"0.1\",direction=\"outbound\"} 0
meshlink_proxy_http_request_duration_seconds_bucket{le=\"+Inf\",direction=\"outbound\"} 0
";
        let out = filter(text, &policy(Vec::new(), false), false);
        assert!(!out.contains("cluster=\"a\""), "{out}");
        assert!(out.contains("cluster=\"b\"} 2"), "{out}");
        assert!(!out.contains("outbound"), "{out}");
        assert!(
            out.contains("_bucket{le=\"0.1\",direction=\"inbound\"} 0"),
            "a used histogram keeps its empty buckets: {out}"
        );
    }

    #[test]
    fn unused_families_are_left_out_unless_include_unused() {
        let out = filter(TEXT, &policy(Vec::new(), false), false);
        assert!(!out.contains("duration_seconds"), "{out}");
        assert!(!out.contains("rbac_denied"), "{out}");
        assert!(!out.contains("# EOF"), "{out}");
        assert!(out.contains("meshlink_proxy_xds_updates_total{type=\"Listener\"} 2"));
    }

    #[test]
    fn exclude_and_include_match_sample_names_too() {
        let mut p = policy(vec![Profile::Basic], true);
        p.exclude = vec![NameMatch::Exact("meshlink_proxy_connections_total".into())];
        p.include = vec![NameMatch::Prefix("meshlink_proxy_xds_".into())];
        let out = filter(TEXT, &p, true);
        assert!(!out.contains("meshlink_proxy_connections"), "{out}");
        assert!(out.contains("meshlink_proxy_xds_updates_total"), "{out}");
    }
}
