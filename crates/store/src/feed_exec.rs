//! Reading and compacting the change feed, written once as a macro and
//! expanded per sqlx backend (`sqlite_feed`, `postgres_feed`), because the
//! statements are the same and only the driver types differ (as in
//! `batch_exec`).
//!
//! # Compaction never hides a gap
//!
//! Compaction deletes the changes up to a revision `C` and records `C` in
//! `feed_compaction`. Two rules keep a watcher from ever skipping a change
//! silently:
//!
//! - **`C` is committed history.** [`compact`](sqlite_feed::compact) never
//!   marks past the revision counter's committed value. Revisions commit in
//!   order (see `postgres.rs`, "Revision order"), so every change up to `C`
//!   is visible and none is still to come: compaction cannot delete a row
//!   before a watcher could read it, nor leave a hole above `C`.
//! - **Mark first, delete after; read rows first, the mark after.** The
//!   mark commits before any row is deleted, and
//!   [`changes_since`](sqlite_feed::changes_since) reads the rows before
//!   the mark. A read that missed a deleted row therefore started after
//!   the deletion committed, so the mark read after it shows `C`, and the
//!   reader gets [`StoreError::Compacted`] instead of a page with a hole.
//!   (A reader that read the rows just before they went may get
//!   `Compacted` although its page was whole: early, never wrong.)
//!
//! Deleting is idempotent (`revision <= C`), so several compactors (one per
//! control plane on a shared PostgreSQL) may run at once; the mark only
//! ever rises.

/// Changes deleted per statement: each chunk is its own short transaction,
/// so writers queue behind at most one chunk, not a whole compaction.
pub(crate) const DELETE_CHUNK: i64 = 5_000;

/// Expands to a module `$module` with `changes_since`, `compacted_revision`
/// and `compact` for the sqlx database `$db`.
macro_rules! feed_backend {
    ($module:ident, $db:ty) => {
        pub(crate) mod $module {
            use crate::schema::{self, ChangeRow};
            use crate::{Change, Compaction, StoreError};

            /// Changes after `after`, oldest first, at most `limit`; fails
            /// with [`StoreError::Compacted`] when compaction deleted any
            /// change after `after`.
            pub(crate) async fn changes_since(
                pool: &sqlx::Pool<$db>,
                after: u64,
                limit: usize,
            ) -> Result<Vec<Change>, StoreError> {
                let rows: Vec<ChangeRow> = sqlx::query_as(schema::CHANGES_SINCE)
                    .bind(schema::to_i64(after))
                    .bind(schema::to_i64(limit as u64))
                    .fetch_all(pool)
                    .await?;
                // After the rows, never before (see the module docs).
                let compacted = compacted_revision(pool).await?;
                if after < compacted {
                    return Err(StoreError::Compacted {
                        requested: after,
                        oldest: compacted + 1,
                    });
                }
                rows.into_iter().map(ChangeRow::into_change).collect()
            }

            /// The feed's compacted revision (0: nothing compacted).
            pub(crate) async fn compacted_revision(
                pool: &sqlx::Pool<$db>,
            ) -> Result<u64, StoreError> {
                let rev: i64 = sqlx::query_scalar(schema::COMPACTED_REVISION)
                    .fetch_one(pool)
                    .await?;
                Ok(schema::to_u64(rev))
            }

            /// Marks the feed compacted up to `revision` (at most the
            /// committed revision), then deletes every change up to the
            /// mark, a chunk per statement. `pool` must be a pool that may
            /// write (SQLite: the writer).
            pub(crate) async fn compact(
                pool: &sqlx::Pool<$db>,
                revision: u64,
            ) -> Result<Compaction, StoreError> {
                let current: i64 = sqlx::query_scalar(schema::CURRENT_REVISION)
                    .fetch_one(pool)
                    .await?;
                let target = schema::to_i64(revision).min(current);
                sqlx::query(schema::MARK_COMPACTED)
                    .bind(target)
                    .execute(pool)
                    .await?;
                // Another compactor may have marked higher: delete up to the
                // mark, which also finishes its deletes if it stopped early.
                let marked = compacted_revision(pool).await?;
                let mut deleted = 0;
                loop {
                    let n = sqlx::query(schema::DELETE_COMPACTED)
                        .bind(schema::to_i64(marked))
                        .bind(super::DELETE_CHUNK)
                        .execute(pool)
                        .await?
                        .rows_affected();
                    deleted += n;
                    if n < super::DELETE_CHUNK as u64 {
                        break;
                    }
                }
                Ok(Compaction {
                    revision: marked,
                    deleted,
                })
            }
        }
    };
}

feed_backend!(sqlite_feed, sqlx::Sqlite);
feed_backend!(postgres_feed, sqlx::Postgres);
