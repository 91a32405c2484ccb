//! Ports a test must name before anything binds them.
//!
//! A sidecar's listener ports are named in its Dataplane up front, an app
//! run as a child process is told its port, and a control plane that
//! restarts must come back on the port its sidecars and clients were
//! given. Binding port 0 and releasing it is not enough for these:
//! Linux hands out the same range (32768–60999 by default) as the source
//! port of every outgoing connection, so a sidecar retrying its control
//! plane, or another test, can hold the port by the time its owner binds
//! it. CI lost a run to exactly that: a control plane restarted on its
//! own API port and found it taken.
//!
//! [`claim`] therefore takes ports below the ephemeral range, where the
//! kernel never picks a source port, and marks each one taken with a lock
//! file under `$TMPDIR/meshlink-e2e-ports/` that this test process holds
//! until it exits (an `flock`, so a crashed test frees its ports), so two
//! tests running at once never get the same port.

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;

/// The claimed range: below Linux's default ephemeral range.
const FIRST: u16 = 20_000;
/// One past the last claimed port.
const END: u16 = 32_700;

/// Lock files this process holds: one per claimed port, kept open (and
/// so locked) until the process exits.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A port on `host` that no other test holds and nothing binds now,
/// kept for this process until it exits.
///
/// Panics if the whole range is taken, which means something else on the
/// machine binds these ports.
pub fn claim(host: &str) -> u16 {
    let dir = lock_dir();
    let span = u64::from(END - FIRST);
    let start = {
        use std::hash::{BuildHasher, RandomState};
        RandomState::new().hash_one((std::process::id(), host)) % span
    };
    for i in 0..span {
        // Stride by a prime so two processes that start at nearby
        // offsets do not walk the same ports in step.
        let port = FIRST + ((start + i * 7919) % span) as u16;
        let Some(lock) = try_lock(&dir, port) else {
            continue;
        };
        if TcpListener::bind((host, port)).is_ok() {
            HELD.lock().expect("port claims").push(lock);
            return port;
        }
    }
    panic!(
        "no free port in {FIRST}..{END} on {host}: every one is claimed by a test \
         (lock files in {}) or bound by another process",
        dir.display()
    );
}

/// The directory of the lock files, created on first use.
fn lock_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("meshlink-e2e-ports");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// The lock on `port`, if no process (this one included) holds it.
fn try_lock(dir: &std::path::Path, port: u16) -> Option<File> {
    let path = dir.join(format!("{port}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.try_lock().ok().map(|()| file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_ports_are_distinct_below_the_ephemeral_range_and_bindable() {
        let ports: Vec<u16> = (0..20).map(|_| claim("127.0.0.1")).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ports.len(),
            "a port was claimed twice: {ports:?}"
        );
        for port in ports {
            assert!(
                (FIRST..END).contains(&port),
                "{port} outside {FIRST}..{END}"
            );
            TcpListener::bind(("127.0.0.1", port)).expect("a claimed port binds");
        }
    }
}
