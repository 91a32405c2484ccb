//! Validation rules shared by all kinds: metadata, names, hosts, ports,
//! durations and labels.
//!
//! Owns the syntax rules and their error wording. Every check appends to an
//! [`Errors`] list instead of returning early, so a document reports all of
//! its problems at once. It must never drop an error or invent a default.

use std::net::IpAddr;
use std::time::Duration;

use crate::{FieldError, Kind, Metadata};

/// Longest accepted resource name (a DNS subdomain).
pub(crate) const MAX_NAME_LEN: usize = 253;

/// Collects every problem found in one document.
#[derive(Debug, Default)]
pub(crate) struct Errors(Vec<FieldError>);

// === impl Errors ===

impl Errors {
    /// Records a problem at `path`.
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(path, message));
    }

    /// Every problem recorded, in the order found.
    pub(crate) fn into_vec(self) -> Vec<FieldError> {
        self.0
    }
}

/// Validates metadata: name syntax, mesh present exactly for mesh-scoped
/// kinds, labels.
pub(crate) fn metadata(kind: Kind, meta: &Metadata) -> Vec<FieldError> {
    let mut errs = Errors::default();
    if meta.name.is_empty() {
        errs.add("metadata.name", "required");
    } else {
        dns_name(&mut errs, "metadata.name", &meta.name);
    }
    match (&meta.mesh, kind.is_mesh_scoped()) {
        (None, true) => errs.add(
            "metadata.mesh",
            format!("required: a {kind} belongs to a mesh; set metadata.mesh to the Mesh's name"),
        ),
        // A Secret's type decides whether it has a mesh (checked with its spec).
        (Some(mesh), false) if kind.allows_mesh() => mesh_name(&mut errs, "metadata.mesh", mesh),
        (Some(_), false) => errs.add(
            "metadata.mesh",
            format!("not allowed: a {kind} does not belong to a mesh; remove metadata.mesh"),
        ),
        (Some(mesh), true) => mesh_name(&mut errs, "metadata.mesh", mesh),
        (None, false) => {}
    }
    if kind == Kind::Mesh && meta.name.contains('.') {
        errs.add(
            "metadata.name",
            format!("mesh names may not contain '.' (got {:?})", meta.name),
        );
    }
    for (key, value) in &meta.labels {
        label(&mut errs, &format!("metadata.labels[{key:?}]"), key, value);
    }
    errs.into_vec()
}

/// A resource name: lowercase letters, digits, `-` and `.`, starting and
/// ending with a letter or digit, at most 253 characters.
pub(crate) fn dns_name(errs: &mut Errors, path: &str, name: &str) {
    if name.len() > MAX_NAME_LEN {
        errs.add(
            path,
            format!(
                "{name:?} is {} characters; at most {MAX_NAME_LEN} are allowed",
                name.len()
            ),
        );
        return;
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ok_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ok_chars || !ok_ends {
        errs.add(
            path,
            format!(
                "invalid name {name:?}: use lowercase letters, digits, '-' and '.', \
                 starting and ending with a letter or digit"
            ),
        );
    }
}

/// A mesh name: a resource name without dots (proxy node ids are `<mesh>.<name>`).
pub(crate) fn mesh_name(errs: &mut Errors, path: &str, mesh: &str) {
    if mesh.is_empty() {
        errs.add(path, "must not be empty");
        return;
    }
    dns_name(errs, path, mesh);
    if mesh.contains('.') {
        errs.add(
            path,
            format!("mesh names may not contain '.' (got {mesh:?})"),
        );
    }
}

/// A label: key `[prefix/]name`, value up to 63 characters of `[A-Za-z0-9-_.]`.
pub(crate) fn label(errs: &mut Errors, path: &str, key: &str, value: &str) {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty() && name.len() <= 63 && label_chars(name);
    let prefix_ok = prefix.is_none_or(|p| {
        let mut sub = Errors::default();
        dns_name(&mut sub, "", p);
        !p.is_empty() && sub.0.is_empty()
    });
    if !name_ok || !prefix_ok {
        errs.add(
            path,
            format!(
                "invalid label key {key:?}: use an optional DNS prefix and '/', then up to 63 \
                 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"
            ),
        );
    }
    if value.len() > 63 || !(value.is_empty() || label_chars(value)) {
        errs.add(
            path,
            format!(
                "invalid label value {value:?}: up to 63 letters, digits, '-', '_' or '.', \
                 starting and ending with a letter or digit"
            ),
        );
    }
}

fn label_chars(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Whether `s` is a DNS label (RFC 1123): lowercase letters, digits and
/// `-`, starting and ending with a letter or digit, at most 63 characters.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A host: an IP address or a DNS hostname (letters, digits, `-`, dots).
pub(crate) fn host(errs: &mut Errors, path: &str, host: &str) {
    if host.is_empty() {
        errs.add(path, "required: an IP address or hostname");
        return;
    }
    if host.parse::<IpAddr>().is_ok() {
        return;
    }
    let labels_ok = host.len() <= MAX_NAME_LEN
        && host.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !labels_ok {
        errs.add(
            path,
            format!("{host:?} is neither an IP address nor a valid hostname"),
        );
    }
}

/// Parses a humantime duration (`24h`, `30m`, `10s`).
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    humantime::parse_duration(s.trim()).ok()
}

/// Checks a duration string, and that it is at least `min` when given.
pub(crate) fn duration(errs: &mut Errors, path: &str, value: &str, min: Option<Duration>) {
    match parse_duration(value) {
        None => errs.add(
            path,
            format!("unparsable duration {value:?} (e.g. 24h, 30m, 10s)"),
        ),
        Some(d) => {
            if let Some(min) = min
                && d < min
            {
                errs.add(
                    path,
                    format!(
                        "{value:?} is too short; the minimum is {}",
                        humantime::format_duration(min)
                    ),
                );
            }
        }
    }
}

/// A non-empty string field.
pub(crate) fn required(errs: &mut Errors, path: &str, value: &str) -> bool {
    if value.trim().is_empty() {
        errs.add(path, "required: must not be empty");
        false
    } else {
        true
    }
}

/// An integer that must be at least `min`.
pub(crate) fn at_least(errs: &mut Errors, path: &str, value: i64, min: i64) {
    if value < min {
        errs.add(path, format!("must be at least {min} (got {value})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, mesh: Option<&str>) -> Metadata {
        Metadata {
            name: name.into(),
            mesh: mesh.map(Into::into),
            ..Default::default()
        }
    }

    fn paths(errs: &[FieldError]) -> Vec<&str> {
        errs.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn names() {
        assert!(metadata(Kind::Site, &meta("east-1.example", None)).is_empty());
        let errs = metadata(Kind::Site, &meta("East_1", None));
        assert_eq!(paths(&errs), ["metadata.name"]);
        assert!(errs[0].message.contains("lowercase"), "{}", errs[0]);
        let long = "a".repeat(254);
        let errs = metadata(Kind::Site, &meta(&long, None));
        assert!(errs[0].message.contains("at most 253"), "{}", errs[0]);
        let errs = metadata(Kind::Site, &meta("", None));
        assert_eq!(errs[0].to_string(), "metadata.name: required");
    }

    #[test]
    fn mesh_scoping() {
        let errs = metadata(Kind::Dataplane, &meta("dp", None));
        assert_eq!(paths(&errs), ["metadata.mesh"]);
        assert!(errs[0].message.starts_with("required"));
        let errs = metadata(Kind::Site, &meta("s", Some("default")));
        assert_eq!(paths(&errs), ["metadata.mesh"]);
        assert!(errs[0].message.starts_with("not allowed"));
        let errs = metadata(Kind::Dataplane, &meta("dp", Some("a.b")));
        assert_eq!(paths(&errs), ["metadata.mesh"]);
        assert!(errs[0].message.contains("'.'"));
        let errs = metadata(Kind::Mesh, &meta("a.b", None));
        assert_eq!(paths(&errs), ["metadata.name"]);
    }

    #[test]
    fn labels() {
        let mut m = meta("x", None);
        m.labels.insert("kuma.io/zone".into(), "east_1".into());
        m.labels.insert("team".into(), String::new());
        assert!(metadata(Kind::Site, &m).is_empty());
        m.labels.insert("bad key!".into(), "-x".into());
        let errs = metadata(Kind::Site, &m);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].path, r#"metadata.labels["bad key!"]"#);
    }

    #[test]
    fn hosts_and_durations() {
        let mut e = Errors::default();
        host(&mut e, "h", "10.0.0.1");
        host(&mut e, "h", "::1");
        host(&mut e, "h", "backend.svc.local");
        duration(&mut e, "d", "24h", Some(Duration::from_secs(10)));
        assert!(e.0.is_empty(), "{:?}", e.0);
        host(&mut e, "h", "not a host");
        duration(&mut e, "d", "abc", None);
        duration(&mut e, "d", "5s", Some(Duration::from_secs(10)));
        let msgs: Vec<String> = e.0.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                r#"h: "not a host" is neither an IP address nor a valid hostname"#,
                r#"d: unparsable duration "abc" (e.g. 24h, 30m, 10s)"#,
                r#"d: "5s" is too short; the minimum is 10s"#,
            ]
        );
    }
}
