//! Runs a batch ([`crate::batch`]) inside a backend's transaction, and
//! multi-gets. Written once as a macro and expanded per sqlx backend
//! (`sqlite_batch`, `postgres_batch`), because the statements are the same
//! and only the driver types differ.
//!
//! A batch costs a fixed number of round trips to the database whatever
//! its size: lock the counter, one select per (kind, mesh) and
//! [`crate::batch::ROWS_PER_STATEMENT`] keys, one multi-row delete per
//! (kind, mesh) and that many deleted keys, one multi-row upsert and one
//! multi-row feed insert per that many rows, then move the counter. The
//! caller begins and commits the transaction.
//!
//! The multi-row statements are not kept in sqlx's per-connection
//! statement cache (`persistent(false)`): their text differs with the
//! number of rows, so the cache filled with up to 100 prepared programs of
//! thousands of parameters per connection (about 4 MiB with SQLite after
//! applying 2,000 Dataplanes), for statements that rarely repeat.

/// Expands to a module `$module` with `run` (plan and store a batch in an
/// open transaction) and `get_many` for the sqlx database `$db`.
macro_rules! batch_backend {
    ($module:ident, $db:ty, $binds:expr) => {
        pub(crate) mod $module {
            use std::collections::HashMap;

            use crate::batch::{self, BatchPlan, BatchWrite};
            use crate::schema::ObjectRow;
            use crate::{Object, ObjectKey, StoreError};

            /// How this backend's multi-row statements bind.
            const BINDS: batch::Binds = $binds;

            /// Reads the rows of `keys` on `conn` (missing keys are absent).
            async fn rows(
                conn: &mut <$db as sqlx::Database>::Connection,
                keys: &[&ObjectKey],
            ) -> Result<HashMap<ObjectKey, ObjectRow>, StoreError> {
                let mut out = HashMap::with_capacity(keys.len());
                for (kind, mesh, names) in batch::name_chunks(keys) {
                    let sql = batch::select_names(BINDS, names.len());
                    let mut q = sqlx::query_as::<_, ObjectRow>(&sql)
                        .persistent(false)
                        .bind(kind)
                        .bind(mesh);
                    for n in names {
                        q = q.bind(n);
                    }
                    for row in q.fetch_all(&mut *conn).await? {
                        out.insert(row.key(), row);
                    }
                }
                Ok(out)
            }

            /// Reads several objects; one result per key, in key order.
            pub(crate) async fn get_many(
                pool: &sqlx::Pool<$db>,
                keys: &[ObjectKey],
            ) -> Result<Vec<Option<Object>>, StoreError> {
                let refs: Vec<&ObjectKey> = keys.iter().collect();
                let mut conn = pool.acquire().await?;
                let found = rows(&mut conn, &refs).await?;
                keys.iter()
                    .map(|k| {
                        found
                            .get(k)
                            .cloned()
                            .map(ObjectRow::into_object)
                            .transpose()
                    })
                    .collect()
            }

            /// Plans `writes` against the stored rows and stores the
            /// result in the open transaction `conn`. Returns the plan; the
            /// caller commits (and notifies if anything was written).
            pub(crate) async fn run(
                conn: &mut <$db as sqlx::Database>::Connection,
                writes: &[BatchWrite],
            ) -> Result<BatchPlan, StoreError> {
                let last: i64 = sqlx::query_scalar(batch::LOCK_REVISION)
                    .fetch_one(&mut *conn)
                    .await?;
                let keys: Vec<&ObjectKey> = writes.iter().map(BatchWrite::key).collect();
                let current = rows(&mut *conn, &keys).await?;
                let plan = batch::plan_batch(writes, current, last);
                if plan.changes.is_empty() {
                    return Ok(plan);
                }
                let (gone, kept): (Vec<usize>, Vec<usize>) = plan
                    .finals
                    .iter()
                    .partition(|&&i| plan.changes[i].is_delete());
                let gone: Vec<&ObjectKey> = gone.iter().map(|&i| &plan.changes[i].key).collect();
                for (kind, mesh, names) in batch::name_chunks(&gone) {
                    let sql = batch::delete_names(BINDS, names.len());
                    let mut q = sqlx::query(&sql).persistent(false).bind(kind).bind(mesh);
                    for n in names {
                        q = q.bind(n);
                    }
                    q.execute(&mut *conn).await?;
                }
                for chunk in kept.chunks(batch::ROWS_PER_STATEMENT) {
                    let sql = batch::upsert_objects(BINDS, chunk.len());
                    let mut q = sqlx::query(&sql).persistent(false);
                    for &i in chunk {
                        let c = &plan.changes[i];
                        q = q
                            .bind(&c.key.kind)
                            .bind(&c.key.mesh)
                            .bind(&c.key.name)
                            .bind(&c.labels_json)
                            .bind(&c.body_json)
                            .bind(c.revision)
                            .bind(c.create_revision);
                    }
                    q.execute(&mut *conn).await?;
                }
                for chunk in plan.changes.chunks(batch::ROWS_PER_STATEMENT) {
                    let sql = batch::insert_changes(BINDS, chunk.len());
                    let mut q = sqlx::query(&sql).persistent(false);
                    for c in chunk {
                        q = q
                            .bind(c.revision)
                            .bind(c.change_type)
                            .bind(&c.key.kind)
                            .bind(&c.key.mesh)
                            .bind(&c.key.name)
                            .bind(&c.labels_json)
                            .bind(&c.body_json)
                            .bind(c.create_revision);
                    }
                    q.execute(&mut *conn).await?;
                }
                sqlx::query(batch::SET_REVISION)
                    .bind(plan.last_revision)
                    .execute(&mut *conn)
                    .await?;
                Ok(plan)
            }
        }
    };
}

batch_backend!(sqlite_batch, sqlx::Sqlite, batch::Binds::Anonymous);
batch_backend!(postgres_batch, sqlx::Postgres, batch::Binds::Numbered);
