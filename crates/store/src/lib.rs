//! meshlink's durable store.
//!
//! Owns persistence of resources as revisioned objects and the change feed.
//! Every write gets the next value of one global, monotonic revision; an
//! object's `revision` is the revision of its last write (its
//! `resourceVersion`). The change feed replays every write after a given
//! revision, in order, exactly once, and survives restarts. The feed keeps
//! a bounded window of history: [`Store::compact`] deletes the changes up
//! to a revision (the current objects are never touched), and a watcher
//! that asks for changes compaction deleted gets [`StoreError::Compacted`]
//! and must list again, as a Kubernetes client does on `410 Gone`.
//! [`Retention`] and [`Compactor`] decide how much history to keep.
//!
//! The store knows nothing of resource semantics: bodies are JSON. It must
//! never acknowledge a write that is not durable.

use std::collections::BTreeMap;

use futures::stream::BoxStream;

mod batch;
mod batch_exec;
mod compactor;
mod error;
mod feed;
mod feed_exec;
mod page;
mod schema;
mod selector;

pub use batch::BatchWrite;
pub use compactor::{Compactor, Retention, resync_revision};
pub use error::StoreError;
pub use page::{ListCursor, ListPage};
pub use selector::{LabelSelector, SelectorError};

/// Where an object lives: kind, mesh (empty for global kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Kind name, e.g. `Dataplane`. Internal kinds start with `internal.`.
    pub kind: String,
    /// Mesh name, or empty for kinds that are not mesh-scoped.
    pub mesh: String,
    /// Object name.
    pub name: String,
}

impl ObjectKey {
    /// Builds a key.
    pub fn new(kind: impl Into<String>, mesh: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            kind: kind.into(),
            mesh: mesh.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.mesh.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.mesh, self.name)
        }
    }
}

/// A stored object as of its last write.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Where it lives.
    pub key: ObjectKey,
    /// Labels, for selector queries.
    pub labels: BTreeMap<String, String>,
    /// The opaque JSON body.
    pub body: serde_json::Value,
    /// Revision of the last write (the `resourceVersion`).
    pub revision: u64,
    /// Revision at which the object was created.
    pub create_revision: u64,
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChangeType {
    /// The object was created.
    Created,
    /// The object was updated.
    Updated,
    /// The object was deleted.
    Deleted,
}

/// One entry of the change feed.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The global revision of this write.
    pub revision: u64,
    /// What happened.
    pub change_type: ChangeType,
    /// The object after the write (for deletes: as it was when deleted,
    /// with `revision` set to the delete's revision).
    pub object: Object,
}

/// What one [`Store::compact`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compaction {
    /// The feed's compacted revision afterwards: every change up to it is
    /// gone, and watching from an earlier revision fails with
    /// [`StoreError::Compacted`].
    pub revision: u64,
    /// Changes this call deleted.
    pub deleted: u64,
}

/// A list query: one kind, optionally one mesh and a label selector, and
/// optionally one page of the result (keyset paging, see [`Store::list_page`]).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// The kind to list.
    pub kind: String,
    /// Only this mesh, when set.
    pub mesh: Option<String>,
    /// Only objects whose labels match, when set.
    pub selector: Option<LabelSelector>,
    /// Only objects strictly after this `(mesh, name)` in list order, when
    /// set: where the previous page ended ([`ListPage::next`]).
    pub after: Option<ListCursor>,
    /// At most this many objects, when set. Zero cannot be asked for; a
    /// limit larger than the result is the whole result (the backends read
    /// in batches of at most 1,000 rows, so a huge limit
    /// never sizes an allocation).
    pub limit: Option<std::num::NonZeroUsize>,
}

/// The durable store used by the control plane. Implemented by the SQLite
/// and PostgreSQL backends; both pass the same conformance suite.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads one object.
    async fn get(&self, key: &ObjectKey) -> Result<Option<Object>, StoreError>;

    /// Lists objects of a kind, sorted by (mesh, name).
    async fn list(&self, query: &ListQuery) -> Result<Vec<Object>, StoreError>;

    /// Creates an object. Fails with [`StoreError::AlreadyExists`] if the key is taken.
    async fn create(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
    ) -> Result<Object, StoreError>;

    /// Replaces an existing object. With `expected_revision`, fails with
    /// [`StoreError::Conflict`] unless the stored revision equals it.
    async fn update(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
        expected_revision: Option<u64>,
    ) -> Result<Object, StoreError>;

    /// Deletes an object, returning it as it was. With `expected_revision`,
    /// fails with [`StoreError::Conflict`] unless the stored revision equals it.
    async fn delete(
        &self,
        key: &ObjectKey,
        expected_revision: Option<u64>,
    ) -> Result<Object, StoreError>;

    /// The highest revision written so far (0 for an empty store).
    async fn current_revision(&self) -> Result<u64, StoreError>;

    /// Changes with revision greater than `after`, oldest first, at most
    /// `limit`. Fails with [`StoreError::Compacted`] when `after` is older
    /// than the feed keeps ([`Store::compacted_revision`]).
    async fn changes_since(&self, after: u64, limit: usize) -> Result<Vec<Change>, StoreError>;

    /// A never-ending stream of every change with revision greater than
    /// `after`, in revision order, each exactly once. It first replays
    /// history, then follows new writes (including other processes' writes,
    /// for PostgreSQL). An error item means the stream cannot continue;
    /// [`StoreError::Compacted`] means the watcher fell behind the feed's
    /// window and must list again (see [`resync_revision`]).
    fn watch(&self, after: u64) -> BoxStream<'static, Result<Change, StoreError>>;

    /// Deletes the change feed's history up to and including `revision`
    /// (clamped to the committed revision), leaving every object as it is.
    /// Idempotent and safe to run from several processes at once; the
    /// compacted revision only ever rises. See `feed_exec` for why a
    /// watcher can never miss a change silently because of it.
    async fn compact(&self, revision: u64) -> Result<Compaction, StoreError>;

    /// The feed's compacted revision: changes up to it may be gone (0 when
    /// nothing was compacted). The oldest revision a watcher can resume
    /// after is this one.
    async fn compacted_revision(&self) -> Result<u64, StoreError>;

    /// A short backend name for logs and metrics: `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Reads several objects at once (a few queries, whatever the count):
    /// one result per key, in the order of `keys`. Each object is as of its
    /// last write; the reads are not one snapshot across (kind, mesh) groups.
    async fn get_many(&self, keys: &[ObjectKey]) -> Result<Vec<Option<Object>>, StoreError>;

    /// Applies several writes in ONE transaction, with one result per item
    /// in item order. Items are decided in order, each as if written alone;
    /// a failed precondition (exists, missing, conflict) fails only its own
    /// item, which then takes no revision. Every applied item gets its own
    /// revision and change, consecutive and in item order, and all become
    /// visible at once. A database error fails the whole call and stores
    /// nothing. See [`BatchWrite`] and the `batch` module for the details.
    async fn write_batch(
        &self,
        writes: &[BatchWrite],
    ) -> Result<Vec<Result<Object, StoreError>>, StoreError>;

    /// One page of a list: at most `query.limit` objects strictly after
    /// `query.after`, in (mesh, name) order, and where the next page starts
    /// when more matching objects exist.
    ///
    /// Each page is read on its own (a keyset query, `(mesh, name) > after
    /// ORDER BY mesh, name LIMIT n`), so objects written between pages are
    /// seen if they sort after the cursor and not if before; an object that
    /// exists, unchanged in key, for the whole walk is returned exactly once.
    ///
    /// The default implementation lists everything and cuts the page out
    /// (for test doubles); the SQLite and PostgreSQL backends override it
    /// with a keyset query on the primary key.
    async fn list_page(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        let whole = ListQuery {
            after: None,
            limit: None,
            ..query.clone()
        };
        Ok(page::cut(self.list(&whole).await?, query))
    }
}

mod postgres;
mod sqlite;

pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::SqliteStore;

/// Opens the store a URL names: `sqlite://PATH` (created if missing) or
/// `postgres://…`. Runs pending schema migrations before returning.
pub async fn open(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        Ok(std::sync::Arc::new(
            SqliteStore::open(std::path::Path::new(path)).await?,
        ))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(std::sync::Arc::new(PostgresStore::connect(url).await?))
    } else {
        Err(StoreError::Config(format!(
            "unsupported store URL {url:?}; use sqlite://PATH or postgres://USER@HOST/DB"
        )))
    }
}
