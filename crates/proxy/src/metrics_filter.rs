//! The MeshMetric filter of the proxy's own exposition: the text is cut
//! into families (a family starts at its `# HELP`/`# TYPE`/`# UNIT`
//! line and holds the samples after it) and each family is kept or left
//! out whole by [`MetricsPolicy::keeps`], and, unless `includeUnused`,
//! left out when every one of its samples is 0 (Envoy's `usedonly`, per
//! family). Cheap: one pass over the lines, no parsing of labels.

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

/// Writes the family `name` (its `lines`) when `policy` serves it.
fn flush(out: &mut String, policy: &MetricsPolicy, name: &str, lines: &[&str]) {
    let samples: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with('#'))
        .copied()
        .collect();
    let mut names: Vec<&str> = samples
        .iter()
        .map(|s| s.split(['{', ' ']).next().unwrap_or(s))
        .collect();
    names.dedup();
    if !policy.keeps(name, &names) {
        return;
    }
    let unused = samples.iter().all(|s| {
        s.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v == 0.0)
    });
    if unused && !policy.include_unused {
        return;
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
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
