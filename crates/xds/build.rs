//! Generates the gRPC code for meshlink's own protos (Certify) with a
//! vendored `protoc`, so no system protobuf compiler is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &["proto/meshlink/v1/certify.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
