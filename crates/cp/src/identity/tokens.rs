//! Proxy tokens in the control plane: the signing key (created once and
//! stored like a CA), issuing, verifying and revoking.
//!
//! Revocations are cached in memory: loaded once at start-up and then kept
//! current from the store's change feed (`internal.RevokedToken` objects,
//! written by this or any other control plane on the same store), so a
//! stream open or Certify call reads no store row. The verifier remembers
//! tokens whose signature it already checked, so a proxy reconnecting with
//! the same token costs a SHA-256 instead of an Ed25519 verify.

use std::collections::{BTreeMap, HashSet};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use meshlink_identity::{
    TokenClaims, TokenError, TokenKeyMaterial, TokenSigningKey, TokenVerifier,
};
use meshlink_store::{ListQuery, ObjectKey, Store, StoreError};

use super::secrets::{self, REVOKED_TOKEN, SecretError, TOKEN_KEY};

/// Why a token operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TokenServiceError {
    /// The token is not acceptable.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] SecretError),
}

/// Issues and verifies proxy tokens with the stored signing key.
pub struct TokenService {
    key: TokenSigningKey,
    verifier: TokenVerifier,
    /// Revoked token ids (from the store, then the change feed).
    revoked: RwLock<HashSet<String>>,
}

impl TokenService {
    /// Loads the signing key, creating it on first start.
    pub async fn load(store: &dyn Store) -> Result<Self, TokenServiceError> {
        let key = ObjectKey::new(TOKEN_KEY, "", "dataplane");
        let material: TokenKeyMaterial =
            secrets::get_or_create(store, &key, TokenSigningKey::generate).await??;
        let key = TokenSigningKey::load(&material)?;
        let verifier = key.verifier();
        let service = TokenService {
            key,
            verifier,
            revoked: RwLock::new(HashSet::new()),
        };
        service.reload_revoked(store).await?;
        Ok(service)
    }

    /// Replaces the revocation cache with the store's list (at start-up and
    /// after a change-feed gap).
    pub async fn reload_revoked(&self, store: &dyn Store) -> Result<(), TokenServiceError> {
        let listed = store
            .list(&ListQuery {
                kind: REVOKED_TOKEN.to_owned(),
                ..Default::default()
            })
            .await
            .map_err(SecretError::Store)?;
        let ids: HashSet<String> = listed.into_iter().map(|o| o.key.name).collect();
        *self.revoked.write().unwrap_or_else(PoisonError::into_inner) = ids;
        Ok(())
    }

    /// Records a revocation seen on the change feed. Returns whether it was
    /// new to this cache.
    pub fn note_revoked(&self, jti: &str) -> bool {
        self.revoked
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(jti.to_owned())
    }

    /// Whether `jti` is revoked, from the cache.
    pub fn is_revoked(&self, jti: &str) -> bool {
        self.revoked
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(jti)
    }

    /// Issues a dataplane token.
    pub fn issue(
        &self,
        mesh: &str,
        name: &str,
        services: Vec<String>,
        valid_for: Duration,
    ) -> (String, TokenClaims) {
        let claims = TokenClaims::dataplane(mesh, name, services, valid_for, SystemTime::now());
        (self.key.issue(&claims), claims)
    }

    /// Issues the router token of `site`.
    pub fn issue_router(&self, site: &str, valid_for: Duration) -> (String, TokenClaims) {
        let claims = TokenClaims::router(site, valid_for, SystemTime::now());
        (self.key.issue(&claims), claims)
    }

    /// Like [`TokenService::verify`], for dataplane and router tokens (the
    /// ADS port serves both; the claims say which).
    pub fn verify_proxy(&self, token: &str) -> Result<TokenClaims, TokenServiceError> {
        Ok(self
            .verifier
            .verify_proxy(token, SystemTime::now(), |jti| self.is_revoked(jti))?)
    }

    /// Verifies signature, kind (dataplane) and validity window, then
    /// revocation (from the cache; no store read).
    pub fn verify(&self, token: &str) -> Result<TokenClaims, TokenServiceError> {
        Ok(self
            .verifier
            .verify(token, SystemTime::now(), |jti| self.is_revoked(jti))?)
    }
}

/// Revokes a token id (idempotent). Returns false if it was revoked already.
pub async fn revoke(store: &dyn Store, jti: &str, reason: &str) -> Result<bool, SecretError> {
    let body = serde_json::json!({
        "revokedAt": humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        "reason": reason,
    });
    match store
        .create(
            &ObjectKey::new(REVOKED_TOKEN, "", jti),
            &BTreeMap::new(),
            &body,
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::AlreadyExists(_)) => Ok(false),
        Err(e) => Err(SecretError::Store(e)),
    }
}
