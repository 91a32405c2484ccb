//! Material every replica must share, kept in the store and mirrored into
//! each replica's data dir: the xDS serving CA (so one `--cp-ca` file
//! verifies every replica) and the admin token (so one token works against
//! every replica). The token-signing key already lives in the store
//! (`internal.TokenKey`).
//!
//! Each is create-once: the first replica to start stores its own (an
//! existing data dir's material is adopted, so upgrading a single control
//! plane changes nothing); later replicas take the stored one and rewrite
//! their files. A replica whose own files differ says so in its log and
//! keeps the replaced files next to the new ones.

use std::path::Path;

use meshlink_store::{ObjectKey, Store};
use serde::{Deserialize, Serialize};

use crate::cp_tls::{self, CaPair, CpTls};
use crate::data_dir::DataDir;
use crate::identity::secrets::{self, SecretError};

/// Store kind of the shared xDS serving CA.
pub const CP_TLS_CA: &str = "internal.ControlPlaneCA";
/// Store kind of the shared admin token.
pub const ADMIN_TOKEN: &str = "internal.AdminToken";

/// Why the shared material could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The store failed or holds something unreadable.
    #[error("cannot read or store the replicas' shared material: {0}")]
    Store(#[from] SecretError),
    /// The xDS TLS files could not be prepared.
    #[error(transparent)]
    CpTls(#[from] cp_tls::CpTlsError),
    /// The data dir could not be written.
    #[error(transparent)]
    DataDir(#[from] crate::data_dir::DataDirError),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdminToken {
    token: String,
}

/// The admin token every replica accepts, written to `<data-dir>/admin-token`.
/// With SQLite (one control plane) the file alone is the token, as before:
/// deleting it and restarting rotates it.
pub async fn admin_token(store: &dyn Store, data_dir: &DataDir) -> Result<String, SharedError> {
    if store.backend() != "postgres" {
        return Ok(data_dir.admin_token()?);
    }
    let local = data_dir.read_admin_token()?;
    let key = ObjectKey::new(ADMIN_TOKEN, "", "admin");
    let shared: AdminToken = secrets::get_or_create(store, &key, || {
        Ok::<_, std::convert::Infallible>(AdminToken {
            token: local.clone().unwrap_or_else(crate::data_dir::random_token),
        })
    })
    .await?
    .unwrap_or_else(|never| match never {});
    if local.as_deref() != Some(shared.token.as_str()) {
        if local.is_some() {
            tracing::warn!(path = %data_dir.path().join("admin-token").display(),
                "this data dir's admin token differs from the one the replicas share through the store; using the shared one");
        }
        data_dir.write_admin_token(&shared.token)?;
    }
    Ok(shared.token)
}

/// The xDS TLS material with the CA every replica shares.
pub async fn cp_tls(
    store: &dyn Store,
    data_dir: &Path,
    advertised_host: &str,
) -> Result<CpTls, SharedError> {
    let local = cp_tls::read_ca(data_dir)?;
    let key = ObjectKey::new(CP_TLS_CA, "", "xds");
    let shared: CaPair = secrets::get_or_create(store, &key, || match local.clone() {
        Some(pair) => Ok(pair),
        None => cp_tls::generate_ca(),
    })
    .await??;
    if local.as_ref().is_some_and(|l| l.ca_pem != shared.ca_pem) {
        tracing::warn!(dir = %data_dir.join("cp-tls").display(),
            "this data dir's xDS CA differs from the one the replicas share through the store; \
             using the shared one (the old files are kept as *.replaced); proxies must trust the shared ca.pem");
    }
    Ok(cp_tls::ensure_with_ca(data_dir, advertised_host, &shared)?)
}
