//! `meshlink-proxy wait`: blocks until a sidecar's `/ready` answers 200,
//! then runs the application (Istio's `holdApplicationUntilProxyStarts`,
//! Kuma's `waitForDataplaneReady`). With transparent proxying, an app that
//! starts before its sidecar is ready gets its connections refused; one
//! started through this wrapper never sees that window.
//!
//! Owns nothing but the polling loop: readiness itself is the admin
//! endpoint's ([`crate::admin`]).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::http::one_shot;

/// Flags of `meshlink-proxy wait`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The sidecar's admin address (its `--admin-addr`).
    #[arg(
        long,
        env = "MESHLINK_PROXY_ADMIN_ADDR",
        default_value = "127.0.0.1:9901"
    )]
    pub admin_addr: SocketAddr,
    /// How long to wait before giving up (exit 1), e.g. 60s, 5m.
    #[arg(long, env = "MESHLINK_PROXY_WAIT_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// How often to ask `/ready`.
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// The application to run once the sidecar is ready (after `--`); it
    /// replaces this process, so it gets signals and its exit code is the
    /// container's. Without one, `wait` exits 0 once ready (a postStart
    /// hook).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How often a long wait says what it is waiting for.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What one look at `/ready` found: ready, or why not (the sidecar's own
/// answer, or why there was none).
async fn probe(admin: SocketAddr) -> Result<(), String> {
    let uri = format!("http://{admin}/ready");
    match one_shot::exchange(http::Method::GET, &uri, None, Bytes::new()).await {
        Ok((status, _)) if status.is_success() => Ok(()),
        Ok((status, body)) => {
            let body = String::from_utf8_lossy(&body);
            let reason = body.trim().lines().take(3).collect::<Vec<_>>().join("; ");
            Err(format!("{status}: {reason}"))
        }
        Err(e) => Err(e),
    }
}

/// Polls `/ready` at `admin` every `interval` until it answers 200 or
/// `timeout` passes; calls `progress` with how long it has waited and the
/// last reason at most every 5 s. The error names the address, the time
/// waited and the last reason.
pub async fn until_ready(
    admin: SocketAddr,
    timeout: Duration,
    interval: Duration,
    mut progress: impl FnMut(Duration, &str),
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut next_progress = start + PROGRESS_EVERY;
    loop {
        let reason = match probe(admin).await {
            Ok(()) => return Ok(start.elapsed()),
            Err(reason) => reason,
        };
        let now = Instant::now();
        if now >= start + timeout {
            return Err(format!(
                "the sidecar at {admin} was not ready within {}: {reason}; check its log \
                 (its /ready lists what it still lacks), or raise --timeout",
                humantime::format_duration(timeout)
            ));
        }
        if now >= next_progress {
            progress(now - start, &reason);
            next_progress = now + PROGRESS_EVERY;
        }
        tokio::time::sleep(interval.min(start + timeout - now)).await;
    }
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;
