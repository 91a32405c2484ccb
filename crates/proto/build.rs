//! Generates the gRPC code for meshlink's own protos (Certify, the router's
//! resources, RouterStatus, DataplaneHealth, the TCP access logger and the MeshMetric config) with a vendored `protoc`, so no system
//! protobuf compiler is needed. Messages get `prost::Name` with the
//! `type.googleapis.com` domain, so router resources travel in xDS `Any`s
//! under `type.googleapis.com/meshlink.v1.<Message>`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.enable_type_names();
    config.type_name_domain(["."], "type.googleapis.com");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(
            config,
            &[
                "proto/meshlink/v1/certify.proto",
                "proto/meshlink/v1/router.proto",
                "proto/meshlink/v1/dataplane_health.proto",
                "proto/meshlink/v1/access_log.proto",
                "proto/meshlink/v1/metrics.proto",
            ],
            &["proto"],
        )?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
