//! meshlink-xds: the control plane's streaming protocols.
//!
//! - [`translate`]: the pure translator `(proxy, mesh view) -> Snapshot`.
//! - [`owner`]: stream ownership per proxy key (invariant I1).
//! - [`hub`]: the reconciler that turns store changes into per-proxy state.
//! - [`ads`]: the Envoy v3 ADS server (SotW and delta).
//! - [`dump`]: a proxy's configuration in Envoy's `/config_dump` JSON shape.
//! - [`router`]: site routers: their translator and reconciler.
//! - [`certify`]: meshlink's own protos (generated, from `meshlink-proto`):
//!   Certify, the router's resources and the RouterStatus RPC.

/// `meshlink.v1`: meshlink's own generated protos, owned by
/// `meshlink-proto` and re-exported for the control plane's modules.
pub use meshlink_proto::certify;

pub mod ads;
pub mod dump;
pub mod hub;
pub mod owner;
pub mod router;
pub mod translate;
