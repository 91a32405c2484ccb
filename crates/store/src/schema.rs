//! What both backends share: the SQL they run, the rows they read, and the
//! pure decision of what a write does ([`plan`]).
//!
//! The SQL uses `$N` placeholders, which both PostgreSQL and sqlx's SQLite
//! driver accept, so the two backends run the same statements against the
//! same logical schema (`migrations/{sqlite,postgres}/`). This module must
//! never run a query itself: transactions, locking and wake-ups belong to
//! the backends.

use std::collections::BTreeMap;

use crate::{Change, ChangeType, ListQuery, Object, ObjectKey, StoreError};

/// Takes the next global revision. Every write transaction runs this first;
/// the single counter row serializes writers until they commit.
pub(crate) const NEXT_REVISION: &str =
    "UPDATE meshlink_meta SET revision = revision + 1 WHERE id = 1 RETURNING revision";

/// The highest revision written so far.
pub(crate) const CURRENT_REVISION: &str = "SELECT revision FROM meshlink_meta WHERE id = 1";

pub(crate) const OBJECT_COLUMNS: &str = "kind, mesh, name, labels, body, revision, create_revision";

/// One object by key: `$1` kind, `$2` mesh, `$3` name.
pub(crate) fn select_object() -> String {
    format!("SELECT {OBJECT_COLUMNS} FROM objects WHERE kind = $1 AND mesh = $2 AND name = $3")
}

/// All objects of kind `$1`, or of kind `$1` in mesh `$2`, by (mesh, name).
pub(crate) fn list_objects(with_mesh: bool) -> String {
    if with_mesh {
        format!(
            "SELECT {OBJECT_COLUMNS} FROM objects WHERE kind = $1 AND mesh = $2 ORDER BY mesh, name"
        )
    } else {
        format!("SELECT {OBJECT_COLUMNS} FROM objects WHERE kind = $1 ORDER BY mesh, name")
    }
}

/// Inserts or replaces an object row (binds in [`OBJECT_COLUMNS`] order).
pub(crate) const UPSERT_OBJECT: &str = "INSERT INTO objects \
     (kind, mesh, name, labels, body, revision, create_revision) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (kind, mesh, name) DO UPDATE SET \
     labels = excluded.labels, body = excluded.body, revision = excluded.revision";

/// Removes an object row: `$1` kind, `$2` mesh, `$3` name.
pub(crate) const DELETE_OBJECT: &str =
    "DELETE FROM objects WHERE kind = $1 AND mesh = $2 AND name = $3";

/// Appends to the change feed.
pub(crate) const INSERT_CHANGE: &str = "INSERT INTO changes \
     (revision, change_type, kind, mesh, name, labels, body, create_revision) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Changes after revision `$1`, oldest first, at most `$2`.
pub(crate) const CHANGES_SINCE: &str = "SELECT revision, change_type, kind, mesh, name, labels, body, \
     create_revision FROM changes WHERE revision > $1 ORDER BY revision LIMIT $2";

/// The feed's compacted revision: changes up to it may have been deleted.
pub(crate) const COMPACTED_REVISION: &str = "SELECT revision FROM feed_compaction WHERE id = 1";

/// Raises the compacted revision to `$1`; never lowers it (concurrent
/// compactors leave the highest mark).
pub(crate) const MARK_COMPACTED: &str =
    "UPDATE feed_compaction SET revision = $1 WHERE id = 1 AND revision < $1";

/// Deletes at most `$2` changes with revision at most `$1`, oldest first.
pub(crate) const DELETE_COMPACTED: &str = "DELETE FROM changes WHERE revision IN \
     (SELECT revision FROM changes WHERE revision <= $1 ORDER BY revision LIMIT $2)";

/// An `objects` row.
#[derive(sqlx::FromRow, Clone)]
pub(crate) struct ObjectRow {
    kind: String,
    mesh: String,
    name: String,
    labels: String,
    body: String,
    revision: i64,
    create_revision: i64,
}

/// A `changes` row.
#[derive(sqlx::FromRow)]
pub(crate) struct ChangeRow {
    revision: i64,
    change_type: String,
    kind: String,
    mesh: String,
    name: String,
    labels: String,
    body: String,
    create_revision: i64,
}

/// A write as the caller asked for it.
pub(crate) enum WriteOp<'a> {
    Create {
        labels: &'a BTreeMap<String, String>,
        body: &'a serde_json::Value,
    },
    Update {
        labels: &'a BTreeMap<String, String>,
        body: &'a serde_json::Value,
        expected_revision: Option<u64>,
    },
    Delete {
        expected_revision: Option<u64>,
    },
}

/// What a write will store, decided by [`plan`] inside the transaction.
pub(crate) struct PlannedWrite {
    /// The change-feed entry type.
    pub(crate) change_type: ChangeType,
    /// The revision this write takes.
    pub(crate) revision: i64,
    /// Labels and body as stored (for deletes: the last stored ones).
    pub(crate) labels_json: String,
    pub(crate) body_json: String,
    pub(crate) create_revision: i64,
    /// What the API returns: the new object, or for deletes the object as it was.
    pub(crate) result: Object,
}

// === impl ObjectRow ===

impl ObjectRow {
    /// The row a planned (non-delete) write leaves behind.
    pub(crate) fn planned(key: &ObjectKey, p: &PlannedWrite) -> ObjectRow {
        ObjectRow {
            kind: key.kind.clone(),
            mesh: key.mesh.clone(),
            name: key.name.clone(),
            labels: p.labels_json.clone(),
            body: p.body_json.clone(),
            revision: p.revision,
            create_revision: p.create_revision,
        }
    }

    /// The key this row is stored under.
    pub(crate) fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.kind, &self.mesh, &self.name)
    }

    /// Decodes the row, reporting a corrupt body or labels by key.
    pub(crate) fn into_object(self) -> Result<Object, StoreError> {
        let key = ObjectKey::new(self.kind, self.mesh, self.name);
        decode(
            key,
            &self.labels,
            &self.body,
            self.revision,
            self.create_revision,
        )
    }
}

// === impl ChangeRow ===

impl ChangeRow {
    /// Decodes the row; the object's revision is the change's revision.
    pub(crate) fn into_change(self) -> Result<Change, StoreError> {
        let key = ObjectKey::new(self.kind, self.mesh, self.name);
        let change_type = match self.change_type.as_str() {
            "created" => ChangeType::Created,
            "updated" => ChangeType::Updated,
            "deleted" => ChangeType::Deleted,
            other => {
                return Err(StoreError::Corrupt {
                    key: key.to_string(),
                    reason: format!("change {} has unknown type {other:?}", self.revision),
                });
            }
        };
        let object = decode(
            key,
            &self.labels,
            &self.body,
            self.revision,
            self.create_revision,
        )?;
        Ok(Change {
            revision: object.revision,
            change_type,
            object,
        })
    }
}

/// The name a change type has in the `changes.change_type` column.
pub(crate) fn change_type_name(t: ChangeType) -> &'static str {
    match t {
        ChangeType::Created => "created",
        ChangeType::Updated => "updated",
        ChangeType::Deleted => "deleted",
    }
}

/// Decides what a write does, given the row as it is now (read inside the
/// write transaction, after taking `revision`). Errors abort the
/// transaction, which also gives the revision back.
pub(crate) fn plan(
    key: &ObjectKey,
    op: WriteOp<'_>,
    current: Option<ObjectRow>,
    revision: i64,
) -> Result<PlannedWrite, StoreError> {
    let check = |expected: Option<u64>, row: &ObjectRow| match expected {
        Some(expected) if to_u64(row.revision) != expected => Err(StoreError::Conflict {
            key: key.to_string(),
            expected,
            actual: to_u64(row.revision),
        }),
        _ => Ok(()),
    };
    let (change_type, labels_json, body_json, create_revision) = match (op, current) {
        (WriteOp::Create { .. }, Some(_)) => {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        (WriteOp::Update { .. } | WriteOp::Delete { .. }, None) => {
            return Err(StoreError::NotFound(key.to_string()));
        }
        (WriteOp::Create { labels, body }, None) => (
            ChangeType::Created,
            encode(labels),
            body.to_string(),
            revision,
        ),
        (
            WriteOp::Update {
                labels,
                body,
                expected_revision,
            },
            Some(row),
        ) => {
            check(expected_revision, &row)?;
            (
                ChangeType::Updated,
                encode(labels),
                body.to_string(),
                row.create_revision,
            )
        }
        (WriteOp::Delete { expected_revision }, Some(row)) => {
            check(expected_revision, &row)?;
            let result = row.into_object()?;
            return Ok(PlannedWrite {
                change_type: ChangeType::Deleted,
                revision,
                labels_json: encode(&result.labels),
                body_json: result.body.to_string(),
                create_revision: to_i64(result.create_revision),
                result,
            });
        }
    };
    let result = decode(
        key.clone(),
        &labels_json,
        &body_json,
        revision,
        create_revision,
    )?;
    Ok(PlannedWrite {
        change_type,
        revision,
        labels_json,
        body_json,
        create_revision,
        result,
    })
}

fn encode(labels: &BTreeMap<String, String>) -> String {
    serde_json::to_string(labels).expect("a map of strings always serializes")
}

fn decode(
    key: ObjectKey,
    labels: &str,
    body: &str,
    revision: i64,
    create_revision: i64,
) -> Result<Object, StoreError> {
    let corrupt = |what: &str, e: serde_json::Error| StoreError::Corrupt {
        key: key.to_string(),
        reason: format!("{what} is not valid JSON: {e}"),
    };
    let labels = serde_json::from_str(labels).map_err(|e| corrupt("labels", e))?;
    let body = serde_json::from_str(body).map_err(|e| corrupt("body", e))?;
    Ok(Object {
        key,
        labels,
        body,
        revision: to_u64(revision),
        create_revision: to_u64(create_revision),
    })
}

/// Decodes listed rows and applies the label selector.
pub(crate) fn select_listed(
    rows: Vec<ObjectRow>,
    query: &ListQuery,
) -> Result<Vec<Object>, StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let object = row.into_object()?;
        if query
            .selector
            .as_ref()
            .is_none_or(|s| s.matches(&object.labels))
        {
            out.push(object);
        }
    }
    Ok(out)
}

/// SQL integers are signed; revisions start at 1 and never go negative.
pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Revisions and limits beyond `i64::MAX` cannot exist in the database.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
