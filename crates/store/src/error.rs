//! Store errors.

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// An object with this key exists already.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The object changed since the caller read it.
    #[error(
        "{key} was modified: expected resourceVersion {expected}, found {actual}; read it again and retry"
    )]
    Conflict {
        /// The object.
        key: String,
        /// The revision the caller expected.
        expected: u64,
        /// The revision in the store.
        actual: u64,
    },
    /// The store URL or its options are invalid.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// The database failed or is unreachable; the operation may be retried.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A schema migration failed.
    #[error("schema migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// A stored body is not valid JSON (corruption).
    #[error("stored object {key} is corrupt: {reason}")]
    Corrupt {
        /// The object.
        key: String,
        /// What is wrong.
        reason: String,
    },
}
