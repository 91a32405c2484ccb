//! The HA backend: PostgreSQL, shareable by several control planes.
//!
//! Owns the connection pool, the schema migrations (`migrations/postgres/`,
//! applied under sqlx's advisory lock, so control planes starting together
//! migrate once) and the `LISTEN meshlink_changes` connection that wakes
//! watchers when *any* process writes.
//!
//! # Revision order
//!
//! A watcher reads `changes WHERE revision > last ORDER BY revision`. If two
//! transactions could commit revisions out of order (7 visible before 6), a
//! watcher could read 7, move `last` to 7 and skip 6 forever. So every write
//! transaction starts with
//!
//! ```sql
//! UPDATE meshlink_meta SET revision = revision + 1 WHERE id = 1 RETURNING revision
//! ```
//!
//! on a single-row counter. The row lock it takes is held until commit, so
//! the next writer cannot even obtain its revision before the previous one
//! has committed (and become visible): revisions commit strictly in order.
//! A failed write rolls the counter back with it, so the feed has no holes
//! either. The transaction also runs `pg_notify('meshlink_changes', rev)`,
//! which PostgreSQL delivers only at commit. The cost is that writes are
//! serialized database-wide, which control-plane write rates easily allow.
//!
//! # High availability
//!
//! Several control planes may share one database: each runs its own
//! `PostgresStore`. Writes from all of them are ordered by the counter
//! above, and every instance's watchers see every write: local writes wake
//! them in-process, other instances' writes arrive via `LISTEN`. Which
//! instance does singleton work (e.g. CA creation) is leader election's job,
//! not the store's; conflicting writes are still safe via `expected_revision`.
//! If a notification is lost (the listener reconnecting), a slow fallback
//! poll ([`PostgresOptions::fallback_poll`]) catches up; it is a safety net,
//! not the mechanism.
//!
//! # Compaction
//!
//! [`Store::compact`] deletes the feed's history up to a revision, never
//! past the counter's committed value, so it cannot touch a revision that a
//! writer holds the lock for or open a hole the order above relies on. It
//! marks `feed_compaction` (its own row, not the counter's: compaction
//! never blocks writers on it) before deleting, in chunks, and a reader
//! checks that mark after its rows (see `feed_exec`), so a watcher behind
//! the window gets [`StoreError::Compacted`], never a silent gap. Several
//! control planes may compact at once: the deletes are idempotent and the
//! mark only rises (the control plane lets only its leader compact anyway).
//! A compaction that deleted rows ends with a plain `VACUUM` of `changes`,
//! so the table's size follows the window rather than autovacuum's pace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::task::JoinHandle;

use crate::batch_exec::postgres_batch;
use crate::feed::{self, FetchPage, Wakeups};
use crate::feed_exec::postgres_feed;
use crate::schema::{self, ObjectRow, WriteOp};
use crate::{
    BatchWrite, Change, ChangeType, Compaction, ListPage, ListQuery, Object, ObjectKey, Store,
    StoreError,
};

/// The notification channel every write transaction notifies.
const CHANNEL: &str = "meshlink_changes";

/// How long a query waits for a connection. While the database is down,
/// every call fails after this long with [`StoreError::Unavailable`], so
/// API writes answer 503 promptly instead of hanging.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Tuning for [`PostgresStore::connect_with`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Pool size for queries (one more connection is held for `LISTEN`).
    pub max_connections: u32,
    /// How often an idle watcher re-reads the feed without a notification.
    pub fallback_poll: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 10,
            fallback_poll: feed::DEFAULT_FALLBACK_POLL,
        }
    }
}

/// The HA store: PostgreSQL with a serialized revision counter and LISTEN/NOTIFY.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    wakeups: Arc<Wakeups>,
    fallback_poll: Duration,
    /// Forwards `LISTEN` notifications to `wakeups`; aborted on drop.
    listener: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

// === impl PostgresStore ===

impl PostgresStore {
    /// Connects with default options and migrates.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects, migrates and starts listening for other instances' writes.
    /// Returns once the listener is subscribed, so every write committed
    /// after this returns wakes this store's watchers.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1) + 1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await
            .map_err(|e| match e {
                sqlx::Error::Configuration(e) => StoreError::Config(format!(
                    "invalid PostgreSQL URL: {e}; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
                )),
                e => StoreError::from(e),
            })?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let wakeups = Arc::new(Wakeups::new());
        let listener = tokio::spawn(forward_notifications(listener, wakeups.clone()));
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                pool,
                wakeups,
                fallback_poll: options.fallback_poll,
                listener,
            }),
        })
    }

    async fn write(&self, key: &ObjectKey, op: WriteOp<'_>) -> Result<Object, StoreError> {
        let mut tx = self.inner.pool.begin().await?;
        // Takes the counter row lock: serializes writers until commit.
        let revision: i64 = sqlx::query_scalar(schema::NEXT_REVISION)
            .fetch_one(&mut *tx)
            .await?;
        // READ COMMITTED: this statement's snapshot is taken after the lock
        // was granted, so it sees every earlier write.
        let current: Option<ObjectRow> = sqlx::query_as(&schema::select_object())
            .bind(&key.kind)
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&mut *tx)
            .await?;
        let planned = schema::plan(key, op, current, revision)?;
        if planned.change_type == ChangeType::Deleted {
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
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(revision.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.inner.wakeups.notify(schema::to_u64(revision));
        Ok(planned.result)
    }
}

/// Wakes watchers on every notification. When the connection drops,
/// notifications sent meanwhile are lost, so watchers are woken anyway after
/// the reconnect to re-read the feed.
async fn forward_notifications(mut listener: PgListener, wakeups: Arc<Wakeups>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => wakeups.notify(n.payload().parse().unwrap_or(0)),
            Ok(None) => {
                tracing::warn!(
                    channel = CHANNEL,
                    "PostgreSQL listener connection lost; reconnected"
                );
                wakeups.notify(0);
            }
            Err(error) => {
                tracing::warn!(
                    channel = CHANNEL,
                    %error,
                    "PostgreSQL listener failed; retrying in 1s (watchers poll meanwhile)"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                wakeups.notify(0);
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn get(&self, key: &ObjectKey) -> Result<Option<Object>, StoreError> {
        let row: Option<ObjectRow> = sqlx::query_as(&schema::select_object())
            .bind(&key.kind)
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&self.inner.pool)
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
        let rows = q.fetch_all(&self.inner.pool).await?;
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
            .fetch_one(&self.inner.pool)
            .await?;
        Ok(schema::to_u64(rev))
    }

    async fn changes_since(&self, after: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        postgres_feed::changes_since(&self.inner.pool, after, limit).await
    }

    fn watch(&self, after: u64) -> BoxStream<'static, Result<Change, StoreError>> {
        let inner = self.inner.clone();
        let fetch: FetchPage = Arc::new(move |after| {
            let inner = inner.clone();
            Box::pin(async move {
                postgres_feed::changes_since(&inner.pool, after, feed::PAGE_SIZE).await
            })
        });
        feed::follow(after, fetch, &self.inner.wakeups, self.inner.fallback_poll)
    }

    async fn compact(&self, revision: u64) -> Result<Compaction, StoreError> {
        let done = postgres_feed::compact(&self.inner.pool, revision).await?;
        if done.deleted > 0 {
            // Makes the deleted rows' space reusable now instead of at
            // autovacuum's next pass, so the table stays the window's size
            // however fast the feed turns over. Plain VACUUM: no exclusive
            // lock; skipped if another compactor is vacuuming.
            sqlx::raw_sql("VACUUM (SKIP_LOCKED) changes")
                .execute(&self.inner.pool)
                .await?;
        }
        Ok(done)
    }

    async fn compacted_revision(&self) -> Result<u64, StoreError> {
        postgres_feed::compacted_revision(&self.inner.pool).await
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn get_many(&self, keys: &[ObjectKey]) -> Result<Vec<Option<Object>>, StoreError> {
        postgres_batch::get_many(&self.inner.pool, keys).await
    }

    async fn write_batch(
        &self,
        writes: &[BatchWrite],
    ) -> Result<Vec<Result<Object, StoreError>>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.inner.pool.begin().await?;
        // Locks the counter row first: batches and single writes commit
        // their revisions in order (see "Revision order" above).
        let plan = postgres_batch::run(&mut tx, writes).await?;
        if plan.changes.is_empty() {
            tx.rollback().await?;
            return Ok(plan.results);
        }
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(plan.last_revision.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.inner
            .wakeups
            .notify(schema::to_u64(plan.last_revision));
        Ok(plan.results)
    }

    async fn list_page(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        crate::page::keyset_page!(&self.inner.pool, query)
    }
}
