//! The control plane's identity side: mesh CAs in the store, proxy tokens,
//! the Certify RPC and the mesh identity controller.

pub mod certify;
pub mod controller;
pub mod issuance;
pub mod mesh_ca;
pub mod secrets;
pub mod tokens;
