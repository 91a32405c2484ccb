//! End-to-end harness: starts the real `meshlink-cp` binary on a temporary
//! data dir, runs the real `meshlink` CLI against it, and talks to the REST
//! API directly.
//!
//! Binaries are taken from the cargo target dir next to the test executable
//! (or from `MESHLINK_BIN_DIR` when set, for a cargo `build-dir` kept apart
//! from the target dir); `scripts/test` builds them first (`cargo build --bins`).

pub mod ads;
pub mod app;
pub mod certify;
mod cli;
mod cp;
pub mod curl;
pub mod grpc_xds;
pub mod http_backend;
pub mod interop;
pub mod lines;
pub mod netns;
pub mod ports;
mod postgres;
pub mod proxy;
pub mod pty;
pub mod replicas;
mod secret;
pub mod site;
pub mod span_collector;
pub mod transparent;

pub use cli::{CliOutput, run_cli};
pub use cp::{ControlPlane, StoreKind};
pub use postgres::{PrivatePostgres, fresh_postgres_database};
pub use secret::tls_secret;

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Path of a workspace binary (`meshlink-cp`, `meshlink`, ...).
pub fn bin_path(name: &str) -> PathBuf {
    let profile_dir = match std::env::var_os("MESHLINK_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("current exe");
            // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/<name>
            exe.parent()
                .and_then(|p| p.parent())
                .expect("test binary lives in target/<profile>/deps")
                .to_path_buf()
        }
    };
    let p = profile_dir.join(name);
    assert!(
        p.exists(),
        "binary {} not found; build it first with `cargo build --bins` (scripts/test does this)",
        p.display()
    );
    p
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(5);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// A loopback TCP port for a listener that a process binds later: the
/// sidecars' inbound and outbound listener ports, which the Dataplane
/// names up front (the proxy learns them over xDS), and apps run as child
/// processes that must be told their port. See [`ports::claim`]: the port
/// stays this test's until it exits. Everything that can bind port 0 and
/// report its address does: the sidecars' admin endpoint
/// (`--admin-addr-file`) and the in-process apps ([`app::HttpApp::start`]).
pub fn free_port() -> u16 {
    ports::claim("127.0.0.1")
}

/// This crate's directory (`tests/e2e`), as the test runner gives it
/// (cargo and nextest set `CARGO_MANIFEST_DIR` when they run a test), else
/// as it was at build time. The runner's is right when a target dir is
/// shared between checkouts at different paths: cargo then reuses a test
/// binary built in the other checkout, whose compile-time path may no
/// longer exist.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    manifest_dir().join("../..")
}

/// The path of a fixture file under `tests/e2e/fixtures` or `crates/api/tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    let root = manifest_dir();
    let local = root.join("fixtures").join(name);
    if local.exists() {
        return local;
    }
    root.join("../../crates/api/tests/fixtures").join(name)
}

/// Generates one `#[test]` per store backend for a function taking a
/// [`StoreKind`]: `sqlite::NAME` and `postgres::NAME`.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name($crate::StoreKind::fresh("sqlite")) } )*
        }
        mod postgres {
            $( #[test] fn $name() { super::$name($crate::StoreKind::fresh("postgres")) } )*
        }
    };
}
