//! What the control plane checks on a Dataplane's outbound `backendRef`
//! beyond syntax: a MeshService that exists must have the named port.
//!
//! Owns that rule for [`crate::resources::ResourceService`]. A MeshService
//! that does not exist yet is not an error (resources arrive in any
//! order, I2): the outbound has no endpoints until it does. Also logs, once
//! per apply, a Dataplane whose tag outbounds a Mesh in `Exclusive`
//! meshServices mode leaves without endpoints.

use meshlink_api::spec::MeshServicesMode;
use meshlink_api::{FieldError, Kind, Resource};

use crate::resources::{ResourceError, ResourceService};

// === impl ResourceService ===

impl ResourceService {
    /// Refuses a Dataplane whose `backendRef` names a port its (existing)
    /// MeshService does not have, at `spec.networking.outbound[i].backendRef.port`.
    pub(crate) async fn check_backend_refs(&self, r: &Resource) -> Result<(), ResourceError> {
        let (Some(dp), Some(mesh)) = (r.spec.as_dataplane(), r.mesh()) else {
            return Ok(());
        };
        let mut errs = Vec::new();
        for (i, out) in dp.networking.outbound.iter().enumerate() {
            let Some((name, port)) = out.mesh_service() else {
                continue;
            };
            let ms = match self.get(Kind::MeshService, Some(mesh), name).await {
                Ok(ms) => ms,
                Err(ResourceError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let Some(spec) = ms.spec.as_mesh_service() else {
                continue;
            };
            if spec.port(port).is_none() {
                let ports: Vec<String> = spec.ports.iter().map(|p| p.port.to_string()).collect();
                errs.push(FieldError::new(
                    format!("spec.networking.outbound[{i}].backendRef.port"),
                    format!(
                        "MeshService {name:?} in mesh {mesh:?} has no port {port}; its ports \
                         are [{}]",
                        ports.join(", ")
                    ),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(ResourceError::Invalid(errs));
        }
        let tag_outbounds = dp.networking.outbound.iter().any(|o| o.service().is_some());
        if tag_outbounds
            && let Ok(m) = self.get(Kind::Mesh, None, mesh).await
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
        Ok(())
    }
}
