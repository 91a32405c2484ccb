//! The embedded default backend: one SQLite file.
//!
//! Owns the file (created with mode 0600, parent directories included), its
//! pragmas and its schema migrations (`migrations/sqlite/`, applied once
//! each, so reopening is idempotent).
//!
//! - **Durability (I5):** `journal_mode=WAL` with `synchronous=FULL`: a
//!   commit returns only after the WAL is fsynced, so an acknowledged write
//!   survives `kill -9` and power loss.
//! - **Writers never see `SQLITE_BUSY`:** all writes go through one writer
//!   connection (a pool of size one), each in `BEGIN IMMEDIATE`, so writers
//!   in this process queue instead of racing for the lock; readers use a
//!   separate pool and never block writers in WAL mode. A busy timeout
//!   covers the rest (checkpoints, another process opening the file).
//! - **Order:** writes are serialized, so revisions commit in order and the
//!   change feed never has a visible gap.
//!
//! One process should own the file; several control planes need PostgreSQL.
//! The change feed keeps what [`Store::compact`] leaves: the history above
//! the compacted revision (see `feed_exec`). Deleted pages are reused by
//! later writes, so the file stops growing once the window is full (it does
//! not shrink without `VACUUM`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::batch_exec::sqlite_batch;
use crate::feed::{self, FetchPage, Wakeups};
use crate::feed_exec::sqlite_feed;
use crate::schema::{self, ObjectRow, WriteOp};
use crate::{
    BatchWrite, Change, Compaction, ListPage, ListQuery, Object, ObjectKey, Store, StoreError,
};

/// The embedded default store: one SQLite file in WAL mode with full sync.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// Exactly one connection: the write queue.
    writer: SqlitePool,
    readers: SqlitePool,
    wakeups: Wakeups,
}

// === impl SqliteStore ===

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        prepare_file(path)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        let cannot_open = |e: sqlx::Error| {
            StoreError::Config(format!(
                "cannot open SQLite database {}: {e}; check that the path is a writable file",
                path.display()
            ))
        };
        let writer = SqlitePoolOptions::new()
            .min_connections(1)
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(120))
            .connect_with(options.clone())
            .await
            .map_err(cannot_open)?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        let readers = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(cannot_open)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer,
                readers,
                wakeups: Wakeups::new(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn write(&self, key: &ObjectKey, op: WriteOp<'_>) -> Result<Object, StoreError> {
        let mut tx = self.inner.writer.begin_with("BEGIN IMMEDIATE").await?;
        let revision: i64 = sqlx::query_scalar(schema::NEXT_REVISION)
            .fetch_one(&mut *tx)
            .await?;
        let current: Option<ObjectRow> = sqlx::query_as(&schema::select_object())
            .bind(&key.kind)
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&mut *tx)
            .await?;
        let planned = schema::plan(key, op, current, revision)?;
        if planned.change_type == crate::ChangeType::Deleted {
            sqlx::query(schema::DELETE_OBJECT)
                .bind(&key.kind)
                .bind(&key.mesh)
                .bind(&key.name)
                .execute(&mut *tx)
                .await?;
        } else {
            sqlx::query(schema::UPSERT_OBJECT)
                .bind(&key.kind)
                .bind(&key.mesh)
                .bind(&key.name)
                .bind(&planned.labels_json)
                .bind(&planned.body_json)
                .bind(planned.revision)
                .bind(planned.create_revision)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(schema::INSERT_CHANGE)
            .bind(planned.revision)
            .bind(schema::change_type_name(planned.change_type))
            .bind(&key.kind)
            .bind(&key.mesh)
            .bind(&key.name)
            .bind(&planned.labels_json)
            .bind(&planned.body_json)
            .bind(planned.create_revision)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.inner.wakeups.notify(schema::to_u64(revision));
        Ok(planned.result)
    }
}

/// Creates parent directories and the file itself with mode 0600 (SQLite
/// gives its `-wal` and `-shm` files the same mode).
fn prepare_file(path: &Path) -> Result<(), StoreError> {
    let fail = |what: &str, p: &Path, e: std::io::Error| {
        StoreError::Config(format!("cannot {what} {}: {e}", p.display()))
    };
    if path.as_os_str().is_empty() {
        return Err(StoreError::Config(
            "the SQLite path is empty; use sqlite://PATH, e.g. sqlite://./meshlink-data/store.db"
                .into(),
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| fail("create directory", dir, e))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| fail("create database file", path, e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail("set mode 0600 on", path, e))?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn get(&self, key: &ObjectKey) -> Result<Option<Object>, StoreError> {
        let row: Option<ObjectRow> = sqlx::query_as(&schema::select_object())
            .bind(&key.kind)
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&self.inner.readers)
            .await?;
        row.map(ObjectRow::into_object).transpose()
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<Object>, StoreError> {
        if query.after.is_some() || query.limit.is_some() {
            return Ok(self.list_page(query).await?.objects);
        }
        let sql = schema::list_objects(query.mesh.is_some());
        let mut q = sqlx::query_as::<_, ObjectRow>(&sql).bind(&query.kind);
        if let Some(mesh) = &query.mesh {
            q = q.bind(mesh);
        }
        let rows = q.fetch_all(&self.inner.readers).await?;
        schema::select_listed(rows, query)
    }

    async fn create(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
    ) -> Result<Object, StoreError> {
        self.write(key, WriteOp::Create { labels, body }).await
    }

    async fn update(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
        expected_revision: Option<u64>,
    ) -> Result<Object, StoreError> {
        let op = WriteOp::Update {
            labels,
            body,
            expected_revision,
        };
        self.write(key, op).await
    }

    async fn delete(
        &self,
        key: &ObjectKey,
        expected_revision: Option<u64>,
    ) -> Result<Object, StoreError> {
        self.write(key, WriteOp::Delete { expected_revision }).await
    }

    async fn current_revision(&self) -> Result<u64, StoreError> {
        let rev: i64 = sqlx::query_scalar(schema::CURRENT_REVISION)
            .fetch_one(&self.inner.readers)
            .await?;
        Ok(schema::to_u64(rev))
    }

    async fn changes_since(&self, after: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        sqlite_feed::changes_since(&self.inner.readers, after, limit).await
    }

    fn watch(&self, after: u64) -> BoxStream<'static, Result<Change, StoreError>> {
        let inner = self.inner.clone();
        let fetch: FetchPage = Arc::new(move |after| {
            let inner = inner.clone();
            Box::pin(async move {
                sqlite_feed::changes_since(&inner.readers, after, feed::PAGE_SIZE).await
            })
        });
        feed::follow(
            after,
            fetch,
            &self.inner.wakeups,
            feed::DEFAULT_FALLBACK_POLL,
        )
    }

    async fn compact(&self, revision: u64) -> Result<Compaction, StoreError> {
        sqlite_feed::compact(&self.inner.writer, revision).await
    }

    async fn compacted_revision(&self) -> Result<u64, StoreError> {
        sqlite_feed::compacted_revision(&self.inner.readers).await
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn get_many(&self, keys: &[ObjectKey]) -> Result<Vec<Option<Object>>, StoreError> {
        sqlite_batch::get_many(&self.inner.readers, keys).await
    }

    async fn write_batch(
        &self,
        writes: &[BatchWrite],
    ) -> Result<Vec<Result<Object, StoreError>>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.inner.writer.begin_with("BEGIN IMMEDIATE").await?;
        let plan = sqlite_batch::run(&mut tx, writes).await?;
        tx.commit().await?;
        if !plan.changes.is_empty() {
            self.inner
                .wakeups
                .notify(schema::to_u64(plan.last_revision));
        }
        Ok(plan.results)
    }

    async fn list_page(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        crate::page::keyset_page!(&self.inner.readers, query)
    }
}
