//! Kubernetes `apiVersion: v1` Secrets (`kind: Secret`): `type:
//! kubernetes.io/tls` (how Skupper names TLS credentials, and what a grant
//! redemption returns), and Kuma's `type: system.kuma.io/secret` (mesh from
//! the `kuma.io/mesh` label) and `system.kuma.io/global-secret`.
//!
//! Owns moving `type`/`data` under `spec`, converting `stringData` (PEM
//! text) to base64 `data` (a key in both takes the `stringData` value, as
//! Kubernetes does), and the Kuma mesh label. It never checks the values
//! (the typed Secret does) and never accepts another `v1` kind.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::{Family, Translated, canonical, kubernetes_metadata};
use crate::spec::{KUMA_GLOBAL_SECRET_TYPE, KUMA_SECRET_TYPE};
use crate::{FieldError, Kind};

/// The label Kuma on Kubernetes uses to place a Secret in a mesh.
const MESH_LABEL: &str = "kuma.io/mesh";

/// The mesh Kuma on Kubernetes uses when the label is absent.
const DEFAULT_MESH: &str = "default";

/// Translates a `v1` document, which must be a Secret.
pub(crate) fn translate(mut doc: Map<String, Value>) -> Result<Translated, Vec<FieldError>> {
    doc.remove("apiVersion");
    match doc.remove("kind") {
        Some(Value::String(k)) if k == "Secret" => {}
        other => {
            let got = other.map_or_else(|| "nothing".to_string(), |v| v.to_string());
            return Err(vec![FieldError::new(
                "kind",
                format!("apiVersion v1 is accepted for kind: Secret only (got {got})"),
            )]);
        }
    }
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let mut metadata =
        kubernetes_metadata(&mut doc, Kind::Secret, &[Family::Kubernetes], &mut warnings)
            .map_err(|e| vec![e])?;
    let mut spec = Map::new();
    let mut path_map = Vec::new();
    if let Some(t) = doc.remove("type") {
        kuma_mesh(&t, &mut metadata, &mut path_map, &mut errors);
        spec.insert("type".into(), t);
    }
    let mut data = match doc.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => {
            errors.push(FieldError::new(
                "data",
                format!("must be a mapping of key to base64 value, got {other}"),
            ));
            Map::new()
        }
    };
    match doc.remove("stringData") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match v {
                    Value::String(s) => {
                        data.insert(k, Value::String(STANDARD.encode(s)));
                    }
                    other => errors.push(FieldError::new(
                        format!("stringData.{k}"),
                        format!("must be a string (the PEM text), got {other}"),
                    )),
                }
            }
        }
        Some(other) => errors.push(FieldError::new(
            "stringData",
            format!("must be a mapping of key to text, got {other}"),
        )),
    }
    spec.insert("data".into(), Value::Object(data));
    if let Some(Value::Bool(_)) = doc.get("immutable") {
        doc.remove("immutable");
        warnings.push(
            "immutable: not implemented yet and ignored (meshlink accepts it for compatibility)"
                .to_string(),
        );
    }
    for key in doc.keys() {
        errors.push(FieldError::new(
            key.clone(),
            "unknown field; a v1 Secret has apiVersion, kind, metadata, type, data and stringData",
        ));
    }
    Ok(Translated {
        value: canonical(Kind::Secret, metadata, Value::Object(spec)),
        warnings,
        errors,
        path_map,
    })
}

/// For Kuma's types: moves the `kuma.io/mesh` label to `metadata.mesh`
/// (`default` when absent, as Kuma does) for `system.kuma.io/secret`, and
/// refuses the label on a `system.kuma.io/global-secret`.
fn kuma_mesh(
    type_: &Value,
    metadata: &mut Map<String, Value>,
    path_map: &mut Vec<(String, String)>,
    errors: &mut Vec<FieldError>,
) {
    let label_path = format!("metadata.labels[{MESH_LABEL:?}]");
    let label = |metadata: &mut Map<String, Value>| {
        let labels = metadata.get_mut("labels").and_then(Value::as_object_mut)?;
        let v = labels.remove(MESH_LABEL);
        if labels.is_empty() {
            metadata.remove("labels");
        }
        v
    };
    match type_.as_str() {
        Some(KUMA_SECRET_TYPE) => {
            let mesh = label(metadata).unwrap_or_else(|| DEFAULT_MESH.into());
            metadata.insert("mesh".into(), mesh);
            path_map.push(("metadata.mesh".to_string(), label_path));
        }
        Some(KUMA_GLOBAL_SECRET_TYPE) if label(metadata).is_some() => {
            errors.push(FieldError::new(
                label_path,
                format!(
                    "a {KUMA_GLOBAL_SECRET_TYPE} belongs to no mesh; remove the label, or use \
                     type: {KUMA_SECRET_TYPE} for a value in a mesh"
                ),
            ));
        }
        _ => {}
    }
    path_map.push(("spec".to_string(), String::new()));
}
