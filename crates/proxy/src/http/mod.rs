//! The L7 data path, built up in layers (issue 34): today the pure route
//! selection ([`route_select`]) that the HTTP listener will call for every
//! request, so a route change is seen by the next request on a long-lived
//! HTTP/2 connection.

pub mod route_select;
