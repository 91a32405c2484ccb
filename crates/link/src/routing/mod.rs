//! Link-state routing for site routers: a pure, I/O-free module.
//!
//! Each router floods a link-state advertisement ([`Lsa`]): its links with
//! their costs and the routing keys it has connectors (and listeners) for.
//! Every router keeps the newest LSA of every other one, computes the
//! cheapest paths from itself over the links both ends advertise, and from
//! them the destinations of each routing key and the next hop towards each.
//! Edge routers never carry transit. [`LinkStateRouter`] is the one type
//! the transport drives; see its module for the flooding contract, and
//! `docs/architecture.md` ("Link-state routing") for the rules.
//!
//! This module never does I/O, never spawns and never reads a clock: the
//! transport owns the links, the timers and the messages.

mod error;
mod lsdb;
mod picker;
mod router;
mod spf;
mod table;
mod view;
mod wire;

#[cfg(test)]
mod tests;

pub use error::{AdjacencyError, LsaError};
pub use router::{LinkStateRouter, Received, ReceivedKind, Update};
pub use spf::Route;
pub use table::{Destination, RouteChange, RouteDiff};
pub use view::{LinkView, NetworkView, ServiceView, SiteView};
pub use wire::{
    Hello, LinkAdvert, LinkDirection, Lsa, MAX_NAME_LEN, PROTOCOL_VERSION, RouterId, RouterInfo,
    ServiceAdvert, Version,
};
