//! Kuma documents: universal (`type: Mesh`, fields at the top level) and
//! Kubernetes-style `apiVersion: kuma.io/v1alpha1`.
//!
//! Owns the translation of Kuma's envelope to canonical form, the legacy
//! outbound `service:` field, and the Kubernetes mesh label. The spec shapes
//! are Kuma's own, so everything else passes through unchanged; this module
//! must never rename a spec field silently.

use serde_json::{Map, Value};

use super::{Family, Scope, Translated, canonical, kubernetes_metadata, strip_ignored, take_into};
use crate::spec::SERVICE_TAG;
use crate::{FieldError, Kind};

/// The Kuma kinds meshlink implements.
const KUMA_KINDS: [Kind; 16] = [
    Kind::Mesh,
    Kind::Dataplane,
    Kind::MeshTrafficPermission,
    Kind::MeshService,
    Kind::MeshHTTPRoute,
    Kind::MeshTCPRoute,
    Kind::MeshTimeout,
    Kind::MeshRetry,
    Kind::MeshRateLimit,
    Kind::MeshAccessLog,
    Kind::MeshLoadBalancingStrategy,
    Kind::MeshHealthCheck,
    Kind::MeshMetric,
    Kind::MeshFaultInjection,
    Kind::MeshCircuitBreaker,
    Kind::MeshTrace,
];

/// The label Kuma on Kubernetes uses to place a resource in a mesh.
const MESH_LABEL: &str = "kuma.io/mesh";

/// The mesh Kuma on Kubernetes uses when the label is absent.
const DEFAULT_MESH: &str = "default";

fn kuma_kind(field: &str, v: Option<Value>) -> Result<Kind, FieldError> {
    // Universal documents may also be Kuma Secrets (routed before this);
    // on Kubernetes those are `apiVersion: v1` Secrets.
    let names: Vec<&str> = KUMA_KINDS.iter().map(|k| k.as_str()).collect();
    let accepted = if field == "type" {
        format!(
            "meshlink accepts {}, Secret or GlobalSecret",
            names.join(", ")
        )
    } else {
        let (last, rest) = names.split_last().expect("KUMA_KINDS is not empty");
        format!(
            "meshlink accepts {} or {last} (Kuma Secrets are apiVersion: v1 Secrets of type \
             system.kuma.io/secret)",
            rest.join(", ")
        )
    };
    match v {
        Some(Value::String(s)) => {
            KUMA_KINDS
                .into_iter()
                .find(|k| k.as_str() == s)
                .ok_or_else(|| {
                    FieldError::new(field, format!("unknown Kuma {field} {s:?}; {accepted}"))
                })
        }
        Some(other) => Err(FieldError::new(
            field,
            format!("must be a string, got {other}; {accepted}"),
        )),
        None => Err(FieldError::new(field, format!("missing; {accepted}"))),
    }
}

/// Translates a Kuma universal document (`type:` at the top level).
pub(crate) fn universal(mut doc: Map<String, Value>) -> Result<Translated, Vec<FieldError>> {
    if super::kuma_secret::is_kuma_secret_type(doc.get("type")) {
        return super::kuma_secret::universal(doc);
    }
    let kind = kuma_kind("type", doc.remove("type")).map_err(|e| vec![e])?;
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let families = [Family::Kuma, Family::KumaUniversal];
    strip_ignored(
        &mut doc,
        &families,
        kind,
        Scope::Document,
        "",
        &mut warnings,
    );
    let mut metadata = Map::new();
    for key in ["name", "mesh", "labels"] {
        take_into(&mut doc, key, &mut metadata);
    }
    let mut path_map = vec![
        ("metadata.name".to_string(), "name".to_string()),
        ("metadata.mesh".to_string(), "mesh".to_string()),
        ("metadata.labels".to_string(), "labels".to_string()),
        ("metadata".to_string(), String::new()),
    ];
    let spec = if matches!(kind, Kind::MeshTrafficPermission | Kind::MeshService)
        || kind.is_outbound_policy()
    {
        // Kuma's new policies and MeshService keep their spec in a `spec:` block.
        let mut spec = doc.remove("spec").unwrap_or(Value::Object(Map::new()));
        if let Value::Object(s) = &mut spec {
            strip_ignored(s, &families, kind, Scope::Spec, "spec", &mut warnings);
        }
        for key in doc.keys() {
            errors.push(FieldError::new(
                key.clone(),
                format!(
                    "unknown field; a Kuma universal {kind} has type, name, mesh, labels and spec"
                ),
            ));
        }
        spec
    } else {
        strip_ignored(&mut doc, &families, kind, Scope::Spec, "", &mut warnings);
        legacy_outbound_service(&mut doc, "", &mut errors);
        crate::spec::mesh_services_mode_warning(&doc, "", &mut warnings);
        path_map.push(("spec".to_string(), String::new()));
        Value::Object(doc)
    };
    Ok(Translated {
        value: canonical(kind, metadata, spec),
        warnings,
        errors,
        path_map,
    })
}

/// Translates an `apiVersion: kuma.io/v1alpha1` document.
pub(crate) fn kubernetes(mut doc: Map<String, Value>) -> Result<Translated, Vec<FieldError>> {
    doc.remove("apiVersion");
    let kind = kuma_kind("kind", doc.remove("kind")).map_err(|e| vec![e])?;
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let families = [Family::Kuma, Family::Kubernetes];
    let mut metadata =
        kubernetes_metadata(&mut doc, kind, &families, &mut warnings).map_err(|e| vec![e])?;
    let mut path_map = Vec::new();
    let label = if kind.is_mesh_scoped() {
        metadata
            .get_mut("labels")
            .and_then(Value::as_object_mut)
            .and_then(|l| l.remove(MESH_LABEL))
    } else {
        None
    };
    let label_path = format!("metadata.labels[{MESH_LABEL:?}]");
    match (doc.remove("mesh"), label) {
        (Some(mesh), label) => {
            if label.as_ref().is_some_and(|l| *l != mesh) {
                errors.push(FieldError::new(
                    label_path,
                    format!("names a different mesh than mesh: {mesh}; set only one of them"),
                ));
            }
            metadata.insert("mesh".into(), mesh);
            path_map.push(("metadata.mesh".to_string(), "mesh".to_string()));
        }
        (None, Some(label)) => {
            metadata.insert("mesh".into(), label);
            path_map.push(("metadata.mesh".to_string(), label_path));
        }
        (None, None) if kind.is_mesh_scoped() => {
            // Kuma on Kubernetes places unlabelled resources in `default`.
            metadata.insert("mesh".into(), DEFAULT_MESH.into());
        }
        (None, None) => {}
    }
    if metadata
        .get("labels")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        metadata.remove("labels");
    }
    let mut spec = doc.remove("spec").unwrap_or(Value::Object(Map::new()));
    if let Value::Object(s) = &mut spec {
        strip_ignored(s, &families, kind, Scope::Spec, "spec", &mut warnings);
        legacy_outbound_service(s, "spec", &mut errors);
        crate::spec::mesh_services_mode_warning(s, "spec.", &mut warnings);
    }
    for key in doc.keys() {
        errors.push(FieldError::new(
            key.clone(),
            "unknown field; a kuma.io/v1alpha1 document has apiVersion, kind, metadata, mesh \
             and spec",
        ));
    }
    Ok(Translated {
        value: canonical(kind, metadata, spec),
        warnings,
        errors,
        path_map,
    })
}

/// Rewrites Kuma's legacy outbound `service: x` as `tags: {kuma.io/service: x}`.
fn legacy_outbound_service(
    spec: &mut Map<String, Value>,
    prefix: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(Value::Array(outbounds)) = spec
        .get_mut("networking")
        .and_then(|n| n.get_mut("outbound"))
    else {
        return;
    };
    let base = if prefix.is_empty() {
        "networking.outbound".to_string()
    } else {
        format!("{prefix}.networking.outbound")
    };
    for (i, out) in outbounds.iter_mut().enumerate() {
        let Value::Object(out) = out else { continue };
        let Some(service) = out.remove("service") else {
            continue;
        };
        let tags = out
            .entry("tags")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(tags) = tags else { continue };
        match tags.get(SERVICE_TAG) {
            Some(existing) if *existing != service => errors.push(FieldError::new(
                format!("{base}[{i}].service"),
                format!(
                    "{service} differs from tags.{SERVICE_TAG} {existing}; set only one of them"
                ),
            )),
            _ => {
                tags.insert(SERVICE_TAG.to_string(), service);
            }
        }
    }
}
