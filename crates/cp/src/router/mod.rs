//! The control plane's side of site routers: the store-backed
//! [`SiteSource`](meshlink_xds::router::SiteSource) their configuration is
//! translated from, the `RouterStatus` RPC they report on, and the task
//! that writes their reports into Link, Site, Listener, MultiKeyListener
//! and Connector status, with each Link's `CredentialsValid` condition.

pub(crate) mod bind_status;
pub(crate) mod connector_status;
pub(crate) mod credentials;
pub(crate) mod holder;
pub(crate) mod incoming_links;
pub(crate) mod link_status;
pub(crate) mod multi_key_status;
mod network_status;
pub(crate) mod rpc;
pub(crate) mod source;
pub(crate) mod status;
