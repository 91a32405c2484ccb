//! The demo's child processes and signal handling.

use super::*;

// === impl Proc ===

/// One child process of the demo.
pub(super) struct Proc {
    /// What it is, for messages (e.g. "control plane").
    pub(super) label: String,
    /// The process.
    pub(super) child: tokio::process::Child,
    /// Its log file.
    pub(super) log: PathBuf,
    /// Its unexpected exit was already reported as the demo's error.
    pub(super) reported: bool,
}

impl Proc {
    /// SIGTERM, then waits; SIGKILL after a grace period or a second signal.
    pub(super) async fn stop(mut self, signals: &mut Signals) -> bool {
        let outcome = match self.child.try_wait() {
            Ok(Some(status)) => Ok(status),
            _ => self.terminate(signals).await,
        };
        match outcome {
            Ok(status) if stopped_cleanly(status) => {
                println!("stopped {}", self.label);
                true
            }
            Ok(_) if self.reported => false,
            Ok(status) => {
                eprintln!(
                    "warning: {} exited with {}; see {}",
                    self.label,
                    describe(status),
                    self.log.display()
                );
                false
            }
            Err(why) => {
                eprintln!("warning: killing {}: {why}", self.label);
                let _ = self.child.kill().await;
                false
            }
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub(super) async fn terminate(&mut self, signals: &mut Signals) -> Result<ExitStatus, String> {
        let grace = Duration::from_secs(20);
        if let Some(pid) = self.child.id().and_then(|id| Pid::from_raw(id as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        tokio::select! {
            r = tokio::time::timeout(grace, self.child.wait()) => match r {
                Ok(Ok(status)) => Ok(status),
                Ok(Err(e)) => Err(format!("cannot wait for it: {e}")),
                Err(_) => Err(format!("it did not stop within {}", humantime::format_duration(grace))),
            },
            sig = signals.recv() => Err(format!("{sig} received again")),
        }
    }
}

/// Exit code 0, or ended by the SIGTERM (15) or SIGINT (2) it was sent.
pub(super) fn stopped_cleanly(status: ExitStatus) -> bool {
    status.success() || matches!(status.signal(), Some(15 | 2))
}

pub(super) fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    }
}

// === signals ===

/// SIGTERM and SIGINT, installed before any child starts.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub(super) fn install() -> Result<Self, Failure> {
        let err =
            |e: std::io::Error| Failure::Runtime(format!("cannot install signal handlers: {e}"));
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(err)?,
            int: signal(SignalKind::interrupt()).map_err(err)?,
        })
    }

    pub(super) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
