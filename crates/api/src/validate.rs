//! Validation shared by all kinds. (Skeleton: filled in by the api work.)

use crate::{FieldError, Kind, Metadata};

/// Validates metadata: name syntax, mesh present exactly for mesh-scoped kinds, labels.
pub(crate) fn metadata(kind: Kind, meta: &Metadata) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if meta.name.is_empty() {
        errs.push(FieldError::new("metadata.name", "required"));
    }
    if kind.is_mesh_scoped() && meta.mesh.is_none() {
        errs.push(FieldError::new("metadata.mesh", "required"));
    }
    errs
}
