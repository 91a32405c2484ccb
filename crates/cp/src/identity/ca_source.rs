//! A provided CA's PEM material, read from where its `conf.cert`,
//! `conf.key` and `conf.chain` point: inline text, a file on the control
//! plane's host, or (as in Kuma) the value of a `system.kuma.io/secret`
//! Secret in the Mesh's own mesh.
//!
//! Owns resolving those sources for the mesh CA controller; validating the
//! material is `meshlink_identity::MeshCa::validate_provided`'s job. It
//! never logs or returns secret values in errors: a problem is a reason
//! naming the source and the fix (shown in the Mesh's `Ready` condition).

use std::time::SystemTime;

use meshlink_api::Resource;
use meshlink_api::spec::{DataSource, DataSourceContents, KUMA_SECRET_TYPE, MtlsBackend};
use meshlink_identity::{CaMaterial, MeshCa};
use meshlink_store::{ObjectKey, Store};

use super::secrets::SecretError;

/// The PEM text of one source, `Ok(Err(reason))` when it cannot be used.
pub(crate) async fn read(
    store: &dyn Store,
    mesh: &str,
    src: &DataSource,
) -> Result<Result<String, String>, SecretError> {
    let bytes = match src.contents() {
        Some(DataSourceContents::Inline(bytes)) => bytes,
        Some(DataSourceContents::File(path)) => {
            return Ok(std::fs::read_to_string(&path).map_err(|e| {
                format!("cannot read {path}: {e}; the file must be readable by meshlink-cp")
            }));
        }
        Some(DataSourceContents::Secret(name)) => match secret_value(store, mesh, &name).await? {
            Ok(bytes) => bytes,
            Err(reason) => return Ok(Err(reason)),
        },
        None => {
            return Ok(Err(
                "exactly one of file, inlineString, inline or secret is required".to_string(),
            ));
        }
    };
    Ok(String::from_utf8(bytes).map_err(|_| "the PEM text is not UTF-8".to_string()))
}

/// The decoded value of Secret `name` in `mesh`.
async fn secret_value(
    store: &dyn Store,
    mesh: &str,
    name: &str,
) -> Result<Result<Vec<u8>, String>, SecretError> {
    let key = ObjectKey::new(meshlink_api::Kind::Secret.as_str(), mesh, name);
    let Some(obj) = store.get(&key).await? else {
        return Ok(Err(format!(
            "secret {name} not found in mesh {mesh}; apply it (Kuma type: Secret, mesh: {mesh})"
        )));
    };
    let resource =
        Resource::from_json_unvalidated(obj.body).map_err(|errs| SecretError::Corrupt {
            key: key.to_string(),
            reason: errs
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        })?;
    let Some(spec) = resource
        .spec
        .as_secret()
        .filter(|s| s.type_.as_deref() == Some(KUMA_SECRET_TYPE))
    else {
        return Ok(Err(format!(
            "secret {name} in mesh {mesh} is not of type {KUMA_SECRET_TYPE}"
        )));
    };
    Ok(spec
        .value_bytes()
        .ok_or_else(|| format!("secret {name} in mesh {mesh} has no base64 data.value")))
}

/// Reads and validates a provided backend's CA. `Ok(Err(reason))`: the
/// sources or the CA are unusable (the reason names which and why).
pub(crate) async fn provided_material(
    store: &dyn Store,
    mesh: &str,
    b: &MtlsBackend,
    now: SystemTime,
) -> Result<Result<CaMaterial, String>, SecretError> {
    let Some(conf) = &b.conf else {
        return Ok(Err("provided CA needs conf.cert and conf.key".into()));
    };
    let (Some(cert_src), Some(key_src)) = (&conf.cert, &conf.key) else {
        return Ok(Err("provided CA needs conf.cert and conf.key".into()));
    };
    let cert = match read(store, mesh, cert_src).await? {
        Ok(c) => c,
        Err(reason) => return Ok(Err(format!("conf.cert: {reason}"))),
    };
    let key = match read(store, mesh, key_src).await? {
        Ok(k) => k,
        Err(reason) => return Ok(Err(format!("conf.key: {reason}"))),
    };
    let chain = match &conf.chain {
        None => None,
        Some(src) => match read(store, mesh, src).await? {
            Ok(c) => Some(c),
            Err(reason) => return Ok(Err(format!("conf.chain: {reason}"))),
        },
    };
    Ok(MeshCa::validate_provided(&cert, &key, chain.as_deref(), now).map_err(|e| e.to_string()))
}
