//! Field-path errors: what is wrong with a document, and where.

use std::fmt;

/// One problem in one document, located by a field path such as
/// `spec.mtls.backends[0].type`. An empty path means the whole document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldError {
    /// Dotted path with `[i]` indexes, relative to the document root.
    pub path: String,
    /// What is wrong and, where possible, what would be accepted.
    pub message: String,
}

impl FieldError {
    /// Builds an error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Formats the error as the CLI prints it: `mesh.yaml[1] spec.x: message`.
    pub fn located(&self, source: &str, index: usize) -> String {
        if self.path.is_empty() {
            format!("{source}[{index}]: {}", self.message)
        } else {
            format!("{source}[{index}] {}: {}", self.path, self.message)
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}
