//! Proxy tokens in the control plane: the signing key (created once and
//! stored like a CA), issuing, verifying and revoking.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use meshlink_identity::{
    TokenClaims, TokenError, TokenKeyMaterial, TokenSigningKey, TokenVerifier,
};
use meshlink_store::{ObjectKey, Store, StoreError};

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
}

impl TokenService {
    /// Loads the signing key, creating it on first start.
    pub async fn load(store: &dyn Store) -> Result<Self, TokenServiceError> {
        let key = ObjectKey::new(TOKEN_KEY, "", "dataplane");
        let material: TokenKeyMaterial =
            secrets::get_or_create(store, &key, TokenSigningKey::generate).await??;
        let key = TokenSigningKey::load(&material)?;
        let verifier = key.verifier();
        Ok(TokenService { key, verifier })
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

    /// Verifies signature, kind and validity window, then revocation.
    pub async fn verify(
        &self,
        store: &dyn Store,
        token: &str,
    ) -> Result<TokenClaims, TokenServiceError> {
        let claims = self.verifier.verify(token, SystemTime::now(), |_| false)?;
        if is_revoked(store, &claims.jti).await? {
            return Err(TokenError::Revoked { jti: claims.jti }.into());
        }
        Ok(claims)
    }
}

/// Whether a token id is revoked.
pub async fn is_revoked(store: &dyn Store, jti: &str) -> Result<bool, SecretError> {
    Ok(store
        .get(&ObjectKey::new(REVOKED_TOKEN, "", jti))
        .await
        .map_err(SecretError::Store)?
        .is_some())
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
