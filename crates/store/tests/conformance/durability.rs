//! Conformance: I5, nothing acknowledged is lost. A child process writes
//! and reports each acknowledged write (or batch of writes); the test kills
//! it with SIGKILL mid-stream and checks every acknowledged write is there
//! after reopening.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::batch::write_batch_of_creates;
use super::{DEADLINE, Harness, assert_feed_is_gap_free, create, key};

/// Tells the child test which store to write to.
const CHILD_ENV: &str = "MESHLINK_STORE_KILL9_CHILD_URL";

/// Set (to the batch size) when the child should write batches.
const CHILD_BATCH_ENV: &str = "MESHLINK_STORE_KILL9_CHILD_BATCH";

/// Objects per batch in the batch variant.
const BATCH_SIZE: u64 = 10;

/// Acknowledged writes to wait for before killing the child.
const ACKS_BEFORE_KILL: usize = 100;

pub async fn acknowledged_writes_survive_kill9(h: &Harness) {
    kill9_check(h, None).await;
}

/// The same with `write_batch`: every object of every acknowledged batch
/// is there after kill -9, and the feed has no gap (no half batch).
pub async fn acknowledged_batches_survive_kill9(h: &Harness) {
    kill9_check(h, Some(BATCH_SIZE)).await;
}

async fn kill9_check(h: &Harness, batch: Option<u64>) {
    // Migrate first, so the child only writes.
    drop(h.open().await);
    let exe = std::env::current_exe().expect("test binary path");
    let mut command = tokio::process::Command::new(exe);
    if let Some(size) = batch {
        command.env(CHILD_BATCH_ENV, size.to_string());
    }
    let mut child = command
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
    let names: Vec<String> = match batch {
        None => acked.iter().map(|i| format!("k{i}")).collect(),
        Some(size) => acked
            .iter()
            .flat_map(|b| (0..size).map(move |i| format!("b{b}-{i}")))
            .collect(),
    };
    for name in &names {
        assert!(
            store.get(&key("default", name)).await.unwrap().is_some(),
            "acknowledged write {name} was lost after kill -9"
        );
    }
    let current = store.current_revision().await.unwrap();
    assert!(
        current >= names.len() as u64,
        "revision {current} < {} acknowledged writes",
        names.len()
    );
    if let Some(size) = batch {
        assert_eq!(current % size, 0, "a batch was stored in part");
    }
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
    let batch: Option<u64> = std::env::var(CHILD_BATCH_ENV)
        .ok()
        .map(|v| v.parse().expect("batch size"));
    let store = meshlink_store::open(&url).await.expect("child: open store");
    for i in 0u64.. {
        match batch {
            None => {
                create(&*store, "default", &format!("k{i}")).await;
            }
            Some(size) => write_batch_of_creates(&*store, i, size).await,
        }
        println!("ACK {i}");
    }
}
