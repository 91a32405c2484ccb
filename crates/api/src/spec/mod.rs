//! Typed specs and statuses for every kind. (Skeleton: filled in by the api work.)

use serde_json::Value;

use crate::{FieldError, Kind, Metadata};

/// The spec of a resource; the variant decides the kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    /// Placeholder until the typed specs land.
    Mesh(Value),
}

impl Spec {
    /// The kind this spec belongs to.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Mesh(_) => Kind::Mesh,
        }
    }

    /// Parses a `spec` value of `kind`, rejecting unknown fields. Paths start with `spec`.
    pub fn from_value(kind: Kind, value: Value) -> Result<Spec, Vec<FieldError>> {
        let _ = kind;
        Ok(Spec::Mesh(value))
    }

    /// Canonical JSON of the spec.
    pub fn to_value(&self) -> Value {
        match self {
            Spec::Mesh(v) => v.clone(),
        }
    }

    /// Semantic validation; paths start with `spec`.
    pub fn validate(&self, meta: &Metadata) -> Vec<FieldError> {
        let _ = meta;
        Vec::new()
    }
}

/// Kind-specific status fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum StatusDetails {
    /// No kind-specific status.
    #[default]
    None,
}

impl StatusDetails {
    /// Parses the kind-specific part of `status` (everything but `conditions`).
    pub fn from_value(kind: Kind, value: Value) -> Result<StatusDetails, Vec<FieldError>> {
        let _ = (kind, value);
        Ok(StatusDetails::None)
    }

    /// Canonical JSON of the details (an object; empty for none).
    pub fn to_value(&self) -> Value {
        Value::Object(Default::default())
    }
}
