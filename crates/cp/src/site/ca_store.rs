//! The site's CAs in the store: one `internal.SiteCA` per issuer name (the
//! Site's `defaultIssuer`, `skupper-site-ca` by default, or a RouterAccess
//! or AccessGrant `issuer`), and the grant server's own CA
//! (`internal.GrantServerCA`), whose certificate is every grant's `ca`.
//!
//! Owns create-once semantics for both (I5): creation is create-if-absent,
//! so control planes sharing one PostgreSQL converge on one CA, and a CA
//! that exists is never regenerated. The key never leaves the store: the
//! REST API does not serve `internal.*` kinds.

use std::time::Duration;

use meshlink_identity::{CaError, CaMaterial, SiteCa};
use meshlink_store::{ObjectKey, Store};

use crate::identity::secrets::{self, SecretError};

/// A site CA per issuer name: `CaMaterial` JSON.
pub const SITE_CA: &str = "internal.SiteCA";
/// The grant server's CA (one, global): `CaMaterial` JSON.
pub const GRANT_SERVER_CA: &str = "internal.GrantServerCA";
/// How long a generated site CA is valid (as a builtin mesh CA).
pub const SITE_CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Why a site CA could not be read or created.
#[derive(Debug, thiserror::Error)]
pub enum CaStoreError {
    /// The store failed or holds unreadable material.
    #[error(transparent)]
    Store(#[from] SecretError),
    /// Generating or loading the CA failed.
    #[error("site CA {name:?}: {source}")]
    Ca {
        /// The issuer name.
        name: String,
        /// The cause.
        source: CaError,
    },
}

fn key(kind: &str, name: &str) -> ObjectKey {
    ObjectKey::new(kind, "", name)
}

/// Reads the site CA `name`, creating it once if absent.
pub async fn site_ca(store: &dyn Store, site: &str, name: &str) -> Result<SiteCa, CaStoreError> {
    let material = secrets::get_or_create(store, &key(SITE_CA, name), || {
        SiteCa::generate(site, name, SITE_CA_LIFETIME)
    })
    .await?
    .map_err(|source| CaStoreError::Ca {
        name: name.to_owned(),
        source,
    })?;
    load(name, &material)
}

/// Reads the site CA `name` if it exists; never creates it.
pub async fn existing_site_ca(
    store: &dyn Store,
    name: &str,
) -> Result<Option<SiteCa>, CaStoreError> {
    match secrets::get::<CaMaterial>(store, &key(SITE_CA, name)).await? {
        Some((m, _)) => load(name, &m).map(Some),
        None => Ok(None),
    }
}

/// Reads the grant server's CA, creating it once if absent.
pub async fn grant_server_ca(store: &dyn Store) -> Result<SiteCa, CaStoreError> {
    let name = "meshlink-grant-server-ca";
    let material = secrets::get_or_create(store, &key(GRANT_SERVER_CA, "default"), || {
        SiteCa::generate("grant-server", name, SITE_CA_LIFETIME)
    })
    .await?
    .map_err(|source| CaStoreError::Ca {
        name: name.to_owned(),
        source,
    })?;
    load(name, &material)
}

fn load(name: &str, material: &CaMaterial) -> Result<SiteCa, CaStoreError> {
    SiteCa::load(material).map_err(|source| CaStoreError::Ca {
        name: name.to_owned(),
        source,
    })
}
