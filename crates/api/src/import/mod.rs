//! Translation of foreign documents (Kuma, Skupper) to canonical JSON.
//!
//! Owns the single list of fields that foreign formats define but meshlink
//! does not implement ([`IGNORED_FIELDS`]): they are accepted, dropped and
//! reported as warnings. Also owns mapping canonical error paths back to the
//! paths the user wrote. It never validates semantics (the typed resource
//! does) and never drops a field that is not on the list: anything unknown
//! stays in the document so canonical parsing reports it with its path.

use serde_json::{Map, Value};

use crate::{FieldError, Kind};

pub(crate) mod kuma;
pub(crate) mod kuma_secret;
pub(crate) mod secret;
pub(crate) mod skupper;

/// A group of source formats an ignored-field rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Kuma universal and `kuma.io/v1alpha1`.
    Kuma,
    /// Kuma universal only.
    KumaUniversal,
    /// Every Kubernetes-style format (`kuma.io/v1alpha1`, `skupper.io/*`, `v1`).
    Kubernetes,
    /// `skupper.io/v2alpha1` and `skupper.io/v1alpha1`.
    Skupper,
}

/// Where an ignored field's path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// At the document root.
    Document,
    /// Inside the spec body: the document root for Kuma universal Mesh and
    /// Dataplane, `spec` everywhere else.
    Spec,
}

/// A field a source format defines that meshlink accepts but ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IgnoredField {
    /// Formats it applies to.
    pub family: Family,
    /// Kinds it applies to; empty means every kind.
    pub kinds: &'static [Kind],
    /// Where `path` starts.
    pub scope: Scope,
    /// Dotted path; `[]` marks "every element of this list".
    pub path: &'static str,
}

const fn f(
    family: Family,
    kinds: &'static [Kind],
    scope: Scope,
    path: &'static str,
) -> IgnoredField {
    IgnoredField {
        family,
        kinds,
        scope,
        path,
    }
}

use Family::{Kubernetes, Kuma, KumaUniversal, Skupper};
use Scope::{Document, Spec};

const MESH: &[Kind] = &[Kind::Mesh];
const DP: &[Kind] = &[Kind::Dataplane];
const MSVC: &[Kind] = &[Kind::MeshService];
const ALL: &[Kind] = &[];

/// Every accepted-but-ignored field; the CLI prints a warning for each one
/// present in a document, and docs/resources.md lists them.
pub const IGNORED_FIELDS: &[IgnoredField] = &[
    f(Kuma, MESH, Spec, "metrics"),
    f(Kuma, MESH, Spec, "tracing"),
    f(Kuma, MESH, Spec, "logging"),
    f(Kuma, MESH, Spec, "routing"),
    f(Kuma, MESH, Spec, "constraints"),
    f(Kuma, MESH, Spec, "skipCreatingInitialPolicies"),
    f(Kuma, MESH, Spec, "mtls.skipValidation"),
    f(Kuma, MESH, Spec, "mtls.backends[].mode"),
    f(Kuma, MESH, Spec, "mtls.backends[].rootChain"),
    f(Kuma, MESH, Spec, "mtls.backends[].dpCert.requestTimeout"),
    f(Kuma, MESH, Spec, "mtls.backends[].conf.caCert.RSAbits"),
    f(
        Kuma,
        DP,
        Spec,
        "networking.transparentProxying.directAccessServices",
    ),
    f(
        Kuma,
        DP,
        Spec,
        "networking.transparentProxying.reachableBackends",
    ),
    f(
        Kuma,
        DP,
        Spec,
        "networking.transparentProxying.redirectPortInboundV6",
    ),
    f(Kuma, DP, Spec, "networking.inbound[].serviceProbe"),
    f(Kuma, DP, Spec, "networking.inbound[].state"),
    f(Kuma, DP, Spec, "metrics"),
    f(Kuma, DP, Spec, "probes"),
    f(Kuma, MSVC, Spec, "state"),
    f(KumaUniversal, MSVC, Document, "status"),
    f(KumaUniversal, ALL, Document, "creationTime"),
    f(KumaUniversal, ALL, Document, "modificationTime"),
    f(Kubernetes, ALL, Document, "metadata.namespace"),
    f(Kubernetes, ALL, Document, "metadata.annotations"),
    f(Kubernetes, ALL, Document, "metadata.uid"),
    f(Kubernetes, ALL, Document, "metadata.creationTimestamp"),
    f(Kubernetes, ALL, Document, "metadata.resourceVersion"),
    f(Kubernetes, ALL, Document, "metadata.generation"),
    f(Kubernetes, ALL, Document, "metadata.managedFields"),
    f(Kubernetes, ALL, Document, "metadata.finalizers"),
    f(Kubernetes, ALL, Document, "metadata.ownerReferences"),
    f(Kubernetes, ALL, Document, "status"),
    f(Skupper, ALL, Spec, "settings"),
    f(Skupper, &[Kind::Site], Spec, "ha"),
    f(Skupper, &[Kind::Site], Spec, "serviceAccount"),
    f(Skupper, &[Kind::Connector], Spec, "useClientCert"),
    f(
        Skupper,
        &[Kind::Connector, Kind::Listener],
        Spec,
        "exposePodsByName",
    ),
    f(
        Skupper,
        &[Kind::Connector, Kind::Listener, Kind::MultiKeyListener],
        Spec,
        "tlsCredentials",
    ),
    f(
        Skupper,
        &[Kind::MultiKeyListener],
        Spec,
        "requireClientCert",
    ),
    f(Skupper, &[Kind::Link], Spec, "noClientAuth"),
];

/// A foreign document translated to canonical JSON.
#[derive(Debug)]
pub(crate) struct Translated {
    /// Canonical JSON, to be parsed and validated as a [`crate::Resource`].
    pub(crate) value: Value,
    /// One message per ignored field present.
    pub(crate) warnings: Vec<String>,
    /// Problems found during translation (paths as the user wrote them).
    pub(crate) errors: Vec<FieldError>,
    /// Canonical path prefix to source path prefix, first match wins.
    pub(crate) path_map: Vec<(String, String)>,
}

// === impl Translated ===

impl Translated {
    /// Rewrites a canonical error path to the path in the source document.
    pub(crate) fn source_path(&self, canonical: &str) -> String {
        for (from, to) in &self.path_map {
            let Some(rest) = canonical.strip_prefix(from.as_str()) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')) {
                continue;
            }
            return match (to.is_empty(), rest.strip_prefix('.')) {
                (true, Some(r)) => r.to_string(),
                _ => format!("{to}{rest}"),
            };
        }
        canonical.to_string()
    }
}

/// Removes every ignored field of `family`/`kind` and `scope` from `root`,
/// warning with `prefix` + the concrete path (indexes filled in).
pub(crate) fn strip_ignored(
    root: &mut Map<String, Value>,
    families: &[Family],
    kind: Kind,
    scope: Scope,
    prefix: &str,
    warnings: &mut Vec<String>,
) {
    for rule in IGNORED_FIELDS {
        let applies = families.contains(&rule.family)
            && rule.scope == scope
            && (rule.kinds.is_empty() || rule.kinds.contains(&kind));
        if applies {
            let segs: Vec<&str> = rule.path.split('.').collect();
            strip_path(root, &segs, prefix, warnings);
        }
    }
}

fn strip_path(obj: &mut Map<String, Value>, segs: &[&str], at: &str, warnings: &mut Vec<String>) {
    let Some((first, rest)) = segs.split_first() else {
        return;
    };
    let (key, each) = match first.strip_suffix("[]") {
        Some(k) => (k, true),
        None => (*first, false),
    };
    let path = if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    };
    if rest.is_empty() {
        if obj.remove(key).is_some() {
            warnings.push(format!(
                "{path}: not implemented yet and ignored (meshlink accepts it for compatibility)"
            ));
        }
        return;
    }
    match obj.get_mut(key) {
        Some(Value::Array(items)) if each => {
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(o) = item {
                    strip_path(o, rest, &format!("{path}[{i}]"), warnings);
                }
            }
        }
        Some(Value::Object(o)) if !each => strip_path(o, rest, &path, warnings),
        _ => {}
    }
}

/// Moves `key` from `from` to `to` when present.
pub(crate) fn take_into(from: &mut Map<String, Value>, key: &str, to: &mut Map<String, Value>) {
    if let Some(v) = from.remove(key) {
        to.insert(key.to_string(), v);
    }
}

/// Builds a canonical document from its parts.
pub(crate) fn canonical(kind: Kind, metadata: Map<String, Value>, spec: Value) -> Value {
    let mut doc = Map::new();
    doc.insert("apiVersion".into(), crate::API_VERSION.into());
    doc.insert("kind".into(), kind.as_str().into());
    doc.insert("metadata".into(), Value::Object(metadata));
    doc.insert("spec".into(), spec);
    Value::Object(doc)
}

/// Takes Kubernetes-style `metadata` out of `doc` after dropping the ignored
/// document-level fields. Unknown metadata keys stay, so canonical parsing
/// names them.
pub(crate) fn kubernetes_metadata(
    doc: &mut Map<String, Value>,
    kind: Kind,
    families: &[Family],
    warnings: &mut Vec<String>,
) -> Result<Map<String, Value>, FieldError> {
    strip_ignored(doc, families, kind, Scope::Document, "", warnings);
    match doc.remove("metadata") {
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(FieldError::new(
            "metadata",
            "must be a mapping with name (and optionally labels)",
        )),
        None => Err(FieldError::new(
            "metadata",
            "missing; metadata.name is required",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_listed_fields_with_indexes() {
        let mut doc = serde_json::json!({
            "mtls": {"backends": [{"name": "a", "mode": "STRICT"}, {"name": "b"}, {"name": "c", "mode": "PERMISSIVE"}]},
            "metrics": {},
            "unknown": 1,
        });
        let obj = doc.as_object_mut().unwrap();
        let mut w = Vec::new();
        strip_ignored(obj, &[Kuma], Kind::Mesh, Spec, "", &mut w);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w.iter()
                .any(|m| m.starts_with("metrics: not implemented yet"))
        );
        assert!(w.iter().any(|m| m.starts_with("mtls.backends[0].mode:")));
        assert!(w.iter().any(|m| m.starts_with("mtls.backends[2].mode:")));
        assert!(obj.contains_key("unknown"));
        assert!(
            !obj["mtls"]["backends"][0]
                .as_object()
                .unwrap()
                .contains_key("mode")
        );
    }

    #[test]
    fn maps_paths_back() {
        let t = Translated {
            value: Value::Null,
            warnings: vec![],
            errors: vec![],
            path_map: vec![
                ("metadata.name".into(), "name".into()),
                ("spec".into(), String::new()),
            ],
        };
        assert_eq!(
            t.source_path("spec.mtls.backends[0].type"),
            "mtls.backends[0].type"
        );
        assert_eq!(t.source_path("metadata.name"), "name");
        assert_eq!(t.source_path("metadata.names"), "metadata.names");
        assert_eq!(t.source_path("spec"), "");
    }
}
