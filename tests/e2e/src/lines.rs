//! The lines a child process prints, read on a thread as they come, and
//! stopping a child that should have exited: shared by the harnesses that
//! watch a process's output (`meshlink demo` on a pipe or a terminal).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Why no matching line came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoLine {
    /// The output ended (the process exited or closed it).
    Closed,
    /// The timeout passed.
    Timeout,
}

/// A process's output, one line at a time.
pub struct Lines {
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    /// Reads `from` on a thread until it ends (or fails), each line with
    /// any trailing `\r` (a terminal's line end) removed.
    pub fn read(from: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { break };
                if tx.send(line.trim_end_matches('\r').to_owned()).is_err() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Everything read so far, without waiting.
    pub fn text(&mut self) -> String {
        while let Ok(l) = self.rx.try_recv() {
            self.seen.push(l);
        }
        self.seen.join("\n")
    }

    /// Waits for a line matching `pred`.
    pub fn wait_for(
        &mut self,
        pred: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<String, NoLine> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return Ok(l);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(NoLine::Closed),
                Err(RecvTimeoutError::Timeout) => return Err(NoLine::Timeout),
            }
        }
    }

    /// Collects the rest once the process has exited (until the output
    /// ends; a safety net of 10 s for a grandchild holding it open).
    pub fn finish(&mut self) {
        while let Ok(l) = self.rx.recv_timeout(Duration::from_secs(10)) {
            self.seen.push(l);
        }
    }
}

/// If `child` still runs: SIGTERM (so it can stop what it started), up to
/// 30 s for it to exit, then SIGKILL.
pub fn stop_child(child: &mut Child) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
