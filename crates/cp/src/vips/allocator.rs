//! The VIP allocator task: keeps, per mesh, which destinations exist (the
//! `kuma.io/service`s of its Dataplanes' inbounds, and its MeshServices),
//! and while this replica leads, writes each changed mesh's VIPs
//! ([`super::assign`]) to the Mesh's status with a compare-and-set.
//!
//! Inputs: one listing at start, then the store's change feed. Owns its
//! in-memory index only; the VIPs themselves live in the store, so a
//! restart or another replica taking over reads them back. Only the
//! leader writes: every replica would compute the same result, but one
//! writer keeps the feed quiet. A mesh is written at most every
//! [`DEBOUNCE`] after a change, and retried after a failure.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt as _;
use meshlink_api::spec::{MeshStatus, StatusDetails};
use meshlink_api::{Kind, Resource};
use meshlink_runtime::Shutdown;
use meshlink_store::{Change, ChangeType};

use super::{VipRanges, assign};
use crate::replicas::Leadership;
use crate::resources::{ResourceError, ResourceService};

/// How long after a change a mesh's VIPs are written.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// How long after a failed write it is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// Compare-and-set attempts per write before waiting for [`RETRY`].
const ATTEMPTS: usize = 5;

/// One mesh's destinations.
#[derive(Debug, Default)]
struct MeshDestinations {
    /// Dataplane name → the services of its inbounds.
    dataplanes: HashMap<String, Vec<String>>,
    /// Service → how many Dataplanes serve it.
    services: BTreeMap<String, usize>,
    /// MeshService names.
    mesh_services: BTreeSet<String>,
}

impl MeshDestinations {
    /// Sets `dataplane`'s services; whether the service set changed.
    fn set_dataplane(&mut self, dataplane: &str, services: Vec<String>) -> bool {
        let before: Vec<String> = self.services.keys().cloned().collect();
        if let Some(old) = self.dataplanes.remove(dataplane) {
            for s in old {
                if let Some(n) = self.services.get_mut(&s) {
                    *n -= 1;
                    if *n == 0 {
                        self.services.remove(&s);
                    }
                }
            }
        }
        if !services.is_empty() {
            for s in &services {
                *self.services.entry(s.clone()).or_default() += 1;
            }
            self.dataplanes.insert(dataplane.to_owned(), services);
        }
        !self.services.keys().eq(before.iter())
    }
}

/// The allocator's state.
struct Allocator {
    resources: ResourceService,
    ranges: VipRanges,
    leadership: Leadership,
    meshes: HashMap<String, MeshDestinations>,
    dirty: HashSet<String>,
    led: bool,
}

/// Runs the allocator until `shutdown`.
pub async fn run(
    resources: ResourceService,
    ranges: VipRanges,
    leadership: Leadership,
    start_revision: u64,
    shutdown: Shutdown,
) {
    let mut a = Allocator {
        resources,
        ranges,
        leadership,
        meshes: HashMap::new(),
        dirty: HashSet::new(),
        led: false,
    };
    while let Err(e) = a.load().await {
        tracing::warn!(error = %e, "VIP allocator: cannot read the store; retrying");
        tokio::select! {
            () = shutdown.wait() => return,
            () = tokio::time::sleep(RETRY) => {}
        }
    }
    let mut after = start_revision;
    let mut feed = a.resources.store().watch(after);
    let mut leader = a.leadership.clone();
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let wait = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.wait() => return,
            next = feed.next() => match next {
                Some(Ok(change)) => {
                    after = change.revision;
                    a.on_change(change);
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "VIP allocator: change feed interrupted; resuming");
                    if let Some(from) = meshlink_store::resync_revision(a.resources.store().as_ref(), &e).await {
                        a.meshes.clear();
                        match a.load().await {
                            Ok(()) => after = from,
                            Err(e) => tracing::warn!(error = %e, "VIP allocator: cannot re-read the store; retrying"),
                        }
                    }
                    feed = a.resources.store().watch(after);
                }
                None => feed = a.resources.store().watch(after),
            },
            () = leader.changed() => {}
            () = wait => {
                due = None;
                if !a.flush().await {
                    due = Some(tokio::time::Instant::now() + RETRY);
                }
            }
        }
        let leads = a.leadership.is_leader();
        if leads && !a.led {
            // Taking over: check every mesh once.
            a.dirty.extend(a.meshes.keys().cloned());
        }
        a.led = leads;
        if leads && !a.dirty.is_empty() && due.is_none() {
            due = Some(tokio::time::Instant::now() + DEBOUNCE);
        }
    }
}

impl Allocator {
    async fn load(&mut self) -> Result<(), ResourceError> {
        for m in self.resources.list(Kind::Mesh, None, None).await? {
            self.meshes.entry(m.name().to_owned()).or_default();
            self.dirty.insert(m.name().to_owned());
        }
        let meshes = &mut self.meshes;
        self.resources
            .for_each(Kind::Dataplane, None, |d| {
                let mesh = d.mesh().unwrap_or_default().to_owned();
                meshes
                    .entry(mesh)
                    .or_default()
                    .set_dataplane(d.name(), services_of(&d));
            })
            .await?;
        for ms in self.resources.list(Kind::MeshService, None, None).await? {
            let mesh = ms.mesh().unwrap_or_default().to_owned();
            self.meshes
                .entry(mesh)
                .or_default()
                .mesh_services
                .insert(ms.name().to_owned());
        }
        Ok(())
    }

    fn on_change(&mut self, c: Change) {
        let key = &c.object.key;
        let Ok(kind) = key.kind.parse::<Kind>() else {
            return;
        };
        let deleted = c.change_type == ChangeType::Deleted;
        let (mesh, name) = (key.mesh.clone(), key.name.clone());
        match kind {
            Kind::Mesh if deleted => {
                self.meshes.remove(&name);
                self.dirty.remove(&name);
            }
            Kind::Mesh => {
                // Created, or written by someone (our own write comes back
                // too, and is then found unchanged).
                self.meshes.entry(name.clone()).or_default();
                self.dirty.insert(name);
            }
            Kind::Dataplane => {
                let services = if deleted {
                    Vec::new()
                } else {
                    Resource::from_json_unvalidated(c.object.body)
                        .map(|r| services_of(&r))
                        .unwrap_or_default()
                };
                if self
                    .meshes
                    .entry(mesh.clone())
                    .or_default()
                    .set_dataplane(&name, services)
                {
                    self.dirty.insert(mesh);
                }
            }
            Kind::MeshService => {
                let set = &mut self.meshes.entry(mesh.clone()).or_default().mesh_services;
                let changed = if deleted {
                    set.remove(&name)
                } else {
                    set.insert(name)
                };
                if changed {
                    self.dirty.insert(mesh);
                }
            }
            _ => {}
        }
    }

    /// Writes every dirty mesh; whether all writes succeeded (the failed
    /// ones stay dirty).
    async fn flush(&mut self) -> bool {
        if !self.leadership.is_leader() {
            return true;
        }
        let mut ok = true;
        for mesh in std::mem::take(&mut self.dirty) {
            if let Err(e) = self.write(&mesh).await {
                tracing::warn!(%mesh, error = %e, "VIP allocator: cannot write the Mesh's VIPs; retrying");
                self.dirty.insert(mesh);
                ok = false;
            }
        }
        ok
    }

    async fn write(&self, mesh: &str) -> Result<(), String> {
        let Some(dest) = self.meshes.get(mesh) else {
            return Ok(());
        };
        let services: BTreeSet<String> = dest.services.keys().cloned().collect();
        for _ in 0..ATTEMPTS {
            let current = match self.resources.get(Kind::Mesh, None, mesh).await {
                Ok(r) => r,
                // Deleted meanwhile: its deletion arrives on the feed.
                Err(ResourceError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            };
            let stored = current
                .status
                .details
                .as_mesh()
                .cloned()
                .unwrap_or_default();
            let next = assign(&stored, &services, &dest.mesh_services, &self.ranges)?;
            if next == stored {
                return Ok(());
            }
            let mut status = current.status.clone();
            status.details = if next == MeshStatus::default() {
                StatusDetails::None
            } else {
                StatusDetails::Mesh(next)
            };
            let expected = current.resource_version().and_then(|v| v.parse().ok());
            match self
                .resources
                .set_status(Kind::Mesh, None, mesh, status, expected)
                .await
            {
                Ok(_) => return Ok(()),
                Err(ResourceError::Conflict(_)) => continue,
                Err(ResourceError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!("the Mesh kept changing over {ATTEMPTS} attempts"))
    }
}

/// The services of a Dataplane's inbounds (and its gateway's).
fn services_of(r: &Resource) -> Vec<String> {
    r.spec
        .as_dataplane()
        .map(|d| d.services().into_iter().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_set_changes_only_when_a_service_appears_or_goes() {
        let mut d = MeshDestinations::default();
        assert!(d.set_dataplane("web-1", vec!["web".into()]));
        assert!(!d.set_dataplane("web-2", vec!["web".into()]));
        assert!(d.set_dataplane("be-1", vec!["backend".into(), "admin".into()]));
        assert!(!d.set_dataplane("web-1", Vec::new()));
        assert!(d.set_dataplane("web-2", Vec::new()));
        assert_eq!(d.services.keys().collect::<Vec<_>>(), ["admin", "backend"]);
        assert!(d.set_dataplane("be-1", vec!["backend".into()]));
        assert_eq!(d.services.keys().collect::<Vec<_>>(), ["backend"]);
    }
}
