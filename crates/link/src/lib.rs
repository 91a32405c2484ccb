//! meshlink-link: the site-to-site link protocol.
//!
//! [`routing`] is the link-state routing (LSAs, shortest paths, routing key
//! destinations, the network view); it does no I/O.

pub mod routing;
