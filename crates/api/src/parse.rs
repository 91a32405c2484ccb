//! Multi-document YAML (or JSON) input in any accepted format.
//!
//! Owns splitting input into documents, detecting each document's format,
//! translating it to canonical JSON (through `crate::import`) and handing
//! it to [`Resource::from_json`], which validates it. Error paths are those
//! of the document as the user wrote it. It must never return a resource
//! that failed validation, nor silently drop a field: ignored fields come
//! back as warnings.

use serde_json::{Map, Value};

use crate::import::{self, Translated};
use crate::yaml::StrictValue;
use crate::{API_VERSION, FieldError, Resource};

pub use crate::import::{Family, IGNORED_FIELDS, IgnoredField, Scope};

/// The formats `apply` accepts, for error messages.
pub const ACCEPTED_FORMATS: &str = "meshlink.dev/v1alpha1, Kuma universal (type: Mesh|Dataplane|MeshTrafficPermission|MeshService|MeshHTTPRoute|MeshTCPRoute|MeshTimeout|MeshRetry|MeshRateLimit|MeshAccessLog|MeshLoadBalancingStrategy|MeshHealthCheck|MeshMetric|MeshFaultInjection|MeshCircuitBreaker|MeshTrace|Secret|GlobalSecret), kuma.io/v1alpha1, skupper.io/v2alpha1, skupper.io/v1alpha1, v1 (kind: Secret)";

/// Which format a document was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    /// `apiVersion: meshlink.dev/v1alpha1`.
    Canonical,
    /// Kuma universal: `type: Mesh`, fields at the top level.
    KumaUniversal,
    /// Kuma Kubernetes-style `apiVersion: kuma.io/v1alpha1`.
    KumaKubernetes,
    /// `apiVersion: skupper.io/v2alpha1`.
    SkupperV2,
    /// `apiVersion: skupper.io/v1alpha1`.
    SkupperV1,
    /// Kubernetes `apiVersion: v1` (a `kind: Secret`).
    KubernetesV1,
}

/// One document of a multi-document input, translated to canonical form.
#[derive(Debug, Clone)]
pub struct ParsedDocument {
    /// 0-based position of the document in the input.
    pub index: usize,
    /// The format it was written in, when recognised.
    pub format: Option<SourceFormat>,
    /// The canonical, validated resource, or every error found.
    pub outcome: Result<Resource, Vec<FieldError>>,
    /// Accepted-but-not-implemented fields, one message each naming the field.
    pub warnings: Vec<String>,
}

/// Parses multi-document YAML (or JSON), translating every document to
/// canonical form and validating it. Empty documents are skipped but still
/// count for `index`. A YAML syntax error ends the input: it is reported as
/// the last document, since what follows cannot be split reliably.
pub fn parse_documents(text: &str) -> Vec<ParsedDocument> {
    let mut out = Vec::new();
    for (index, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        match serde_path_to_error::deserialize::<_, StrictValue>(doc) {
            Ok(StrictValue(Value::Null)) => {}
            Ok(StrictValue(value)) => out.push(parse_value(index, value)),
            Err(e) => {
                let path = e.path().to_string();
                let path = if path == "." { String::new() } else { path };
                out.push(ParsedDocument {
                    index,
                    format: None,
                    outcome: Err(vec![FieldError::new(
                        path,
                        format!("not valid YAML or JSON: {}", e.into_inner()),
                    )]),
                    warnings: Vec::new(),
                });
                // The YAML parser cannot resynchronise after an error: it
                // would report the same error for every further document.
                break;
            }
        }
    }
    out
}

/// Translates and validates one already-decoded document (e.g. a JSON
/// request body) in any accepted format.
pub fn parse_value(index: usize, value: Value) -> ParsedDocument {
    let failed = |format, errors| ParsedDocument {
        index,
        format,
        outcome: Err(errors),
        warnings: Vec::new(),
    };
    let Value::Object(doc) = value else {
        return failed(
            None,
            vec![FieldError::new(
                "",
                format!(
                    "a document must be a mapping (got {}); put each resource in its own \
                     document, separated by ---",
                    kind_of(&value)
                ),
            )],
        );
    };
    let format = match detect(&doc) {
        Ok(f) => f,
        Err(e) => return failed(None, vec![e]),
    };
    let translated = match format {
        SourceFormat::Canonical => {
            let outcome = Resource::from_json(Value::Object(doc));
            return ParsedDocument {
                index,
                format: Some(format),
                warnings: spec_warnings(&outcome, |p| p.to_owned()),
                outcome,
            };
        }
        SourceFormat::KumaUniversal => import::kuma::universal(doc),
        SourceFormat::KumaKubernetes => import::kuma::kubernetes(doc),
        SourceFormat::SkupperV2 => import::skupper::translate(doc, false),
        SourceFormat::SkupperV1 => import::skupper::translate(doc, true),
        SourceFormat::KubernetesV1 => import::secret::translate(doc),
    };
    match translated {
        Ok(t) => finish(index, format, t),
        Err(errors) => failed(Some(format), errors),
    }
}

/// Parses the canonical value and maps its error paths back to the source.
fn finish(index: usize, format: SourceFormat, mut t: Translated) -> ParsedDocument {
    let mut errors = std::mem::take(&mut t.errors);
    let outcome = match Resource::from_json(std::mem::take(&mut t.value)) {
        Ok(r) if errors.is_empty() => Ok(r),
        Ok(_) => Err(errors),
        Err(errs) => {
            errors.extend(
                errs.into_iter()
                    .map(|e| FieldError::new(t.source_path(&e.path), e.message)),
            );
            Err(errors)
        }
    };
    let mut warnings = std::mem::take(&mut t.warnings);
    warnings.extend(spec_warnings(&outcome, |p| t.source_path(p)));
    ParsedDocument {
        index,
        format: Some(format),
        outcome,
        warnings,
    }
}

/// Warnings for what a valid resource holds but meshlink does not serve
/// (e.g. a `BUILTIN` gateway), their paths mapped by `source_path`.
fn spec_warnings(
    outcome: &Result<Resource, Vec<FieldError>>,
    source_path: impl Fn(&str) -> String,
) -> Vec<String> {
    let Some(dp) = outcome.as_ref().ok().and_then(|r| r.spec.as_dataplane()) else {
        return Vec::new();
    };
    dp.warnings()
        .into_iter()
        .map(|w| match w.split_once(": ") {
            Some((path, rest)) => format!("{}: {rest}", source_path(path)),
            None => w,
        })
        .collect()
}

/// Decides a document's format from `apiVersion`, or Kuma universal `type`.
fn detect(doc: &Map<String, Value>) -> Result<SourceFormat, FieldError> {
    match doc.get("apiVersion") {
        Some(Value::String(v)) => match v.as_str() {
            API_VERSION => Ok(SourceFormat::Canonical),
            "kuma.io/v1alpha1" => Ok(SourceFormat::KumaKubernetes),
            "skupper.io/v2alpha1" => Ok(SourceFormat::SkupperV2),
            "skupper.io/v1alpha1" => Ok(SourceFormat::SkupperV1),
            "v1" => Ok(SourceFormat::KubernetesV1),
            other => Err(FieldError::new(
                "apiVersion",
                format!("unknown apiVersion {other:?}; accepted formats: {ACCEPTED_FORMATS}"),
            )),
        },
        Some(other) => Err(FieldError::new(
            "apiVersion",
            format!("must be a string, got {other}; accepted formats: {ACCEPTED_FORMATS}"),
        )),
        None if doc.contains_key("type") => Ok(SourceFormat::KumaUniversal),
        None => Err(FieldError::new(
            "",
            format!(
                "cannot tell the format: set apiVersion (or type: for Kuma universal); \
                 accepted formats: {ACCEPTED_FORMATS}"
            ),
        )),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
