//! Kubernetes `apiVersion: v1` Secrets (`kind: Secret`, `type:
//! kubernetes.io/tls`): how Skupper names TLS credentials, and what a grant
//! redemption returns.
//!
//! Owns moving `type`/`data` under `spec` and converting `stringData` (PEM
//! text) to base64 `data`; a key in both takes the `stringData` value, as
//! Kubernetes does. It never checks the values (the typed Secret does) and
//! never accepts another `v1` kind.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::{Family, Translated, canonical, kubernetes_metadata};
use crate::{FieldError, Kind};

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
    let metadata =
        kubernetes_metadata(&mut doc, Kind::Secret, &[Family::Kubernetes], &mut warnings)
            .map_err(|e| vec![e])?;
    let mut spec = Map::new();
    if let Some(t) = doc.remove("type") {
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
        path_map: vec![("spec".to_string(), String::new())],
    })
}
