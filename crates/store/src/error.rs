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
    /// The change feed no longer holds every change after `requested`:
    /// compaction deleted some of them ([`crate::Store::compact`]). The
    /// watcher must read the current state again (a full list) and watch
    /// from that list's revision, as a Kubernetes client does on
    /// `410 Gone`.
    #[error(
        "changes after revision {requested} were compacted: the change feed keeps revisions from {oldest} on; list again and watch from the list's revision"
    )]
    Compacted {
        /// The revision the watcher asked to resume after.
        requested: u64,
        /// The oldest revision the feed may still hold (the compacted
        /// revision plus one); resuming after `oldest - 1` or later works.
        oldest: u64,
    },
    /// The store URL or its options are invalid.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// The database cannot be reached (connection refused or lost, pool
    /// timed out, the server shutting down); nothing was written and the
    /// operation may be retried once it is back.
    #[error(
        "the store's database is unavailable ({0}); nothing was changed; retry once the database is back"
    )]
    Unavailable(String),
    /// The database failed; the operation may be retried.
    #[error("database error: {0}")]
    Database(sqlx::Error),
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

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_unavailable(&e) {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Database(e)
        }
    }
}

/// Whether `e` means "the database cannot be reached" rather than "the
/// statement failed": I/O and pool errors, and PostgreSQL's connection
/// exceptions (class 08) and operator interventions such as a shutdown
/// (class 57).
fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_database_is_named_as_such() {
        let e = StoreError::from(sqlx::Error::PoolTimedOut);
        assert!(matches!(e, StoreError::Unavailable(_)));
        let text = e.to_string();
        assert!(
            text.contains("database is unavailable") && text.contains("retry"),
            "{text}"
        );
        assert!(matches!(
            StoreError::from(sqlx::Error::RowNotFound),
            StoreError::Database(_)
        ));
    }
}
