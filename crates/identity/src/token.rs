//! Proxy tokens: compact JWS (JWT) signed with Ed25519, issued by the control
//! plane and presented by a proxy on its xDS and Certify calls (invariant I4:
//! a certificate is issued only for the identity the token names).
//!
//! Owns the token signing key (generation, loading from stored material), the
//! claim set, and strict verification: exactly three segments, `alg` must be
//! `EdDSA`, `typ` (when present) must be `JWT`, the signature is verified
//! before the claims are decoded, then kind, validity window and revocation are
//! checked.
//!
//! Clock skew: `iat` and `exp` are checked with [`CLOCK_SKEW`] (60 s) of
//! tolerance in both directions, so a proxy whose clock is slightly off from
//! the control plane's is neither rejected early nor accepted for long after
//! expiry.
//!
//! Must never: log or `Debug`-print private key material, accept an unsigned
//! (`alg: none`) or differently-signed token, or interpret claims whose
//! signature has not been verified.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use crate::token_memo::SignatureMemo;

/// Tolerated clock difference between the token issuer and the verifier,
/// applied to both `iat` (not yet valid) and `exp` (expired).
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The `kind` claim of a token that authenticates a data-plane proxy.
pub const DATAPLANE_KIND: &str = "dataplane";

/// The `kind` claim of a token that authenticates a site's router (claims:
/// `site`; no mesh, name or services).
pub const ROUTER_KIND: &str = "router";

/// A router's xDS `node.id` is this prefix followed by its site's name
/// (the grammar lives in `meshlink-proto`).
pub use meshlink_proto::ROUTER_NODE_PREFIX;

/// Tokens longer than this are rejected before any decoding.
const MAX_TOKEN_LEN: usize = 8 * 1024;

const HINT: &str = "issue a new one with `meshlink token dataplane --mesh MESH --name NAME`";

/// Why a token could not be created, loaded or verified.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token is not a well-formed EdDSA compact JWS with valid claims.
    #[error("malformed proxy token: {0}; {HINT}")]
    Malformed(String),
    /// The signature does not match: the token was modified or was signed by
    /// another control plane's key.
    #[error(
        "proxy token signature is invalid: {0}; the token was modified or issued by another control plane; {HINT}"
    )]
    BadSignature(String),
    /// The token's `exp` (plus the allowed clock skew) is in the past.
    #[error("proxy token for {dataplane} expired at {}; {HINT}", humantime::format_rfc3339_seconds(*.at))]
    Expired {
        /// The `node.id` the token was issued for (`<mesh>.<name>` of a
        /// dataplane, `site.<site>` of a router).
        dataplane: String,
        /// When the token expired (its `exp` claim).
        at: SystemTime,
    },
    /// The token's `iat` is further in the future than the allowed clock skew.
    #[error("proxy token is not valid before {}; check that this machine's clock is synchronised with the control plane's", humantime::format_rfc3339_seconds(*.from))]
    NotYetValid {
        /// When the token becomes valid (its `iat` claim).
        from: SystemTime,
    },
    /// The token's `jti` has been revoked.
    #[error("proxy token {jti} has been revoked; {HINT}")]
    Revoked {
        /// The revoked token id.
        jti: String,
    },
    /// The token is valid but is not a dataplane token.
    #[error(
        "proxy token has kind {kind:?}, expected \"dataplane\"; use a token from `meshlink token dataplane`"
    )]
    WrongKind {
        /// The `kind` claim found in the token.
        kind: String,
    },
    /// The token is valid but is neither a dataplane nor a router token.
    #[error(
        "proxy token has kind {kind:?}, expected \"dataplane\" or \"router\"; use a token from `meshlink token dataplane` or `meshlink token router`"
    )]
    NotAProxyToken {
        /// The `kind` claim found in the token.
        kind: String,
    },
    /// The system random source failed while generating a key.
    #[error("could not generate a token signing key: the system random number generator failed")]
    KeyGeneration,
    /// Stored key material could not be loaded.
    #[error(
        "invalid token signing key material (key id {key_id:?}): {reason}; restore the stored token key, do not regenerate it (that invalidates every issued token)"
    )]
    InvalidKeyMaterial {
        /// The key id stored with the material.
        key_id: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Serialized token signing key, stored once by the control plane (like a CA)
/// and loaded with [`TokenSigningKey::load`]. Its `Debug` output redacts the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenKeyMaterial {
    /// PKCS#8 v2 Ed25519 private key, standard base64.
    pub pkcs8_b64: String,
    /// Key id (`kid` header), derived from the public key.
    pub key_id: String,
}

impl fmt::Debug for TokenKeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenKeyMaterial")
            .field("pkcs8_b64", &"<redacted>")
            .field("key_id", &self.key_id)
            .finish()
    }
}

/// The claim set of a proxy token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// Token kind: [`DATAPLANE_KIND`] or [`ROUTER_KIND`].
    pub kind: String,
    /// Mesh the dataplane belongs to (empty for a router token).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mesh: String,
    /// Dataplane name (empty for a router token).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Service tags the holder may obtain identities for (none for a router).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    /// The site whose router the token authenticates (router tokens only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub site: String,
    /// Issued at, unix seconds.
    pub iat: u64,
    /// Expires at, unix seconds.
    pub exp: u64,
    /// Unique token id (128 random bits, lowercase hex), used for revocation
    /// and rate limiting.
    pub jti: String,
}

// === impl TokenClaims ===

impl TokenClaims {
    /// Claims for a dataplane token valid from `now` for `valid_for` (rounded
    /// up to whole seconds), with a fresh random `jti`.
    pub fn dataplane(
        mesh: impl Into<String>,
        name: impl Into<String>,
        services: Vec<String>,
        valid_for: Duration,
        now: SystemTime,
    ) -> Self {
        let iat = unix_secs(now);
        let valid_secs = valid_for.as_secs() + u64::from(valid_for.subsec_nanos() > 0);
        Self {
            kind: DATAPLANE_KIND.to_string(),
            mesh: mesh.into(),
            name: name.into(),
            services,
            site: String::new(),
            iat,
            exp: iat.saturating_add(valid_secs),
            jti: format!("{:032x}", rand::random::<u128>()),
        }
    }

    /// Claims for the router token of `site`, valid from `now` for
    /// `valid_for` (rounded up to whole seconds), with a fresh random `jti`.
    pub fn router(site: impl Into<String>, valid_for: Duration, now: SystemTime) -> Self {
        let mut claims = Self::dataplane("", "", Vec::new(), valid_for, now);
        claims.kind = ROUTER_KIND.to_string();
        claims.site = site.into();
        claims
    }

    /// Whether this is a router token.
    pub fn is_router(&self) -> bool {
        self.kind == ROUTER_KIND
    }

    /// The xDS `node.id` this token authenticates: `<mesh>.<name>` for a
    /// dataplane, `site.<site>` for a router ([`ROUTER_NODE_PREFIX`]).
    pub fn node_id(&self) -> String {
        if self.is_router() {
            meshlink_proto::NodeId::router(&self.site).to_string()
        } else {
            self.dataplane_key()
        }
    }

    /// What the token is for, for messages: `dataplane <mesh>.<name>` or
    /// `the router of site <site>`.
    pub fn subject(&self) -> String {
        if self.is_router() {
            format!("the router of site {}", self.site)
        } else {
            format!("dataplane {}", self.dataplane_key())
        }
    }

    /// `mesh.name`, the proxy key this token authenticates (matches `node.id`).
    pub fn dataplane_key(&self) -> String {
        meshlink_proto::NodeId::dataplane(&self.mesh, &self.name).to_string()
    }

    /// `iat` as a `SystemTime`.
    pub fn issued_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.iat)
    }

    /// `exp` as a `SystemTime`.
    pub fn expires_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.exp)
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
}

/// The control plane's token signing key.
pub struct TokenSigningKey {
    pair: Ed25519KeyPair,
    key_id: String,
}

impl fmt::Debug for TokenSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSigningKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

// === impl TokenSigningKey ===

impl TokenSigningKey {
    /// Generates new key material. Store it once; regenerating it invalidates
    /// every token already issued.
    pub fn generate() -> Result<TokenKeyMaterial, TokenError> {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| TokenError::KeyGeneration)?;
        let pair =
            Ed25519KeyPair::from_pkcs8(doc.as_ref()).map_err(|_| TokenError::KeyGeneration)?;
        Ok(TokenKeyMaterial {
            pkcs8_b64: STANDARD.encode(doc.as_ref()),
            key_id: key_id_of(pair.public_key().as_ref()),
        })
    }

    /// Loads stored key material, checking that its key id matches the key.
    pub fn load(material: &TokenKeyMaterial) -> Result<Self, TokenError> {
        let invalid = |reason: &str| TokenError::InvalidKeyMaterial {
            key_id: material.key_id.clone(),
            reason: reason.to_string(),
        };
        let der = STANDARD
            .decode(material.pkcs8_b64.trim())
            .map_err(|_| invalid("pkcs8_b64 is not standard base64"))?;
        let pair = Ed25519KeyPair::from_pkcs8(&der)
            .map_err(|_| invalid("pkcs8_b64 is not a PKCS#8 v2 Ed25519 private key"))?;
        let key_id = key_id_of(pair.public_key().as_ref());
        if key_id != material.key_id {
            return Err(invalid(&format!(
                "key_id does not match the key (the key's id is {key_id:?})"
            )));
        }
        Ok(Self { pair, key_id })
    }

    /// The key id written into every token's `kid` header.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Signs `claims` into a compact JWS.
    pub fn issue(&self, claims: &TokenClaims) -> String {
        let header = Header {
            alg: "EdDSA".to_string(),
            typ: Some("JWT".to_string()),
            kid: Some(self.key_id.clone()),
        };
        // Serializing these plain structs cannot fail.
        let header = serde_json::to_vec(&header).expect("token header serializes");
        let claims = serde_json::to_vec(claims).expect("token claims serialize");
        let mut token = URL_SAFE_NO_PAD.encode(header);
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(claims));
        let signature = self.pair.sign(token.as_bytes());
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(signature.as_ref()));
        token
    }

    /// A verifier for tokens signed by this key.
    pub fn verifier(&self) -> TokenVerifier {
        TokenVerifier {
            key_id: self.key_id.clone(),
            public_key: self.pair.public_key().as_ref().to_vec(),
            verified: Default::default(),
        }
    }
}

fn key_id_of(public_key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, public_key);
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Verifies proxy tokens against one public key. Cheap to clone; clones
/// share the memo of tokens whose signature was already verified.
#[derive(Debug, Clone)]
pub struct TokenVerifier {
    key_id: String,
    public_key: Vec<u8>,
    verified: std::sync::Arc<SignatureMemo>,
}

// === impl TokenVerifier ===

impl TokenVerifier {
    /// The key id this verifier accepts.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Verifies a dataplane token at time `now` and returns its claims.
    ///
    /// Checks, in order: shape (three base64url segments), header (`alg`
    /// `EdDSA`, `typ` `JWT` if present, `kid` this key if present), signature,
    /// claims shape, `kind` ([`DATAPLANE_KIND`]), validity window with
    /// [`CLOCK_SKEW`] tolerance, and finally `is_revoked(jti)`.
    pub fn verify(
        &self,
        token: &str,
        now: SystemTime,
        is_revoked: impl Fn(&str) -> bool,
    ) -> Result<TokenClaims, TokenError> {
        match self.verify_proxy(token, now, is_revoked) {
            Ok(claims) if claims.kind != DATAPLANE_KIND => {
                Err(TokenError::WrongKind { kind: claims.kind })
            }
            Err(TokenError::NotAProxyToken { kind }) => Err(TokenError::WrongKind { kind }),
            other => other,
        }
    }

    /// Verifies a dataplane or router token ([`DATAPLANE_KIND`],
    /// [`ROUTER_KIND`]); otherwise the same checks as [`TokenVerifier::verify`].
    /// A dataplane token must name a mesh and a name, a router token a site.
    pub fn verify_proxy(
        &self,
        token: &str,
        now: SystemTime,
        is_revoked: impl Fn(&str) -> bool,
    ) -> Result<TokenClaims, TokenError> {
        let malformed = |what: String| TokenError::Malformed(what);
        // Tolerate the trailing newline of a token read from a file.
        let token = token.trim();
        if token.len() > MAX_TOKEN_LEN {
            return Err(malformed(format!(
                "token is {} bytes, more than the {MAX_TOKEN_LEN} allowed",
                token.len()
            )));
        }
        let segments: Vec<&str> = token.split('.').collect();
        let [header_b64, payload_b64, signature_b64] = segments[..] else {
            return Err(malformed(format!(
                "expected 3 dot-separated segments (header.payload.signature), found {}",
                segments.len()
            )));
        };
        let header_json = decode_segment(header_b64, "header")?;
        let header: Header = serde_json::from_slice(&header_json)
            .map_err(|e| malformed(format!("header is not a valid JWS header: {e}")))?;
        if header.alg != "EdDSA" {
            return Err(malformed(format!(
                "header alg is {:?}; only \"EdDSA\" is accepted",
                header.alg
            )));
        }
        if let Some(typ) = header.typ.as_deref().filter(|t| *t != "JWT") {
            return Err(malformed(format!(
                "header typ is {typ:?}; expected \"JWT\""
            )));
        }
        if let Some(kid) = header.kid.as_deref().filter(|k| *k != self.key_id) {
            return Err(TokenError::BadSignature(format!(
                "signed with key {kid:?}, but this control plane's token key is {:?}",
                self.key_id
            )));
        }
        if let Some(i) = segments.iter().position(|s| s.is_empty()) {
            let what = ["header", "payload", "signature"][i];
            return Err(malformed(format!("{what} segment is empty")));
        }
        // The same bytes verified before: the signature holds (the memo
        // keeps only successes; expiry and revocation are checked below).
        let digest = SignatureMemo::digest(token);
        if !self.verified.contains(&digest) {
            let signature = decode_segment(signature_b64, "signature")?;
            let signed_len = header_b64.len() + 1 + payload_b64.len();
            let signed = &token.as_bytes()[..signed_len];
            UnparsedPublicKey::new(&ED25519, &self.public_key)
                .verify(signed, &signature)
                .map_err(|_| {
                    TokenError::BadSignature("signature does not match header and payload".into())
                })?;
            self.verified.insert(digest);
        }

        let payload = decode_segment(payload_b64, "payload")?;
        let claims: TokenClaims = serde_json::from_slice(&payload)
            .map_err(|e| malformed(format!("claims are invalid: {e}")))?;
        let required: &[(&str, &String)] = match claims.kind.as_str() {
            DATAPLANE_KIND => &[
                ("mesh", &claims.mesh),
                ("name", &claims.name),
                ("jti", &claims.jti),
            ],
            ROUTER_KIND => &[("site", &claims.site), ("jti", &claims.jti)],
            _ => return Err(TokenError::NotAProxyToken { kind: claims.kind }),
        };
        for (field, value) in required {
            if value.is_empty() {
                return Err(malformed(format!("claim {field} is empty")));
            }
        }
        if claims.exp <= claims.iat {
            return Err(malformed(format!(
                "claim exp ({}) is not after iat ({})",
                claims.exp, claims.iat
            )));
        }
        let now_secs = unix_secs(now);
        if now_secs > claims.exp.saturating_add(CLOCK_SKEW.as_secs()) {
            return Err(TokenError::Expired {
                dataplane: claims.node_id(),
                at: claims.expires_at(),
            });
        }
        if now_secs.saturating_add(CLOCK_SKEW.as_secs()) < claims.iat {
            return Err(TokenError::NotYetValid {
                from: claims.issued_at(),
            });
        }
        if is_revoked(&claims.jti) {
            return Err(TokenError::Revoked { jti: claims.jti });
        }
        Ok(claims)
    }
}

fn decode_segment(segment: &str, what: &str) -> Result<Vec<u8>, TokenError> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|e| TokenError::Malformed(format!("{what} is not unpadded base64url: {e}")))
}
