//! Skupper documents: `skupper.io/v2alpha1` and `skupper.io/v1alpha1`.
//!
//! Owns the translation of Skupper's envelope and the few shape differences
//! from canonical form: string ports become integers, and v1alpha1's Site
//! `routerMode: interior|edge` becomes `edge: bool`. Specs otherwise pass
//! through; this module must never guess a value it cannot convert exactly.

use serde_json::{Map, Value};

use super::{Family, Scope, Translated, canonical, kubernetes_metadata, strip_ignored};
use crate::{FieldError, Kind};

/// The Skupper kinds meshlink implements.
const SKUPPER_KINDS: [Kind; 8] = [
    Kind::Site,
    Kind::RouterAccess,
    Kind::AccessGrant,
    Kind::AccessToken,
    Kind::Link,
    Kind::Listener,
    Kind::MultiKeyListener,
    Kind::Connector,
];

fn skupper_kind(v: Option<Value>) -> Result<Kind, FieldError> {
    let accepted = "meshlink accepts Site, RouterAccess, AccessGrant, AccessToken, Link, \
                    Listener, MultiKeyListener or Connector";
    match v {
        Some(Value::String(s)) => SKUPPER_KINDS
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                FieldError::new("kind", format!("unknown Skupper kind {s:?}; {accepted}"))
            }),
        Some(other) => Err(FieldError::new(
            "kind",
            format!("must be a string, got {other}; {accepted}"),
        )),
        None => Err(FieldError::new("kind", format!("missing; {accepted}"))),
    }
}

/// Translates a Skupper document; `v1` selects v1alpha1 differences.
pub(crate) fn translate(
    mut doc: Map<String, Value>,
    v1: bool,
) -> Result<Translated, Vec<FieldError>> {
    doc.remove("apiVersion");
    let mut warnings = Vec::new();
    let kind = skupper_kind(doc.remove("kind")).map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    let mut path_map = Vec::new();
    let families = [Family::Skupper, Family::Kubernetes];
    let metadata =
        kubernetes_metadata(&mut doc, kind, &families, &mut warnings).map_err(|e| vec![e])?;
    let mut spec = doc.remove("spec").unwrap_or(Value::Object(Map::new()));
    if let Value::Object(s) = &mut spec {
        strip_ignored(s, &families, kind, Scope::Spec, "spec", &mut warnings);
        match kind {
            Kind::Link => each_port(s, "endpoints"),
            Kind::RouterAccess => each_port(s, "roles"),
            Kind::Listener | Kind::MultiKeyListener => port_to_int(s),
            Kind::Connector => {
                port_to_int(s);
                // v2alpha1 names it includeNotReadyPods; canonical form
                // (and v1alpha1) say includeNotReady.
                if let Some(v) = s.remove("includeNotReadyPods") {
                    s.entry("includeNotReady").or_insert(v);
                    path_map.push((
                        "spec.includeNotReady".to_string(),
                        "spec.includeNotReadyPods".to_string(),
                    ));
                }
            }
            Kind::Site if v1 && router_mode(s, &mut errors) => {
                path_map.push(("spec.edge".to_string(), "spec.routerMode".to_string()));
            }
            _ => {}
        }
    }
    for key in doc.keys() {
        errors.push(FieldError::new(
            key.clone(),
            "unknown field; a Skupper document has apiVersion, kind, metadata and spec",
        ));
    }
    Ok(Translated {
        value: canonical(kind, metadata, spec),
        warnings,
        errors,
        path_map,
    })
}

/// Converts `routerMode` to `edge`; returns whether it did.
fn router_mode(spec: &mut Map<String, Value>, errors: &mut Vec<FieldError>) -> bool {
    let Some(mode) = spec.remove("routerMode") else {
        return false;
    };
    let edge = match mode.as_str() {
        Some("interior") => false,
        Some("edge") => true,
        _ => {
            errors.push(FieldError::new(
                "spec.routerMode",
                format!("unknown router mode {mode}; expected interior or edge"),
            ));
            return false;
        }
    };
    match spec.get("edge") {
        Some(existing) if *existing != Value::Bool(edge) => {
            errors.push(FieldError::new(
                "spec.routerMode",
                format!("{mode} contradicts edge: {existing}; set only one of them"),
            ));
            false
        }
        _ => {
            spec.insert("edge".into(), Value::Bool(edge));
            true
        }
    }
}

/// Skupper writes ports as strings (`"55671"`) in places; canonical form uses
/// integers. Anything that is not a decimal number is left for canonical
/// parsing to report.
fn port_to_int(obj: &mut Map<String, Value>) {
    if let Some(Value::String(s)) = obj.get("port")
        && let Ok(n) = s.trim().parse::<u64>()
    {
        obj.insert("port".into(), Value::from(n));
    }
}

fn each_port(spec: &mut Map<String, Value>, list: &str) {
    if let Some(Value::Array(items)) = spec.get_mut(list) {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            port_to_int(item);
        }
    }
}
