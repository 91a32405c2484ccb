//! The control plane's identity side: mesh CAs in the store, proxy tokens,
//! the Certify RPC and the mesh CA controller (the only writer of the CA
//! rotation state), reached by issuers through [`CaHandle`].

mod ca_handle;
mod ca_source;
pub mod certify;
pub mod controller;
pub mod issuance;
pub mod mesh_ca;
pub mod rotation;
pub mod secrets;
pub mod tokens;

pub use ca_handle::{CaHandle, Issuance, LOAD_WAIT};

#[cfg(test)]
pub(crate) mod tests;
