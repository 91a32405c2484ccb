//! Keyset paging of lists: [`ListCursor`], [`ListPage`], the SQL of one
//! keyset batch and the loop both backends run to fill a page.
//!
//! A page is `(mesh, name) > cursor ORDER BY mesh, name LIMIT n` on the
//! `objects` primary key `(kind, mesh, name)`, so a page costs the same
//! wherever it starts and the store holds nothing between pages. Label
//! selectors are matched in Rust (as in [`crate::selector`]), so one page
//! may read several batches of rows; a page stops as soon as it has one
//! match more than asked for, which is how it knows whether a next page
//! exists. This module must never hold a connection across pages.

use std::future::Future;

use crate::schema::ObjectRow;
use crate::{ListQuery, Object, StoreError};

/// Most rows one keyset batch reads.
pub(crate) const MAX_BATCH: usize = 1_000;

/// A position in a list's (mesh, name) order: a page starts strictly after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListCursor {
    /// Mesh of the last object of the previous page (empty for global kinds).
    pub mesh: String,
    /// Name of the last object of the previous page.
    pub name: String,
}

impl ListCursor {
    /// The cursor just after `object`.
    pub fn after(object: &Object) -> Self {
        ListCursor {
            mesh: object.key.mesh.clone(),
            name: object.key.name.clone(),
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListPage {
    /// The objects of this page, in (mesh, name) order.
    pub objects: Vec<Object>,
    /// Where the next page starts (the last object of this page), when at
    /// least one more matching object existed when the page was read.
    pub next: Option<ListCursor>,
}

/// Fills one page of `$query` from `$pool` with keyset batches
/// ([`batch_sql`] bound in order: kind, mesh?, cursor, row count). A macro
/// because the statements are the same for SQLite and PostgreSQL and only
/// the sqlx driver types differ (as in `batch_exec`).
macro_rules! keyset_page {
    ($pool:expr, $query:expr) => {{
        let (pool, query) = ($pool, $query);
        crate::page::fill(query, |after, rows| {
            let sql = crate::page::batch_sql(query.mesh.is_some(), after.is_some());
            async move {
                let mut q = sqlx::query_as::<_, crate::schema::ObjectRow>(&sql).bind(&query.kind);
                if let Some(mesh) = &query.mesh {
                    q = q.bind(mesh);
                }
                match after {
                    Some(after) if query.mesh.is_some() => q = q.bind(after.name),
                    Some(after) => q = q.bind(after.mesh).bind(after.name),
                    None => {}
                }
                q.bind(rows).fetch_all(pool).await
            }
        })
        .await
    }};
}
pub(crate) use keyset_page;

/// The SQL of one keyset batch. Binds, in order: kind; the mesh when
/// `with_mesh`; when `with_after`, the cursor's mesh and name, or only its
/// name when `with_mesh` (within one mesh, `name > $n` lets both databases
/// walk the primary key without sorting); the row limit.
pub(crate) fn batch_sql(with_mesh: bool, with_after: bool) -> String {
    let mut sql = format!(
        "SELECT {} FROM objects WHERE kind = $1",
        crate::schema::OBJECT_COLUMNS
    );
    let mut n = 1;
    if with_mesh {
        n += 1;
        sql.push_str(&format!(" AND mesh = ${n}"));
    }
    match (with_mesh, with_after) {
        (true, true) => {
            n += 1;
            sql.push_str(&format!(" AND name > ${n}"));
        }
        (false, true) => {
            sql.push_str(&format!(" AND (mesh, name) > (${}, ${})", n + 1, n + 2));
            n += 2;
        }
        _ => {}
    }
    sql.push_str(&format!(" ORDER BY mesh, name LIMIT ${}", n + 1));
    sql
}

/// Fills one page by running `fetch(after, rows)` (one keyset batch of at
/// most `rows` rows after `after`) until the page has `limit + 1` matches or
/// the rows run out.
pub(crate) async fn fill<F, Fut>(query: &ListQuery, mut fetch: F) -> Result<ListPage, StoreError>
where
    F: FnMut(Option<crate::ListCursor>, i64) -> Fut,
    Fut: Future<Output = Result<Vec<ObjectRow>, sqlx::Error>>,
{
    let limit = query.limit.map_or(usize::MAX, |l| l.get());
    // One match more than asked for tells whether a next page exists.
    let want = limit.saturating_add(1);
    let mut objects = Vec::new();
    let mut after = query.after.clone();
    // In one mesh the batches compare names only: a cursor in an earlier
    // mesh starts at the beginning, one in a later mesh is past the end.
    if let (Some(mesh), Some(a)) = (&query.mesh, &after) {
        match a.mesh.cmp(mesh) {
            std::cmp::Ordering::Less => after = None,
            std::cmp::Ordering::Greater => return Ok(ListPage::default()),
            std::cmp::Ordering::Equal => {}
        }
    }
    loop {
        let rows = want.saturating_sub(objects.len()).min(MAX_BATCH);
        let batch = fetch(after.clone(), rows as i64).await?;
        let exhausted = batch.len() < rows;
        for row in batch {
            let object = row.into_object()?;
            after = Some(ListCursor::after(&object));
            if matches(query, &object) {
                objects.push(object);
            }
        }
        if objects.len() >= want || exhausted {
            break;
        }
    }
    Ok(finish(objects, limit))
}

/// Cuts a page out of a whole list in (mesh, name) order: the default
/// [`crate::Store::list_page`].
pub(crate) fn cut(all: Vec<Object>, query: &ListQuery) -> ListPage {
    let limit = query.limit.map_or(usize::MAX, |l| l.get());
    let objects: Vec<Object> = all
        .into_iter()
        .filter(|o| {
            query
                .after
                .as_ref()
                .is_none_or(|a| (&o.key.mesh, &o.key.name) > (&a.mesh, &a.name))
        })
        .filter(|o| matches(query, o))
        .take(limit.saturating_add(1))
        .collect();
    finish(objects, limit)
}

fn matches(query: &ListQuery, object: &Object) -> bool {
    query
        .selector
        .as_ref()
        .is_none_or(|s| s.matches(&object.labels))
}

/// `objects` holds up to `limit + 1` matches: keep `limit`, and point the
/// next page after the last kept one when there was one more.
fn finish(mut objects: Vec<Object>, limit: usize) -> ListPage {
    let next = if objects.len() > limit {
        objects.truncate(limit);
        objects.last().map(ListCursor::after)
    } else {
        None
    };
    ListPage { objects, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sql_numbers_placeholders_in_bind_order() {
        assert!(batch_sql(false, false).ends_with("WHERE kind = $1 ORDER BY mesh, name LIMIT $2"));
        assert!(
            batch_sql(true, false)
                .ends_with("kind = $1 AND mesh = $2 ORDER BY mesh, name LIMIT $3")
        );
        assert!(
            batch_sql(false, true)
                .ends_with("kind = $1 AND (mesh, name) > ($2, $3) ORDER BY mesh, name LIMIT $4")
        );
        assert!(
            batch_sql(true, true)
                .ends_with("kind = $1 AND mesh = $2 AND name > $3 ORDER BY mesh, name LIMIT $4")
        );
    }
}
