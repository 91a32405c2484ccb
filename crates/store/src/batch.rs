//! Batch writes and multi-gets: the part both backends share.
//!
//! [`crate::Store::write_batch`] applies several writes in ONE transaction
//! (one commit, one fsync), which is what makes coalesced bookkeeping
//! (Dataplane status, issued-certificate records) cheap. Semantics:
//!
//! - **Per item, in order.** Each item is decided against the store as
//!   left by the items before it in the same batch, exactly as if it had
//!   been written alone at that point. An item whose precondition fails
//!   ([`StoreError::AlreadyExists`], [`StoreError::NotFound`],
//!   [`StoreError::Conflict`]) gets that error in its slot, takes no
//!   revision and changes nothing; the other items still apply.
//! - **Revisions and the feed.** Every applied item takes its own revision
//!   (consecutive, in item order) and its own change-feed entry, so a
//!   watcher cannot tell a batch from the same writes made one by one,
//!   except that it sees all of them or none (one commit).
//! - **All or nothing on failure of the database.** A database error (I/O,
//!   connection lost) fails the whole call with `Err` and nothing of the
//!   batch is stored. `Ok` is returned only after the commit is durable,
//!   like every acknowledged write (I5).
//!
//! This module decides what a batch does ([`plan_batch`]) and builds the
//! multi-row SQL; it never runs a query itself.

use std::collections::{BTreeMap, HashMap};

use crate::schema::{self, ObjectRow, WriteOp};
use crate::{Object, ObjectKey, StoreError};

/// Rows per multi-row statement: at most 8 binds each, which stays well
/// inside SQLite's (32,766) and PostgreSQL's (65,535) parameter limits.
pub(crate) const ROWS_PER_STATEMENT: usize = 500;

/// One write of a batch ([`crate::Store::write_batch`]).
#[derive(Debug, Clone, PartialEq)]
pub enum BatchWrite {
    /// Creates the object; fails with [`StoreError::AlreadyExists`] if the
    /// key is taken.
    Create {
        /// Where the object goes.
        key: ObjectKey,
        /// Its labels.
        labels: BTreeMap<String, String>,
        /// Its body.
        body: serde_json::Value,
    },
    /// Replaces an existing object; fails with [`StoreError::NotFound`] if
    /// it is missing and, with `expected_revision`, with
    /// [`StoreError::Conflict`] unless the stored revision equals it.
    Update {
        /// The object.
        key: ObjectKey,
        /// Its new labels.
        labels: BTreeMap<String, String>,
        /// Its new body.
        body: serde_json::Value,
        /// The revision the caller read, for compare-and-swap.
        expected_revision: Option<u64>,
    },
    /// Creates the object, or replaces it if it exists (last writer wins).
    Put {
        /// The object.
        key: ObjectKey,
        /// Its labels.
        labels: BTreeMap<String, String>,
        /// Its body.
        body: serde_json::Value,
    },
    /// Deletes an existing object; fails with [`StoreError::NotFound`] if
    /// it is missing and, with `expected_revision`, with
    /// [`StoreError::Conflict`] unless the stored revision equals it. Its
    /// feed entry carries the object as it was, as a single delete's does.
    Delete {
        /// The object.
        key: ObjectKey,
        /// The revision the caller read, for compare-and-swap.
        expected_revision: Option<u64>,
    },
}

impl BatchWrite {
    /// The object this write touches.
    pub fn key(&self) -> &ObjectKey {
        match self {
            BatchWrite::Create { key, .. }
            | BatchWrite::Update { key, .. }
            | BatchWrite::Put { key, .. }
            | BatchWrite::Delete { key, .. } => key,
        }
    }

    fn op(&self, exists: bool) -> WriteOp<'_> {
        match self {
            BatchWrite::Create { labels, body, .. } => WriteOp::Create { labels, body },
            BatchWrite::Update {
                labels,
                body,
                expected_revision,
                ..
            } => WriteOp::Update {
                labels,
                body,
                expected_revision: *expected_revision,
            },
            BatchWrite::Put { labels, body, .. } if exists => WriteOp::Update {
                labels,
                body,
                expected_revision: None,
            },
            BatchWrite::Put { labels, body, .. } => WriteOp::Create { labels, body },
            BatchWrite::Delete {
                expected_revision, ..
            } => WriteOp::Delete {
                expected_revision: *expected_revision,
            },
        }
    }
}

/// One row to append to the change feed.
pub(crate) struct ChangeRowOut {
    pub(crate) revision: i64,
    pub(crate) change_type: &'static str,
    pub(crate) key: ObjectKey,
    pub(crate) labels_json: String,
    pub(crate) body_json: String,
    pub(crate) create_revision: i64,
}

impl ChangeRowOut {
    /// Whether this change removes its object.
    pub(crate) fn is_delete(&self) -> bool {
        self.change_type == schema::change_type_name(crate::ChangeType::Deleted)
    }
}

/// What a batch stores, decided inside its transaction.
pub(crate) struct BatchPlan {
    /// One result per item, in item order.
    pub(crate) results: Vec<Result<Object, StoreError>>,
    /// Feed entries, in revision order.
    pub(crate) changes: Vec<ChangeRowOut>,
    /// Indexes into `changes` of each touched object's final state, one per
    /// key (a multi-row upsert must not touch a row twice); a final state
    /// that is a delete removes the row instead.
    pub(crate) finals: Vec<usize>,
    /// The revision counter after the batch.
    pub(crate) last_revision: i64,
}

/// Decides every item of a batch, in order. `current` holds the stored
/// rows of the batch's keys (absent keys are missing); `last_revision` is
/// the counter as locked by the transaction.
pub(crate) fn plan_batch(
    writes: &[BatchWrite],
    mut current: HashMap<ObjectKey, ObjectRow>,
    last_revision: i64,
) -> BatchPlan {
    let mut plan = BatchPlan {
        results: Vec::with_capacity(writes.len()),
        changes: Vec::new(),
        finals: Vec::new(),
        last_revision,
    };
    let mut final_of: HashMap<ObjectKey, usize> = HashMap::new();
    for w in writes {
        let key = w.key();
        let row = current.get(key).cloned();
        let op = w.op(row.is_some());
        match schema::plan(key, op, row, plan.last_revision + 1) {
            Ok(p) => {
                plan.last_revision = p.revision;
                if p.change_type == crate::ChangeType::Deleted {
                    current.remove(key);
                } else {
                    current.insert(key.clone(), ObjectRow::planned(key, &p));
                }
                let at = plan.changes.len();
                match final_of.get(key) {
                    Some(&slot) => plan.finals[slot] = at,
                    None => {
                        final_of.insert(key.clone(), plan.finals.len());
                        plan.finals.push(at);
                    }
                }
                plan.changes.push(ChangeRowOut {
                    revision: p.revision,
                    change_type: schema::change_type_name(p.change_type),
                    key: key.clone(),
                    labels_json: p.labels_json,
                    body_json: p.body_json,
                    create_revision: p.create_revision,
                });
                plan.results.push(Ok(p.result));
            }
            Err(e) => plan.results.push(Err(e)),
        }
    }
    plan
}

/// Takes the revision counter's row lock without moving it (PostgreSQL
/// holds the lock until commit, which keeps revisions committing in order;
/// SQLite's `BEGIN IMMEDIATE` already holds the write lock).
pub(crate) const LOCK_REVISION: &str =
    "UPDATE meshlink_meta SET revision = revision WHERE id = 1 RETURNING revision";

/// Moves the revision counter to `$1`.
pub(crate) const SET_REVISION: &str = "UPDATE meshlink_meta SET revision = $1 WHERE id = 1";

/// How a backend's SQL writes bind parameters in the multi-row statements.
///
/// SQLite resolves every *named* parameter (`$N`, `?N`) through a linear
/// list, both when it prepares a statement and on every bind (sqlx asks
/// for each parameter's name), so a 4,000-parameter statement cost
/// O(n²): 7 % of the control plane's CPU in a reconnect storm was
/// `sqlite3_bind_parameter_name`. Anonymous `?` parameters are numbered in
/// order at no cost; PostgreSQL only takes `$N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binds {
    /// `?, ?, …` (SQLite): bound in the order they appear.
    Anonymous,
    /// `$1, $2, …` (PostgreSQL).
    Numbered,
}

/// Objects of kind (bind 1) in mesh (bind 2) named any of the next `n`.
pub(crate) fn select_names(binds: Binds, n: usize) -> String {
    let (kind, mesh) = match binds {
        Binds::Anonymous => ("?", "?"),
        Binds::Numbered => ("$1", "$2"),
    };
    let names = placeholders(binds, 3, n);
    format!(
        "SELECT kind, mesh, name, labels, body, revision, create_revision FROM objects \
         WHERE kind = {kind} AND mesh = {mesh} AND name IN ({names})"
    )
}

/// Deletes the objects of kind (bind 1) in mesh (bind 2) named any of
/// the next `n`.
pub(crate) fn delete_names(binds: Binds, n: usize) -> String {
    let (kind, mesh) = match binds {
        Binds::Anonymous => ("?", "?"),
        Binds::Numbered => ("$1", "$2"),
    };
    let names = placeholders(binds, 3, n);
    format!("DELETE FROM objects WHERE kind = {kind} AND mesh = {mesh} AND name IN ({names})")
}

/// Inserts or replaces `n` object rows (7 binds each, in `UPSERT_OBJECT` order).
pub(crate) fn upsert_objects(binds: Binds, n: usize) -> String {
    format!(
        "INSERT INTO objects (kind, mesh, name, labels, body, revision, create_revision) \
         VALUES {} ON CONFLICT (kind, mesh, name) DO UPDATE SET \
         labels = excluded.labels, body = excluded.body, revision = excluded.revision",
        tuples(binds, 7, n)
    )
}

/// Appends `n` change rows (8 binds each, in `INSERT_CHANGE` order).
pub(crate) fn insert_changes(binds: Binds, n: usize) -> String {
    format!(
        "INSERT INTO changes \
         (revision, change_type, kind, mesh, name, labels, body, create_revision) VALUES {}",
        tuples(binds, 8, n)
    )
}

/// `n` parameters, numbered from `first` when numbered.
fn placeholders(binds: Binds, first: usize, n: usize) -> String {
    (0..n)
        .map(|i| match binds {
            Binds::Anonymous => "?".to_owned(),
            Binds::Numbered => format!("${}", first + i),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(…), (…)`: `n` tuples of width `w`, numbered from 1 when numbered.
fn tuples(binds: Binds, w: usize, n: usize) -> String {
    (0..n)
        .map(|i| format!("({})", placeholders(binds, 1 + i * w, w)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The keys grouped by (kind, mesh), each group's names in chunks of
/// [`ROWS_PER_STATEMENT`]: one select per chunk.
pub(crate) fn name_chunks(keys: &[&ObjectKey]) -> Vec<(String, String, Vec<String>)> {
    let mut groups: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for k in keys {
        groups
            .entry((k.kind.as_str(), k.mesh.as_str()))
            .or_default()
            .push(k.name.clone());
    }
    let mut out = Vec::new();
    for ((kind, mesh), mut names) in groups {
        names.sort();
        names.dedup();
        for chunk in names.chunks(ROWS_PER_STATEMENT) {
            out.push((kind.to_owned(), mesh.to_owned(), chunk.to_vec()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_row_sql_numbers_every_bind() {
        let n = Binds::Numbered;
        assert_eq!(tuples(n, 2, 2), "($1, $2), ($3, $4)");
        assert!(select_names(n, 2).ends_with("kind = $1 AND mesh = $2 AND name IN ($3, $4)"));
        assert!(insert_changes(n, 1).ends_with("VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"));
    }

    #[test]
    fn anonymous_binds_carry_no_numbers() {
        let a = Binds::Anonymous;
        assert_eq!(tuples(a, 2, 2), "(?, ?), (?, ?)");
        assert!(select_names(a, 2).ends_with("kind = ? AND mesh = ? AND name IN (?, ?)"));
        assert!(upsert_objects(a, 1).contains("VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT"));
    }

    #[test]
    fn a_failed_item_takes_no_revision_and_later_items_see_earlier_ones() {
        let k = ObjectKey::new("Thing", "m", "a");
        let body = serde_json::json!({});
        let writes = vec![
            BatchWrite::Update {
                key: k.clone(),
                labels: BTreeMap::new(),
                body: body.clone(),
                expected_revision: None,
            },
            BatchWrite::Create {
                key: k.clone(),
                labels: BTreeMap::new(),
                body: body.clone(),
            },
            BatchWrite::Put {
                key: k.clone(),
                labels: BTreeMap::new(),
                body,
            },
        ];
        let plan = plan_batch(&writes, HashMap::new(), 10);
        assert!(matches!(plan.results[0], Err(StoreError::NotFound(_))));
        assert_eq!(plan.results[1].as_ref().unwrap().revision, 11);
        assert_eq!(plan.results[2].as_ref().unwrap().revision, 12);
        assert_eq!(plan.results[2].as_ref().unwrap().create_revision, 11);
        assert_eq!(plan.last_revision, 12);
        assert_eq!(plan.finals, vec![1]);
    }

    #[test]
    fn a_delete_in_a_batch_is_seen_by_later_items_and_ends_as_a_delete() {
        let k = ObjectKey::new("Thing", "m", "a");
        let body = serde_json::json!({});
        let writes = vec![
            BatchWrite::Create {
                key: k.clone(),
                labels: BTreeMap::new(),
                body,
            },
            BatchWrite::Delete {
                key: k.clone(),
                expected_revision: Some(11),
            },
            BatchWrite::Delete {
                key: k.clone(),
                expected_revision: None,
            },
        ];
        let plan = plan_batch(&writes, HashMap::new(), 10);
        assert_eq!(plan.results[1].as_ref().unwrap().revision, 11, "as it was");
        assert!(matches!(plan.results[2], Err(StoreError::NotFound(_))));
        assert_eq!(plan.finals, vec![1]);
        assert!(plan.changes[plan.finals[0]].is_delete());
        assert_eq!(
            delete_names(Binds::Numbered, 2),
            "DELETE FROM objects WHERE kind = $1 AND mesh = $2 AND name IN ($3, $4)"
        );
    }
}
