//! The resource service: typed resources on top of the store.
//!
//! Owns apply semantics (created / configured / unchanged), optimistic
//! concurrency and status ownership (users never write status through
//! apply). What references what ("the mesh exists", "nothing uses what is
//! deleted") is decided by [`crate::references`], which apply and delete
//! consult. The REST API and every internal controller go through it. It
//! never writes a resource that fails validation.

use std::num::NonZeroUsize;
use std::sync::Arc;

use meshlink_api::{FieldError, Kind, Resource, Status};
use meshlink_store::{
    BatchWrite, Change, ChangeType, LabelSelector, ListCursor, ListQuery, ObjectKey, Store,
    StoreError,
};

use crate::references::ObjectId;
use crate::references::apply_check::Pending;

/// What `apply` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApplyOutcome {
    /// The resource did not exist and was created.
    Created,
    /// The resource existed and its desired state changed.
    Configured,
    /// The resource existed with the same desired state; nothing was written.
    Unchanged,
}

/// Why a resource operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// No such resource.
    #[error("{0} not found")]
    NotFound(String),
    /// The resource exists already.
    #[error("{0} already exists; use apply to change it")]
    AlreadyExists(String),
    /// The resource changed since the caller read it.
    #[error("{0}")]
    Conflict(String),
    /// The resource is invalid; every field error is listed.
    #[error("invalid resource: {}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The resource is still used by others (a Mesh with Dataplanes, a
    /// Site with Listeners, ...; see [`crate::references`]); the message
    /// names them as `Kind/name` and the fix.
    #[error("{0}")]
    InUse(String),
    /// The store failed; the request may be retried.
    #[error("store unavailable: {0}")]
    Store(StoreError),
}

impl From<StoreError> for ResourceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(k) => ResourceError::NotFound(k),
            StoreError::AlreadyExists(k) => ResourceError::AlreadyExists(k),
            e @ StoreError::Conflict { .. } => ResourceError::Conflict(e.to_string()),
            e => ResourceError::Store(e),
        }
    }
}

/// A change to an API resource, as the watch API reports it.
#[derive(Debug, Clone)]
pub struct ResourceEvent {
    /// Store revision of the change.
    pub revision: u64,
    /// Created, updated or deleted.
    pub change_type: ChangeType,
    /// The resource after the change (as deleted, for deletes).
    pub resource: Resource,
}

/// Typed access to resources in the store.
#[derive(Clone)]
pub struct ResourceService {
    store: Arc<dyn Store>,
}

/// The store key of a resource.
pub fn key_of(kind: Kind, mesh: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey::new(kind.as_str(), mesh.unwrap_or(""), name)
}

/// The store query for a list; `mesh` is ignored for global kinds.
fn list_query(kind: Kind, mesh: Option<&str>, selector: Option<LabelSelector>) -> ListQuery {
    ListQuery {
        kind: kind.as_str().to_string(),
        mesh: mesh.filter(|_| kind.allows_mesh()).map(str::to_string),
        selector,
        ..ListQuery::default()
    }
}

/// `metadata.resourceVersion` was given for a resource that does not exist.
fn missing_at_version(r: &Resource, v: u64) -> ResourceError {
    ResourceError::Conflict(format!(
        "{} does not exist, but resourceVersion {v} was given; drop metadata.resourceVersion to create it",
        describe(r.kind(), r.mesh(), r.name())
    ))
}

/// `metadata.resourceVersion` is not the stored revision.
fn stale_version(key: &ObjectKey, expected: u64, actual: u64) -> ResourceError {
    ResourceError::Conflict(
        StoreError::Conflict {
            key: key.to_string(),
            expected,
            actual,
        }
        .to_string(),
    )
}

/// `Mesh "shop"`, `Secret "ca" in mesh "corp"`: a resource in messages.
pub(crate) fn describe(kind: Kind, mesh: Option<&str>, name: &str) -> String {
    match mesh {
        Some(m) => format!("{} {name:?} in mesh {m:?}", kind.as_str()),
        None => format!("{} {name:?}", kind.as_str()),
    }
}

/// Resources per store page in [`ResourceService::for_each`].
pub const WALK_PAGE: NonZeroUsize = NonZeroUsize::new(500).expect("500 is not zero");

/// Parses a `resourceVersion` string.
pub fn parse_version(v: &str) -> Result<u64, ResourceError> {
    v.parse().map_err(|_| {
        ResourceError::Invalid(vec![FieldError::new(
            "metadata.resourceVersion",
            format!(
                "{v:?} is not a resourceVersion issued by this control plane (a decimal number)"
            ),
        )])
    })
}

// === impl ResourceService ===

impl ResourceService {
    /// Wraps a store.
    pub fn new(store: Arc<dyn Store>) -> Self {
        ResourceService { store }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A stored object as a resource, its revision as `resourceVersion`.
    pub(crate) fn decode(obj: meshlink_store::Object) -> Result<Resource, ResourceError> {
        let key = obj.key.to_string();
        let mut r = Resource::from_json_unvalidated(obj.body).map_err(|errs| {
            ResourceError::Store(StoreError::Corrupt {
                key,
                reason: errs
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            })
        })?;
        r.set_resource_version(Some(obj.revision.to_string()));
        Ok(r)
    }

    /// A resource as the store keeps it (without `resourceVersion`).
    pub(crate) fn encode(r: &Resource) -> serde_json::Value {
        let mut r = r.clone();
        r.set_resource_version(None);
        r.to_json()
    }

    /// Checks that `mesh` fits `kind`'s scope.
    pub fn check_scope(kind: Kind, mesh: Option<&str>) -> Result<(), ResourceError> {
        match (kind.is_mesh_scoped(), mesh) {
            (true, None) => Err(ResourceError::BadRequest(format!(
                "{kind} is mesh-scoped: name the mesh (?mesh= in the API, -m/--mesh in the CLI)"
            ))),
            (false, Some(m)) if !kind.allows_mesh() => Err(ResourceError::BadRequest(format!(
                "{kind} is not mesh-scoped, but mesh {m:?} was given; drop the mesh"
            ))),
            _ => Ok(()),
        }
    }

    /// Reads one resource.
    pub async fn get(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        name: &str,
    ) -> Result<Resource, ResourceError> {
        Self::check_scope(kind, mesh)?;
        match self.store.get(&key_of(kind, mesh, name)).await? {
            Some(obj) => Self::decode(obj),
            None => Err(ResourceError::NotFound(describe(kind, mesh, name))),
        }
    }

    /// Lists resources of a kind, optionally in one mesh and matching a selector.
    pub async fn list(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        selector: Option<LabelSelector>,
    ) -> Result<Vec<Resource>, ResourceError> {
        self.store
            .list(&list_query(kind, mesh, selector))
            .await?
            .into_iter()
            .map(Self::decode)
            .collect()
    }

    /// One page of [`ResourceService::list`]: at most `limit` resources
    /// strictly after `after` in (mesh, name) order, and where the next page
    /// starts when more remain (see [`Store::list_page`]).
    pub async fn list_page(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        selector: Option<LabelSelector>,
        after: Option<ListCursor>,
        limit: NonZeroUsize,
    ) -> Result<(Vec<Resource>, Option<ListCursor>), ResourceError> {
        let q = ListQuery {
            after,
            limit: Some(limit),
            ..list_query(kind, mesh, selector)
        };
        let page = self.store.list_page(&q).await?;
        let items = page
            .objects
            .into_iter()
            .map(Self::decode)
            .collect::<Result<_, _>>()?;
        Ok((items, page.next))
    }

    /// Calls `f` with every resource of a kind (optionally in one mesh),
    /// one store page of [`WALK_PAGE`] at a time, so a walk over 10,000
    /// Dataplanes never holds more than one page of rows and decoded
    /// resources (start-up loads and periodic sweeps use it instead of
    /// [`ResourceService::list`]).
    pub async fn for_each(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        mut f: impl FnMut(Resource),
    ) -> Result<(), ResourceError> {
        let mut after = None;
        loop {
            let (items, next) = self.list_page(kind, mesh, None, after, WALK_PAGE).await?;
            items.into_iter().for_each(&mut f);
            match next {
                Some(n) => after = Some(n),
                None => return Ok(()),
            }
        }
    }

    fn validated(r: &Resource) -> Result<(), ResourceError> {
        Self::check_scope(r.kind(), r.mesh())?;
        let errs = r.validate();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ResourceError::Invalid(errs))
        }
    }

    /// Creates a resource; fails if it exists. User-supplied status is dropped.
    pub async fn create(&self, mut r: Resource) -> Result<Resource, ResourceError> {
        Self::validated(&r)?;
        crate::secret_check::check_secret(&r)?;
        self.check_references(&r, None, &Pending::new()).await?;
        r.clear_status();
        let obj = self
            .store
            .create(
                &key_of(r.kind(), r.mesh(), r.name()),
                r.labels(),
                &Self::encode(&r),
            )
            .await?;
        Self::decode(obj)
    }

    /// Creates or updates a resource to the given desired state. With
    /// `metadata.resourceVersion` set, the write is conditional on it.
    /// Status is never taken from the input; the stored status is kept.
    pub async fn apply(&self, mut r: Resource) -> Result<(ApplyOutcome, Resource), ResourceError> {
        Self::validated(&r)?;
        let expected = r.resource_version().map(parse_version).transpose()?;
        let key = key_of(r.kind(), r.mesh(), r.name());
        // Without an expected version, a concurrent writer between our read
        // and our conditional write is retried; with one, it is the caller's
        // conflict to resolve.
        for _ in 0..5 {
            let Some(existing) = self.store.get(&key).await? else {
                if let Some(v) = expected {
                    return Err(missing_at_version(&r, v));
                }
                match self.create(r.clone()).await {
                    Ok(created) => return Ok((ApplyOutcome::Created, created)),
                    Err(ResourceError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e),
                }
            };
            if let Some(v) = expected
                && v != existing.revision
            {
                return Err(stale_version(&key, v, existing.revision));
            }
            let current = Self::decode(existing.clone())?;
            crate::secret_check::restore_redacted_key(&mut r, Some(&current))?;
            crate::secret_check::check_secret(&r)?;
            if current.same_desired_state(&r) {
                return Ok((ApplyOutcome::Unchanged, current));
            }
            self.check_references(&r, Some(&current), &Pending::new())
                .await?;
            let mut next = r.clone();
            next.copy_status_from(&current);
            match self
                .store
                .update(
                    &key,
                    next.labels(),
                    &Self::encode(&next),
                    Some(expected.unwrap_or(existing.revision)),
                )
                .await
            {
                Ok(obj) => return Ok((ApplyOutcome::Configured, Self::decode(obj)?)),
                Err(StoreError::Conflict { .. }) if expected.is_none() => continue,
                Err(StoreError::NotFound(_)) if expected.is_none() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ResourceError::Conflict(format!(
            "{} is being changed concurrently; retry",
            describe(r.kind(), r.mesh(), r.name())
        )))
    }

    /// Runs every check [`Self::apply`] runs (validation, scope,
    /// `resourceVersion`, "the mesh exists") without writing, and says what
    /// apply would do. `pending_meshes` are Meshes the same apply creates
    /// before this resource, so a reference to them counts as satisfied;
    /// likewise `pending_secrets` (mesh, name) for a Mesh's `secret:`.
    pub async fn dry_run_apply(
        &self,
        r: &Resource,
        pending_meshes: &std::collections::BTreeSet<String>,
        pending_secrets: &std::collections::BTreeSet<(String, String)>,
    ) -> Result<ApplyOutcome, ResourceError> {
        Self::validated(r)?;
        let expected = r.resource_version().map(parse_version).transpose()?;
        let key = key_of(r.kind(), r.mesh(), r.name());
        let meshes = pending_meshes.iter().map(|m| ObjectId {
            kind: Kind::Mesh,
            mesh: None,
            name: m.clone(),
        });
        let secrets = pending_secrets.iter().map(|(m, n)| ObjectId {
            kind: Kind::Secret,
            mesh: Some(m.clone()),
            name: n.clone(),
        });
        let pending: Pending = meshes.chain(secrets).collect();
        let Some(existing) = self.store.get(&key).await? else {
            if let Some(v) = expected {
                return Err(missing_at_version(r, v));
            }
            crate::secret_check::check_secret(r)?;
            self.check_references(r, None, &pending).await?;
            return Ok(ApplyOutcome::Created);
        };
        if let Some(v) = expected
            && v != existing.revision
        {
            return Err(stale_version(&key, v, existing.revision));
        }
        let current = Self::decode(existing)?;
        let mut r = r.clone();
        crate::secret_check::restore_redacted_key(&mut r, Some(&current))?;
        crate::secret_check::check_secret(&r)?;
        Ok(if current.same_desired_state(&r) {
            ApplyOutcome::Unchanged
        } else {
            self.check_references(&r, Some(&current), &pending).await?;
            ApplyOutcome::Configured
        })
    }

    /// Replaces a resource's status (controllers only; not exposed to apply).
    pub async fn set_status(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        name: &str,
        status: Status,
        expected: Option<u64>,
    ) -> Result<Resource, ResourceError> {
        let key = key_of(kind, mesh, name);
        let existing = self
            .store
            .get(&key)
            .await?
            .ok_or_else(|| ResourceError::NotFound(describe(kind, mesh, name)))?;
        if let Some(v) = expected
            && v != existing.revision
        {
            // Checked before the no-op shortcut: a caller counting on a
            // compare-and-swap (the grant server) must learn that someone
            // else wrote, even when that write produced the same status.
            return Err(stale_version(&key, v, existing.revision));
        }
        let mut r = Self::decode(existing.clone())?;
        if r.status == status {
            return Ok(r);
        }
        r.status = status;
        let obj = self
            .store
            .update(
                &key,
                r.labels(),
                &Self::encode(&r),
                Some(expected.unwrap_or(existing.revision)),
            )
            .await?;
        Self::decode(obj)
    }

    /// Deletes a resource, optionally only at `expected` version. A
    /// resource that others use (see [`crate::references`]) is refused
    /// with [`ResourceError::InUse`] naming them; see
    /// [`Self::delete_cascade`].
    pub async fn delete(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        name: &str,
        expected: Option<u64>,
    ) -> Result<Resource, ResourceError> {
        Self::check_scope(kind, mesh)?;
        if Self::may_be_used(kind) {
            let current = self.get(kind, mesh, name).await?;
            self.refuse_if_used(&current).await?;
        }
        self.delete_one(kind, mesh, name, expected).await
    }

    /// Deletes a resource and everything that uses it, users before what
    /// they use ([`Self::cascade_order`]), in one store batch: one commit,
    /// so a watcher sees all of it or none. Returns the deleted resource
    /// and the resources deleted with it, in that order. A user deleted
    /// meanwhile by someone else is skipped; `expected` is checked before
    /// anything is deleted (and again by the batch).
    pub async fn delete_cascade(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(Resource, Vec<Resource>), ResourceError> {
        Self::check_scope(kind, mesh)?;
        let current = self.get(kind, mesh, name).await?;
        if let Some(v) = expected
            && current.resource_version() != Some(v.to_string().as_str())
        {
            return Err(ResourceError::Conflict(format!(
                "{} changed: resourceVersion is {}, not {v}",
                describe(kind, mesh, name),
                current.resource_version().unwrap_or("?")
            )));
        }
        let order = if Self::may_be_used(kind) {
            self.cascade_order(&ObjectId::of(&current)).await?
        } else {
            Vec::new()
        };
        let mut writes: Vec<BatchWrite> = order
            .iter()
            .map(|id| BatchWrite::Delete {
                key: key_of(id.kind, id.mesh.as_deref(), &id.name),
                expected_revision: None,
            })
            .collect();
        writes.push(BatchWrite::Delete {
            key: key_of(kind, mesh, name),
            expected_revision: expected,
        });
        let mut results = self.store.write_batch(&writes).await?;
        let deleted = match results.pop() {
            Some(Ok(obj)) => Self::decode(obj)?,
            Some(Err(StoreError::NotFound(_))) | None => {
                return Err(ResourceError::NotFound(describe(kind, mesh, name)));
            }
            Some(Err(e)) => return Err(e.into()),
        };
        let mut cascaded = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Ok(obj) => cascaded.push(Self::decode(obj)?),
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok((deleted, cascaded))
    }

    async fn delete_one(
        &self,
        kind: Kind,
        mesh: Option<&str>,
        name: &str,
        expected: Option<u64>,
    ) -> Result<Resource, ResourceError> {
        let obj = self
            .store
            .delete(&key_of(kind, mesh, name), expected)
            .await
            .map_err(|e| match e {
                StoreError::NotFound(_) => ResourceError::NotFound(describe(kind, mesh, name)),
                e => e.into(),
            })?;
        Self::decode(obj)
    }

    /// API-resource changes after `after`, oldest first, and the last
    /// revision examined (to resume from). Internal kinds are skipped.
    pub async fn events_since(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<ResourceEvent>, u64), ResourceError> {
        let changes = self.store.changes_since(after, limit).await?;
        let last = changes.last().map_or(after, |c| c.revision);
        let mut events = Vec::with_capacity(changes.len());
        for c in changes {
            if let Some(ev) = Self::event_of(c)? {
                events.push(ev);
            }
        }
        Ok((events, last))
    }

    fn event_of(c: Change) -> Result<Option<ResourceEvent>, ResourceError> {
        if c.object.key.kind.parse::<Kind>().is_err() {
            return Ok(None);
        }
        let mut obj = c.object;
        obj.revision = c.revision;
        Ok(Some(ResourceEvent {
            revision: c.revision,
            change_type: c.change_type,
            resource: Self::decode(obj)?,
        }))
    }
}
