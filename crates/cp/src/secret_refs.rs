//! References from a Mesh to Kuma Secrets in its mesh: a provided CA's
//! `conf.cert`/`conf.key`/`conf.chain` given as `secret: NAME`.
//!
//! Owns two rules for [`crate::resources::ResourceService`], both as Kuma
//! has them: a Mesh naming a Secret that does not exist in its mesh is
//! refused at apply time (`secret NAME not found in mesh M`, at the field's
//! path), and a Secret a Mesh uses cannot be deleted (the error names the
//! Mesh and the backend). Only `type: system.kuma.io/secret` Secrets in the
//! Mesh's own mesh count: GlobalSecrets and TLS Secrets cannot be named,
//! as in Kuma. It never reads or returns a secret's value.

use std::collections::BTreeSet;

use meshlink_api::spec::{DataSource, KUMA_SECRET_TYPE, MeshSpec};
use meshlink_api::{FieldError, Kind, Resource};
use meshlink_store::Store;

use crate::resources::{ResourceError, ResourceService, key_of};

/// Secrets (mesh, name) an earlier document of the same apply creates.
pub(crate) type PendingSecrets = BTreeSet<(String, String)>;

/// Every `secret:` reference of a Mesh spec: (field path, secret name).
pub(crate) fn references(spec: &MeshSpec) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let backends = spec.mtls.iter().flat_map(|m| m.backends.iter());
    for (i, b) in backends.enumerate() {
        let Some(conf) = &b.conf else { continue };
        for (field, src) in [
            ("cert", &conf.cert),
            ("key", &conf.key),
            ("chain", &conf.chain),
        ] {
            if let Some(DataSource {
                secret: Some(name), ..
            }) = src
            {
                out.push((
                    format!("spec.mtls.backends[{i}].conf.{field}.secret"),
                    name.as_str(),
                ));
            }
        }
    }
    out
}

/// Refuses a Mesh that names a Secret missing from its mesh (neither
/// stored nor in `pending`). Other kinds pass.
pub(crate) async fn check_mesh(
    store: &dyn Store,
    r: &Resource,
    pending: &PendingSecrets,
) -> Result<(), ResourceError> {
    let Some(spec) = r.spec.as_mesh() else {
        return Ok(());
    };
    let mesh = r.name();
    let mut errs = Vec::new();
    for (path, name) in references(spec) {
        if pending.contains(&(mesh.to_string(), name.to_string())) {
            continue;
        }
        let found = match store.get(&key_of(Kind::Secret, Some(mesh), name)).await? {
            Some(obj) => ResourceService::decode(obj)?
                .spec
                .as_secret()
                .is_some_and(|s| s.type_.as_deref() == Some(KUMA_SECRET_TYPE)),
            None => false,
        };
        if !found {
            errs.push(FieldError::new(
                path,
                format!(
                    "secret {name} not found in mesh {mesh}; apply a Secret named {name} in \
                     mesh {mesh} first (Kuma type: Secret, or a v1 Secret of type \
                     {KUMA_SECRET_TYPE} labelled kuma.io/mesh: {mesh})"
                ),
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ResourceError::Invalid(errs))
    }
}

/// Refuses deleting Secret `name` of `mesh` while that mesh's Mesh names it.
pub(crate) async fn check_delete(
    resources: &ResourceService,
    mesh: Option<&str>,
    name: &str,
) -> Result<(), ResourceError> {
    let Some(mesh) = mesh else { return Ok(()) };
    let m = match resources.get(Kind::Mesh, None, mesh).await {
        Ok(m) => m,
        Err(ResourceError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let Some(spec) = m.spec.as_mesh() else {
        return Ok(());
    };
    let backends: BTreeSet<&str> = spec
        .mtls
        .iter()
        .flat_map(|t| t.backends.iter())
        .filter(|b| {
            b.conf.as_ref().is_some_and(|c| {
                [&c.cert, &c.key, &c.chain]
                    .iter()
                    .any(|s| s.as_ref().and_then(|s| s.secret.as_deref()) == Some(name))
            })
        })
        .map(|b| b.name.as_str())
        .collect();
    if backends.is_empty() {
        return Ok(());
    }
    let list = backends.into_iter().collect::<Vec<_>>().join(", ");
    Err(ResourceError::InUse(format!(
        "secret {name:?} is in use by Mesh {mesh:?} in mTLS backend {list}; remove the reference \
         from the backend (or switch the Mesh to another backend and drop this one) before \
         deleting the secret"
    )))
}

#[cfg(test)]
mod tests {
    use meshlink_api::parse_documents;

    use super::*;

    #[test]
    fn every_secret_reference_is_listed_with_its_path() {
        let yaml = "type: Mesh\nname: m\nmtls:\n  enabledBackend: b\n  backends:\n  - name: a\n    type: builtin\n  - name: b\n    type: provided\n    conf:\n      cert: {secret: c}\n      key: {inline: aGk=}\n      chain: {secret: ch}\n";
        let r = parse_documents(yaml).remove(0).outcome.unwrap();
        let refs = references(r.spec.as_mesh().unwrap());
        assert_eq!(
            refs,
            vec![
                ("spec.mtls.backends[1].conf.cert.secret".to_string(), "c"),
                ("spec.mtls.backends[1].conf.chain.secret".to_string(), "ch"),
            ]
        );
    }
}
