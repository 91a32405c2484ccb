//! What apply checks of a resource's references ([`super::outgoing`]):
//! required targets exist, present targets offer what is named, and an
//! update does not take away what others use.
//!
//! Owns the apply-time wording of those refusals (each at the field that
//! makes the reference, with the fix). Also logs, when a Dataplane is
//! applied, tag outbounds that a Mesh in `Exclusive` meshServices mode
//! leaves without endpoints.

use std::collections::BTreeSet;

use meshlink_api::spec::{KUMA_SECRET_TYPE, MeshServicesMode};
use meshlink_api::{FieldError, Kind, Resource};

use super::delete_guard::name_list;
use super::{ObjectId, OnApply, Reference, Want, outgoing};
use crate::resources::{ResourceError, ResourceService, key_of};

/// Objects an earlier document of the same apply creates: references to
/// them count as satisfied (dry run).
pub(crate) type Pending = BTreeSet<ObjectId>;

// === impl ResourceService ===

impl ResourceService {
    /// Refuses `r` when a reference it must satisfy on apply does not, or,
    /// as an update of `current`, when it takes away what others use.
    /// Every failing field is listed.
    pub(crate) async fn check_references(
        &self,
        r: &Resource,
        current: Option<&Resource>,
        pending: &Pending,
    ) -> Result<(), ResourceError> {
        let mut errs = Vec::new();
        for reference in outgoing(r) {
            let Some(name) = reference.name.clone() else {
                continue;
            };
            if reference.on_apply == OnApply::Never {
                continue;
            }
            let id = ObjectId {
                kind: reference.kind,
                mesh: reference.mesh.clone(),
                name,
            };
            if pending.contains(&id) {
                continue;
            }
            let key = key_of(id.kind, id.mesh.as_deref(), &id.name);
            let found = match self.store().get(&key).await? {
                Some(obj) => Some(Self::decode(obj)?),
                None => None,
            };
            match (&found, reference.on_apply) {
                (Some(t), _) if reference.satisfied_by(t) => {}
                (None, OnApply::IfPresent) => {}
                _ => errs.push(FieldError::new(
                    reference.field.clone(),
                    refusal(&reference, &id, found.as_ref()),
                )),
            }
        }
        if let Some(current) = current {
            let broken = self.users_broken_by(current, r).await?;
            if !broken.is_empty() {
                let field = match r.kind() {
                    Kind::MeshService => "spec.ports",
                    _ => "type",
                };
                errs.push(FieldError::new(
                    field,
                    format!(
                        "this change takes away what {} still use; change those references \
                         (or delete their resources) first",
                        name_list(&broken)
                    ),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(ResourceError::Invalid(errs));
        }
        self.warn_exclusive_tag_outbounds(r).await;
        Ok(())
    }

    /// Logs a Dataplane whose tag outbounds get no endpoints because its
    /// Mesh's `meshServices.mode` is `Exclusive`.
    async fn warn_exclusive_tag_outbounds(&self, r: &Resource) {
        let (Some(dp), Some(mesh)) = (r.spec.as_dataplane(), r.mesh()) else {
            return;
        };
        if !dp.networking.outbound.iter().any(|o| o.service().is_some()) {
            return;
        }
        if let Ok(m) = self.get(Kind::Mesh, None, mesh).await
            && m.spec
                .as_mesh()
                .is_some_and(|s| s.mesh_services_mode() == MeshServicesMode::Exclusive)
        {
            tracing::warn!(
                mesh,
                dataplane = r.name(),
                "the mesh's meshServices.mode is Exclusive: this Dataplane's outbounds with \
                 kuma.io/service tags get no endpoints; use backendRef to a MeshService"
            );
        }
    }
}

/// Why `reference` to `target` fails (`found` is the stored target).
fn refusal(reference: &Reference, target: &ObjectId, found: Option<&Resource>) -> String {
    let name = &target.name;
    let mesh = target.mesh.as_deref().unwrap_or_default();
    match reference.want {
        Want::KumaSecret => format!(
            "secret {name} not found in mesh {mesh}; apply a Secret named {name} in mesh \
             {mesh} first (Kuma type: Secret, or a v1 Secret of type {KUMA_SECRET_TYPE} \
             labelled kuma.io/mesh: {mesh})"
        ),
        Want::Port(port) => {
            let ports: Vec<String> = found
                .and_then(|f| f.spec.as_mesh_service())
                .map(|s| s.ports.iter().map(|p| p.port.to_string()).collect())
                .unwrap_or_default();
            format!(
                "MeshService {name:?} in mesh {mesh:?} has no port {port}; its ports are [{}]",
                ports.join(", ")
            )
        }
        Want::Any if target.kind == Kind::Mesh => {
            format!("mesh {name:?} does not exist; apply the Mesh first")
        }
        Want::Any => format!("{} {name:?} does not exist; apply it first", target.kind),
    }
}
