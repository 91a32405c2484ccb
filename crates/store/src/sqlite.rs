//! SQLite backend (skeleton: filled in by the store work).

/// The embedded default store: one SQLite file in WAL mode with full sync.
pub struct SqliteStore {}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    pub async fn open(path: &std::path::Path) -> Result<Self, crate::StoreError> {
        let _ = path;
        Err(crate::StoreError::Config("not implemented yet".into()))
    }
}
