//! The committed Envoy descriptor set (`proto/envoy_descriptors.binpb`)
//! is what `protoc` makes today from the `.proto` files that ship inside
//! the `envoy-types` crate this workspace locks.
//!
//! The config dump (`meshlink_xds::dump`) reads that set at run time to
//! print resources as protobuf JSON. It is committed rather than built in
//! `build.rs` because a build script has no sound way to find another
//! crate's source directory; this test can ask `cargo metadata`.
//!
//! `UPDATE_DESCRIPTORS=1 cargo nextest run -p meshlink-xds --test
//! envoy_descriptors` (or `scripts/gen-envoy-descriptors`) rewrites the
//! file; do that after upgrading `envoy-types` or changing [`ROOTS`].

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files whose messages a config dump prints, directly or inside an
/// `Any`; `protoc --include_imports` adds everything they import.
const ROOTS: [&str; 15] = [
    "envoy/admin/v3/config_dump.proto",
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
    "envoy/config/listener/v3/listener.proto",
    "envoy/config/route/v3/route.proto",
    "envoy/extensions/transport_sockets/tls/v3/secret.proto",
    "envoy/extensions/transport_sockets/tls/v3/tls.proto",
    "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
    "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
    "envoy/extensions/filters/network/rbac/v3/rbac.proto",
    "envoy/extensions/filters/http/router/v3/router.proto",
    "envoy/extensions/filters/http/rbac/v3/rbac.proto",
    "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
    "envoy/extensions/filters/listener/original_dst/v3/original_dst.proto",
    "envoy/extensions/filters/udp/dns_filter/v3/dns_filter.proto",
];

/// Include directories under `envoy-types/proto`.
const INCLUDES: [&str; 6] = [
    "data-plane-api",
    "xds",
    "protoc-gen-validate",
    "googleapis",
    "cel-spec/proto",
    "opentelemetry-proto",
];

fn committed_path() -> PathBuf {
    manifest_dir().join("proto/envoy_descriptors.binpb")
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(manifest_dir());
    cmd
}

/// The host's target triple (`cargo -vV` prints `host: <triple>`).
fn host_triple() -> String {
    let out = cargo().arg("-vV").output().expect("cargo -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("cargo -vV names the host")
        .to_owned()
}

/// `envoy-types`' `proto/` directory, from `cargo metadata` (works for
/// registry, vendored and git sources alike). Filtered to the host so it
/// needs no other platform's crates and runs offline.
fn envoy_types_proto_dir() -> PathBuf {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &host_triple()])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let manifest = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("envoy-types is a dependency");
    Path::new(manifest)
        .parent()
        .expect("manifest has a directory")
        .join("proto")
}

/// Compiles [`ROOTS`] with the vendored `protoc` into a descriptor set.
fn generate() -> Vec<u8> {
    let protos = envoy_types_proto_dir();
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc");
    let wkt = protoc_bin_vendored::include_path().expect("vendored protoc includes");
    let out = tempfile_path();
    let mut cmd = Command::new(protoc);
    for dir in INCLUDES {
        cmd.arg(format!("-I{}", protos.join(dir).display()));
    }
    cmd.arg(format!("-I{}", wkt.display()))
        .arg("--include_imports")
        .arg(format!("-o{}", out.display()))
        .args(ROOTS);
    let status = cmd.output().expect("protoc runs");
    assert!(
        status.status.success(),
        "protoc failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let bytes = std::fs::read(&out).expect("protoc wrote the descriptor set");
    let _ = std::fs::remove_file(&out);
    bytes
}

fn tempfile_path() -> PathBuf {
    std::env::temp_dir().join(format!("envoy_descriptors.{}.binpb", std::process::id()))
}

#[test]
fn committed_descriptor_set_is_current() {
    let fresh = generate();
    let path = committed_path();
    if std::env::var_os("UPDATE_DESCRIPTORS").is_some() {
        std::fs::write(&path, &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e}; run scripts/gen-envoy-descriptors",
            path.display()
        )
    });
    assert!(
        committed == fresh,
        "{} ({} bytes) differs from what protoc makes from envoy-types' protos ({} bytes); \
         run scripts/gen-envoy-descriptors and commit the result",
        path.display(),
        committed.len(),
        fresh.len()
    );
}

/// This crate's directory, as the test runner gives it (cargo and nextest
/// set `CARGO_MANIFEST_DIR` when they run a test), else as it was at
/// build time (a target dir shared between checkouts may hold a binary
/// built in another one).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
