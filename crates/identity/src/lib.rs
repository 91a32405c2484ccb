//! meshlink identity: who may hold which certificate, how certificates are
//! issued, and when they are renewed.
//!
//! Owns mesh CAs (builtin and provided), SPIFFE workload certificates (from
//! CSRs, or with a CP-generated key for Envoy/gRPC clients), site CAs, trust
//! bundles and CA rotation state, proxy tokens, the renewal schedule and
//! rustls configuration builders. It does no storage and no networking: the
//! control plane stores what it returns and serves it.
//!
//! Crypto: one provider for the whole tree, `ring` (rcgen, rustls, tokens).

// === certificates (CAs, issuance, bundles, TLS) ===
pub mod bundle;
pub mod ca;
pub mod csr;
pub mod issue;
mod provided;
pub mod site_ca;
pub mod site_renew;
pub mod spiffe;
mod svid_verify;
pub mod tls;
pub mod tls_pair;
mod x509;

pub use bundle::{CaRoot, RotationPhase, RotationState, TrustBundle};
pub use ca::{CaError, CaMaterial, MeshCa};
pub use csr::{CsrError, CsrInfo, inspect_csr};
pub use issue::{IssueError, IssuedCert};
pub use site_ca::SiteCa;
pub use site_renew::RenewError;
pub use spiffe::{SpiffeId, SpiffeIdError};
pub use svid_verify::SvidError;
pub use tls::{
    ClientAuth, TlsError, client_config, client_config_any_of, peer_spiffe_id, server_config,
};
pub use tls_pair::{TlsPairError, TlsPairInfo, check_tls_pair};
pub use x509::PemError;

// === tokens, renewal schedule, rate limiting ===
pub mod rate_limit;
pub mod renewal;
pub mod token;
mod token_memo;

pub use rate_limit::{KeyedRateLimiter, RateLimitError, RetryAfter};
pub use renewal::{
    BackoffPolicy, Credential, RenewalDriver, RenewalError, RetryBackoff, WallClock,
    lowered_lifetime_delay, outlives_lifetime, random_jitter, renewal_time, renewal_time_from,
};
pub use token::{
    DATAPLANE_KIND, ROUTER_KIND, ROUTER_NODE_PREFIX, TokenClaims, TokenError, TokenKeyMaterial,
    TokenSigningKey, TokenVerifier,
};
