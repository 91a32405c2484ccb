//! Internal objects in the store: CA material, the token signing key,
//! revocations and issued-certificate records. They live under kinds that
//! start with `internal.`, which the REST API never serves, so private keys
//! never leave the store through the API (I4).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

use meshlink_store::{ObjectKey, Store, StoreError};

/// A mesh CA per (mesh, backend): `CaMaterial` JSON.
pub const MESH_CA: &str = "internal.MeshCA";
/// Rotation bookkeeping per mesh: [`super::mesh_ca::CaState`] JSON.
pub const MESH_CA_STATE: &str = "internal.MeshCAState";
/// The proxy-token signing key (one, global).
pub const TOKEN_KEY: &str = "internal.TokenKey";
/// A revoked token id (`jti`), global.
pub const REVOKED_TOKEN: &str = "internal.RevokedToken";
/// The latest certificate issued to a dataplane, per (mesh, dataplane).
pub const ISSUED_CERT: &str = "internal.IssuedCert";

/// Why an internal object could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored JSON does not decode (corruption or an incompatible version).
    #[error("stored {key} is unreadable: {reason}")]
    Corrupt {
        /// The object.
        key: String,
        /// The decode error.
        reason: String,
    },
}

fn decode<T: DeserializeOwned>(key: &ObjectKey, v: serde_json::Value) -> Result<T, SecretError> {
    serde_json::from_value(v).map_err(|e| SecretError::Corrupt {
        key: key.to_string(),
        reason: e.to_string(),
    })
}

/// Reads an internal object.
pub async fn get<T: DeserializeOwned>(
    store: &dyn Store,
    key: &ObjectKey,
) -> Result<Option<(T, u64)>, SecretError> {
    match store.get(key).await? {
        Some(obj) => Ok(Some((decode(key, obj.body)?, obj.revision))),
        None => Ok(None),
    }
}

/// Returns the stored object, or creates it with `make()` if absent.
///
/// Race-safe across control planes sharing a store: creation is
/// create-if-absent, and the loser of a race reads the winner's object, so
/// everyone ends up with the same value (e.g. one CA per mesh backend).
pub async fn get_or_create<T, E>(
    store: &dyn Store,
    key: &ObjectKey,
    make: impl FnOnce() -> Result<T, E>,
) -> Result<Result<T, E>, SecretError>
where
    T: Serialize + DeserializeOwned,
{
    if let Some((v, _)) = get(store, key).await? {
        return Ok(Ok(v));
    }
    let value = match make() {
        Ok(v) => v,
        Err(e) => return Ok(Err(e)),
    };
    let body = serde_json::to_value(&value).expect("internal objects serialize");
    match store.create(key, &BTreeMap::new(), &body).await {
        Ok(_) => Ok(Ok(value)),
        Err(StoreError::AlreadyExists(_)) => match get(store, key).await? {
            Some((v, _)) => Ok(Ok(v)),
            None => Err(SecretError::Corrupt {
                key: key.to_string(),
                reason: "created concurrently and deleted again".into(),
            }),
        },
        Err(e) => Err(e.into()),
    }
}

/// Writes an internal object (create or overwrite).
pub async fn put<T: Serialize>(
    store: &dyn Store,
    key: &ObjectKey,
    value: &T,
) -> Result<(), SecretError> {
    let body = serde_json::to_value(value).expect("internal objects serialize");
    // Update, else create; a concurrent create between the two is retried
    // as an update, so the last writer wins and no write is dropped.
    loop {
        match store.update(key, &BTreeMap::new(), &body, None).await {
            Ok(_) => return Ok(()),
            Err(StoreError::NotFound(_)) => {
                match store.create(key, &BTreeMap::new(), &body).await {
                    Ok(_) => return Ok(()),
                    Err(StoreError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}
