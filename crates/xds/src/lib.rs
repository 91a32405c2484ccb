//! meshlink-xds: the control plane's streaming protocols.
//!
//! Today it holds the generated code for meshlink's own gRPC protocol,
//! [`certify`] (`meshlink.v1.Certify`), shared by the control plane (server)
//! and proxies (client). The ADS server and client come with the xDS issue.

/// `meshlink.v1`: the Certify RPC (generated from `proto/meshlink/v1/certify.proto`).
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod certify {
    tonic::include_proto!("meshlink.v1");
}

pub mod owner;
pub mod translate;
