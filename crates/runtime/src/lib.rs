//! Process plumbing shared by meshlink's binaries: shutdown signals,
//! tracing set-up, the metrics registry, reconnect backoff, the open-files
//! limit and the data path's typed error ([`ProxyError`]).
//!
//! It owns no business logic and must never spawn work of its own.

pub mod backoff;
pub mod counted;
mod fd_limit;
mod metrics;
pub mod proxy_error;
mod shutdown;

pub use fd_limit::{open_files_limit, raise_open_files_limit};
pub use metrics::MetricsRegistry;
pub use proxy_error::{ErrorKind, Limit, ProxyError, Side, TlsFailure};
pub use shutdown::{FORCED_EXIT_CODE, Shutdown, shutdown_signal};

/// Initialises `tracing` to stderr. `RUST_LOG` overrides `default_filter`
/// (e.g. `info`).
pub fn init_tracing(default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    use std::io::IsTerminal as _;
    // Colour codes only for a terminal: logs redirected to files stay plain.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
