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

/// SIGTERM, SIGINT and SIGHUP, installed before any child starts. The
/// children run in their own process groups, so the terminal's signals
/// (Ctrl-C, or SIGHUP when it closes) reach the demo alone, and it stops
/// them.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    pub(super) fn install() -> Result<Self, Failure> {
        let err =
            |e: std::io::Error| Failure::Runtime(format!("cannot install signal handlers: {e}"));
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(err)?,
            int: signal(SignalKind::interrupt()).map_err(err)?,
            hup: signal(SignalKind::hangup()).map_err(err)?,
        })
    }

    pub(super) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

// === impl Demo: its child processes ===

impl Demo {
    /// Starts a child process with its output in `logs/<log>`.
    pub(super) fn spawn(
        &mut self,
        label: &str,
        bin: &Path,
        args: &[String],
        log: &str,
    ) -> Result<(), Failure> {
        let log = self.dir.join("logs").join(log);
        let open = || std::fs::File::create(&log);
        let io =
            |e: std::io::Error| Failure::Runtime(format!("cannot create {}: {e}", log.display()));
        let out = open().map_err(io)?;
        let err = out.try_clone().map_err(io)?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            // Its own process group: Ctrl-C in the terminal signals the
            // demo alone, which then stops each child once, in order (a
            // second signal would cut a control plane's drain short).
            .process_group(0)
            // The output goes to a log file: no colour escapes.
            .env("NO_COLOR", "1");
        // The demo passes every setting as a flag; stray MESHLINK_* variables
        // (a PostgreSQL store, a config file) must not change it.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("MESHLINK_") {
                cmd.env_remove(k);
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| Failure::Runtime(format!("cannot start {}: {e}", bin.display())))?;
        println!(
            "started {label} (pid {}), log {}",
            child.id().unwrap_or(0),
            log.display()
        );
        self.procs.push(Proc {
            label: label.to_string(),
            child,
            log,
            reported: false,
        });
        Ok(())
    }

    /// Polls `probe` until it succeeds, printing progress; fails when a
    /// child exits or after the start-up timeout.
    pub(super) async fn wait_for<T>(
        &mut self,
        what: &str,
        url: &str,
        mut probe: impl AsyncFnMut(&reqwest::Client) -> Result<T, String>,
    ) -> Result<T, Failure> {
        println!("waiting for {what} ({url}) ...");
        let start = Instant::now();
        let mut last = String::new();
        let mut last_print = start;
        loop {
            if let Some(msg) = self.exited_child() {
                return Err(Failure::Runtime(msg));
            }
            let detail = match probe(&self.http).await {
                Ok(v) => {
                    println!("{what}: ready after {:.1}s", start.elapsed().as_secs_f64());
                    return Ok(v);
                }
                Err(d) => d,
            };
            if start.elapsed() >= self.timeout {
                return Err(Failure::Runtime(format!(
                    "{what} not ready after {}: {detail}. See the logs in {}/logs; on a slow machine pass a longer --timeout",
                    humantime::format_duration(self.timeout),
                    self.dir.display()
                )));
            }
            let changed = detail != last && start.elapsed() >= Duration::from_secs(1);
            if changed || last_print.elapsed() >= Duration::from_secs(10) {
                println!(
                    "  still waiting for {what} ({}s): {detail}",
                    start.elapsed().as_secs()
                );
                last = detail;
                last_print = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A message naming the first child that has exited, with its log tail.
    pub(super) fn exited_child(&mut self) -> Option<String> {
        self.procs.iter_mut().find_map(|p| {
            let status = p.child.try_wait().ok().flatten()?;
            p.reported = true;
            let tail = log_tail(&p.log, 15);
            let hint = if tail.contains("in use") {
                "\nA port was taken after the demo checked it; run the demo again (or pass --random-ports)."
            } else {
                ""
            };
            Some(format!(
                "{} exited unexpectedly ({}); last lines of {}:\n{tail}{hint}",
                p.label,
                describe(status),
                p.log.display()
            ))
        })
    }

    /// Runs until SIGINT/SIGTERM, or fails when a child exits.
    pub(super) async fn supervise(&mut self, signals: &mut Signals) -> Result<(), Failure> {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                sig = signals.recv() => {
                    println!("{sig} received; stopping the demo");
                    return Ok(());
                }
                _ = tick.tick() => {
                    if let Some(msg) = self.exited_child() {
                        return Err(Failure::Runtime(msg));
                    }
                }
            }
        }
    }

    /// Stops the children in reverse start order (sidecars, then the control
    /// plane), then the apps. True when each exited cleanly.
    pub(super) async fn stop(&mut self, signals: &mut Signals) -> bool {
        let mut clean = true;
        while let Some(p) = self.procs.pop() {
            clean &= p.stop(signals).await;
        }
        self.apps.shutdown().await;
        clean
    }
}
