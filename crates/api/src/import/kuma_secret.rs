//! Kuma universal secrets: `type: Secret` (`name`, `mesh`, `data`) and
//! `type: GlobalSecret` (`name`, `data`), where `data` is one base64 string.
//!
//! Owns moving them to the canonical Secret kind: `data` becomes
//! `spec.data.value` and `type` becomes `system.kuma.io/secret` or
//! `system.kuma.io/global-secret`. It never checks the value (the typed
//! Secret does) and never lets a GlobalSecret carry a mesh.

use serde_json::{Map, Value};

use super::{Family, Scope, Translated, canonical, strip_ignored, take_into};
use crate::spec::{KUMA_GLOBAL_SECRET_TYPE, KUMA_SECRET_TYPE, VALUE};
use crate::{FieldError, Kind};

/// The Kuma universal `type:` values this module translates.
pub(crate) fn is_kuma_secret_type(t: Option<&Value>) -> bool {
    matches!(t.and_then(Value::as_str), Some("Secret" | "GlobalSecret"))
}

/// Translates a universal `type: Secret` or `type: GlobalSecret` document.
pub(crate) fn universal(mut doc: Map<String, Value>) -> Result<Translated, Vec<FieldError>> {
    let global = doc
        .remove("type")
        .and_then(|t| t.as_str().map(str::to_string))
        == Some("GlobalSecret".to_string());
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    strip_ignored(
        &mut doc,
        &[Family::Kuma, Family::KumaUniversal],
        Kind::Secret,
        Scope::Document,
        "",
        &mut warnings,
    );
    let mut metadata = Map::new();
    take_into(&mut doc, "name", &mut metadata);
    take_into(&mut doc, "labels", &mut metadata);
    match doc.remove("mesh") {
        Some(m) if global => errors.push(FieldError::new(
            "mesh",
            format!(
                "not allowed: a GlobalSecret belongs to no mesh (got mesh: {m}); remove it, or use \
                 type: Secret for a value in a mesh"
            ),
        )),
        Some(m) => {
            metadata.insert("mesh".into(), m);
        }
        None => {}
    }
    let mut data = Map::new();
    match doc.remove("data") {
        None | Some(Value::Null) => {}
        Some(Value::String(v)) => {
            data.insert(VALUE.into(), Value::String(v));
        }
        Some(other) => errors.push(FieldError::new(
            "data",
            format!("must be one base64 string (the secret's bytes), got {other}"),
        )),
    }
    let type_ = if global {
        KUMA_GLOBAL_SECRET_TYPE
    } else {
        KUMA_SECRET_TYPE
    };
    let mut spec = Map::new();
    spec.insert("type".into(), type_.into());
    spec.insert("data".into(), Value::Object(data));
    let fields = if global {
        "type, name, labels and data"
    } else {
        "type, name, mesh, labels and data"
    };
    for key in doc.keys() {
        errors.push(FieldError::new(
            key.clone(),
            format!("unknown field; a Kuma universal secret has {fields}"),
        ));
    }
    Ok(Translated {
        value: canonical(Kind::Secret, metadata, Value::Object(spec)),
        warnings,
        errors,
        path_map: vec![
            ("metadata.name".to_string(), "name".to_string()),
            ("metadata.mesh".to_string(), "mesh".to_string()),
            ("metadata.labels".to_string(), "labels".to_string()),
            ("metadata".to_string(), String::new()),
            (format!("spec.data.{VALUE}"), "data".to_string()),
            ("spec.data".to_string(), "data".to_string()),
        ],
    })
}
