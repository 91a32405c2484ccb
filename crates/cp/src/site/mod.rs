//! The multi-site side of the control plane: the Site, its CAs, RouterAccess
//! credentials, AccessGrant status and AccessToken redemption (DESIGN.md
//! §6 "Site CA", §9).
//!
//! - [`ca_store`]: the site CAs and the grant server CA, created once;
//! - [`controller`]: the one task that reconciles Site, RouterAccess,
//!   AccessGrant and AccessToken;
//! - [`router_access`]: when a RouterAccess Secret is (re)issued;
//! - [`grant_status`], [`site_status`]: the statuses, as pure functions;
//! - [`tokens`]: the redemption state machine of an AccessToken;
//! - [`renewal`]: renewing the Link client credentials redemptions stored.
//!
//! Router status (links, `Running`, `network`) is not written here.

pub mod ca_store;
pub mod controller;
pub mod grant_status;
pub mod renewal;
pub mod router_access;
pub mod site_status;
pub mod tokens;

pub use controller::{SiteContext, SiteController};
pub use grant_status::expire_grants;

#[cfg(test)]
mod status_order_tests;
