//! The proxy's xDS side: the delta ADS client ([`client`]), validation of
//! Envoy resources into the proxy's model ([`validate`]) and applying a
//! response to the last good configuration ([`apply`]).

pub mod apply;
pub mod client;
pub mod validate;

pub use client::{CpConnection, NodeId, SharedXdsStatus, XdsClient, XdsModel, XdsStatus};
