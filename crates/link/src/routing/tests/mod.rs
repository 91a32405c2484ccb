//! Tests of the routing module, all in memory: scenario tests per behaviour
//! and a property test of flooding convergence over an in-memory network
//! ([`sim`]) checked against a reference computation ([`check`]).

mod balancing;
mod check;
mod convergence;
mod messages;
mod sim;
mod topology;
