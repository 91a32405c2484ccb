//! The canonical resource envelope: `apiVersion`, `kind`, `metadata`, `spec`, `status`.
//!
//! Owns conversion between canonical JSON/YAML and the typed [`Resource`].
//! It never accepts a document it cannot print back unchanged: unknown fields
//! are errors with their path, never silently dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::spec::{Spec, StatusDetails};
use crate::{FieldError, Kind};

/// The canonical `apiVersion` of every meshlink resource.
pub const API_VERSION: &str = "meshlink.dev/v1alpha1";

/// Identity and bookkeeping of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// Name, unique per kind (and per mesh for mesh-scoped kinds).
    pub name: String,
    /// The mesh a mesh-scoped resource belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<String>,
    /// Free-form labels, used by label selectors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The store revision of the last write; set by the server. Sending it
    /// back on update makes the write conditional (optimistic concurrency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Whether a condition holds, Kubernetes style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

/// One observed condition of a resource, e.g. `Ready`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// Condition type, e.g. `Ready` or `Accepted`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A CamelCase machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable explanation.
    #[serde(default)]
    pub message: String,
    /// RFC 3339 time the status last changed.
    #[serde(default)]
    pub last_transition_time: String,
}

impl Condition {
    /// A condition stamped with the current time.
    pub fn now(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
        }
    }
}

/// Server-observed state: conditions plus kind-specific details.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Status {
    /// Observed conditions, at most one per type.
    pub conditions: Vec<Condition>,
    /// Kind-specific status fields (empty for most kinds).
    pub details: StatusDetails,
}

/// A typed resource of any kind. The kind is implied by the [`Spec`] variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Name, mesh, labels, version.
    pub metadata: Metadata,
    /// What the user declared.
    pub spec: Spec,
    /// What the system observed.
    pub status: Status,
}

// === impl Resource ===

impl Resource {
    /// Builds a resource from metadata and a spec, with empty status.
    pub fn new(metadata: Metadata, spec: Spec) -> Self {
        Resource {
            metadata,
            spec,
            status: Status::default(),
        }
    }

    /// The resource's kind.
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    /// The resource's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The mesh, for mesh-scoped kinds.
    pub fn mesh(&self) -> Option<&str> {
        self.metadata.mesh.as_deref()
    }

    /// The resource's labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.metadata.labels
    }

    /// The server-assigned version, if any.
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    /// Sets or clears the version.
    pub fn set_resource_version(&mut self, v: Option<String>) {
        self.metadata.resource_version = v;
    }

    /// Observed conditions.
    pub fn conditions(&self) -> &[Condition] {
        &self.status.conditions
    }

    /// Looks up one condition by type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Sets a condition, replacing one of the same type. The transition time
    /// is kept when the status value did not change.
    pub fn set_condition(&mut self, mut c: Condition) {
        if let Some(old) = self
            .status
            .conditions
            .iter_mut()
            .find(|o| o.type_ == c.type_)
        {
            if old.status == c.status {
                c.last_transition_time = std::mem::take(&mut old.last_transition_time);
            }
            *old = c;
        } else {
            self.status.conditions.push(c);
        }
    }

    /// Drops all status (the server owns status; user input never sets it).
    pub fn clear_status(&mut self) {
        self.status = Status::default();
    }

    /// Replaces this resource's status with a copy of `other`'s.
    pub fn copy_status_from(&mut self, other: &Resource) {
        self.status = other.status.clone();
    }

    /// A copy safe to show to API readers: secrets (AccessGrant and
    /// AccessToken codes, in spec and status) are replaced by
    /// [`crate::spec::REDACTED`].
    pub fn redacted(&self) -> Resource {
        Resource {
            metadata: self.metadata.clone(),
            spec: self.spec.redacted(),
            status: Status {
                conditions: self.status.conditions.clone(),
                details: self.status.details.redacted(),
            },
        }
    }

    /// A copy safe for every API read: private keys (Secret `tls.key`) are
    /// replaced by [`crate::spec::REDACTED`]; everything else is kept.
    pub fn without_private_keys(&self) -> Resource {
        Resource {
            metadata: self.metadata.clone(),
            spec: self.spec.without_private_keys(),
            status: self.status.clone(),
        }
    }

    /// Canonical JSON as API reads return it (see
    /// [`Resource::without_private_keys`]).
    pub fn to_api_json(&self) -> Value {
        self.without_private_keys().to_json()
    }

    /// True when both declare the same desired state: same kind, name, mesh,
    /// labels and spec. Status and version are ignored.
    pub fn same_desired_state(&self, other: &Resource) -> bool {
        self.metadata.name == other.metadata.name
            && self.metadata.mesh == other.metadata.mesh
            && self.metadata.labels == other.metadata.labels
            && self.spec == other.spec
    }

    /// All validation errors, with field paths from the document root.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errs = crate::validate::metadata(self.kind(), &self.metadata);
        errs.extend(self.spec.validate(&self.metadata));
        errs
    }

    /// Canonical JSON: `apiVersion`, `kind`, `metadata`, `spec`, `status`
    /// (status omitted when empty).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("apiVersion".into(), Value::String(API_VERSION.into()));
        m.insert("kind".into(), Value::String(self.kind().as_str().into()));
        m.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).expect("metadata serializes"),
        );
        m.insert("spec".into(), self.spec.to_value());
        let status = self.status_value();
        if !status.as_object().is_some_and(|o| o.is_empty()) {
            m.insert("status".into(), status);
        }
        Value::Object(m)
    }

    fn status_value(&self) -> Value {
        let mut m = match self.status.details.to_value() {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                let mut m = Map::new();
                m.insert("details".into(), other);
                m
            }
        };
        if !self.status.conditions.is_empty() {
            m.insert(
                "conditions".into(),
                serde_json::to_value(&self.status.conditions).expect("conditions serialize"),
            );
        }
        Value::Object(m)
    }

    /// Canonical YAML of one document (no leading `---`).
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(&self.to_json()).expect("JSON value serializes to YAML")
    }

    /// Parses canonical JSON and validates it. Returns every error found.
    pub fn from_json(value: Value) -> Result<Resource, Vec<FieldError>> {
        let r = Self::from_json_unvalidated(value)?;
        let errs = r.validate();
        if errs.is_empty() { Ok(r) } else { Err(errs) }
    }

    /// Parses canonical JSON without semantic validation (structure and
    /// unknown fields are still checked). Port ranges and enum values are
    /// semantic, so the result may hold an out-of-range
    /// [`Port`](crate::spec::Port) or an enum's `Unknown` value; call
    /// [`Resource::validate`] before relying on them.
    pub fn from_json_unvalidated(value: Value) -> Result<Resource, Vec<FieldError>> {
        let Value::Object(mut obj) = value else {
            return Err(vec![FieldError::new(
                "",
                "a resource must be a mapping with apiVersion, kind, metadata and spec",
            )]);
        };
        let mut errs = Vec::new();
        match obj.remove("apiVersion") {
            Some(Value::String(v)) if v == API_VERSION => {}
            Some(other) => errs.push(FieldError::new(
                "apiVersion",
                format!(
                    "unknown apiVersion {}; expected {API_VERSION} (or a Kuma/Skupper format: {})",
                    other,
                    crate::parse::ACCEPTED_FORMATS
                ),
            )),
            None => errs.push(FieldError::new(
                "apiVersion",
                format!("missing; expected {API_VERSION}"),
            )),
        }
        let kind = match obj.remove("kind") {
            Some(Value::String(k)) => match k.parse::<Kind>() {
                Ok(k) => Some(k),
                Err(e) => {
                    errs.push(FieldError::new("kind", e.to_string()));
                    None
                }
            },
            Some(_) => {
                errs.push(FieldError::new("kind", "must be a string"));
                None
            }
            None => {
                errs.push(FieldError::new(
                    "kind",
                    format!("missing; expected one of: {}", Kind::accepted_list()),
                ));
                None
            }
        };
        let metadata = match obj.remove("metadata") {
            Some(v) => match deserialize_at::<Metadata>("metadata", v) {
                Ok(m) => Some(m),
                Err(e) => {
                    errs.push(e);
                    None
                }
            },
            None => {
                errs.push(FieldError::new(
                    "metadata",
                    "missing; metadata.name is required",
                ));
                None
            }
        };
        let spec_value = obj.remove("spec").unwrap_or(Value::Object(Map::new()));
        let status_value = obj.remove("status");
        for (k, _) in obj {
            errs.push(FieldError::new(
                k,
                "unknown field; expected apiVersion, kind, metadata, spec or status",
            ));
        }
        let Some(kind) = kind else { return Err(errs) };
        let spec = match Spec::from_value(kind, spec_value) {
            Ok(s) => Some(s),
            Err(e) => {
                errs.extend(e);
                None
            }
        };
        let status = match status_value {
            None | Some(Value::Null) => Some(Status::default()),
            Some(v) => match parse_status(kind, v) {
                Ok(s) => Some(s),
                Err(e) => {
                    errs.extend(e);
                    None
                }
            },
        };
        match (metadata, spec, status) {
            (Some(metadata), Some(spec), Some(status)) if errs.is_empty() => Ok(Resource {
                metadata,
                spec,
                status,
            }),
            _ => Err(errs),
        }
    }
}

fn parse_status(kind: Kind, v: Value) -> Result<Status, Vec<FieldError>> {
    let Value::Object(mut m) = v else {
        return Err(vec![FieldError::new("status", "must be a mapping")]);
    };
    let mut errs = Vec::new();
    let conditions = match m.remove("conditions") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => match deserialize_at::<Vec<Condition>>("status.conditions", v) {
            Ok(c) => c,
            Err(e) => {
                errs.push(e);
                Vec::new()
            }
        },
    };
    let details = match StatusDetails::from_value(kind, Value::Object(m)) {
        Ok(d) => d,
        Err(e) => {
            errs.extend(e);
            StatusDetails::default()
        }
    };
    if errs.is_empty() {
        Ok(Status {
            conditions,
            details,
        })
    } else {
        Err(errs)
    }
}

/// Deserializes `value` as `T`, reporting the failing field as a path under `prefix`.
pub(crate) fn deserialize_at<T: serde::de::DeserializeOwned>(
    prefix: &str,
    value: Value,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = join_path(prefix, if inner == "." { "" } else { &inner });
        FieldError::new(path, e.into_inner().to_string())
    })
}

/// Joins a prefix and a serde_path_to_error path (`a.b[0].c`).
pub(crate) fn join_path(prefix: &str, inner: &str) -> String {
    match (prefix.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) if inner.starts_with('[') => format!("{prefix}{inner}"),
        (false, false) => format!("{prefix}.{inner}"),
    }
}
