//! PostgreSQL backend (skeleton: filled in by the store work).

/// The HA store: PostgreSQL with a serialized revision counter and LISTEN/NOTIFY.
pub struct PostgresStore {}

impl PostgresStore {
    /// Connects and migrates.
    pub async fn connect(url: &str) -> Result<Self, crate::StoreError> {
        let _ = url;
        Err(crate::StoreError::Config("not implemented yet".into()))
    }
}
