//! Conformance: I5, nothing acknowledged is lost. A child process writes
//! and reports each acknowledged write; the test kills it with SIGKILL
//! mid-stream and checks every acknowledged write is there after reopening.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::{DEADLINE, Harness, assert_feed_is_gap_free, create, key};

/// Tells the child test which store to write to.
const CHILD_ENV: &str = "MESHLINK_STORE_KILL9_CHILD_URL";

/// Acknowledged writes to wait for before killing the child.
const ACKS_BEFORE_KILL: usize = 100;

pub async fn acknowledged_writes_survive_kill9(h: &Harness) {
    // Migrate first, so the child only writes.
    drop(h.open().await);
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = tokio::process::Command::new(exe)
        .args([
            "kill9_writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &h.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the writer child");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    while acked.len() < ACKS_BEFORE_KILL {
        let line = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "child acknowledged only {} writes within {DEADLINE:?}",
                    acked.len()
                )
            })
            .expect("read child stdout")
            .unwrap_or_else(|| panic!("child exited after {} acknowledged writes", acked.len()));
        if let Some(n) = line.strip_prefix("ACK ") {
            acked.push(n.parse::<u64>().expect("ACK line"));
        }
    }
    // SIGKILL while the child is still writing.
    child.kill().await.expect("kill -9 the child");

    let store = h.open().await;
    for i in &acked {
        let name = format!("k{i}");
        assert!(
            store.get(&key("default", &name)).await.unwrap().is_some(),
            "acknowledged write {name} was lost after kill -9"
        );
    }
    let current = store.current_revision().await.unwrap();
    assert!(
        current >= acked.len() as u64,
        "revision {current} < {} acknowledged writes",
        acked.len()
    );
    assert_feed_is_gap_free(&*store, current).await;
    // The store keeps working after the crash.
    assert_eq!(
        create(&*store, "default", "after-crash").await.revision,
        current + 1
    );
}

/// The child: creates `k0`, `k1`, ... and prints `ACK n` after each one
/// is acknowledged, until killed. Returns at once outside the test above.
pub async fn writer_child() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = meshlink_store::open(&url).await.expect("child: open store");
    for i in 0u64.. {
        create(&*store, "default", &format!("k{i}")).await;
        println!("ACK {i}");
    }
}
