//! meshlink's resource model.
//!
//! Owns the typed kinds, their validation (every error, with a field path),
//! canonical YAML/JSON, and importers for Kuma and Skupper documents. It has
//! no I/O and no async runtime: the control plane and the CLI both call it.

mod error;
mod import;
mod kind;
pub mod parse;
pub mod policy;
mod resource;
pub mod spec;
mod validate;
mod yaml;

pub use error::FieldError;
pub use kind::{Kind, UnknownKind};
pub use parse::{ParsedDocument, SourceFormat, parse_documents, parse_value};
pub use resource::{API_VERSION, Condition, ConditionStatus, Metadata, Resource, Status};
