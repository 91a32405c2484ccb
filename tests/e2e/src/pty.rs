//! A process run in a pseudo-terminal, as a user runs it in a terminal:
//! the terminal is its controlling terminal and its process group is the
//! foreground one, so a Ctrl-C written to the terminal reaches it through
//! the terminal's line discipline (SIGINT to the foreground process
//! group), exactly as pressing Ctrl-C does.
//!
//! util-linux's `setsid --ctty --wait` starts the process in a new session
//! with the pseudo-terminal as its controlling terminal (no `unsafe`
//! `pre_exec` here) and exits with its exit code.

use std::fs::File;
use std::io::Write;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

use crate::lines::{Lines, NoLine, stop_child};

/// A process whose stdin, stdout and stderr are a pseudo-terminal.
pub struct PtyProcess {
    child: Child,
    master: File,
    lines: Lines,
}
impl PtyProcess {
    /// Starts `program args` in a new pseudo-terminal (a terminal of 80
    /// columns with the default settings: Ctrl-C sends SIGINT).
    pub fn start(program: &std::path::Path, args: &[&str], envs_removed: &[&str]) -> PtyProcess {
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("open a pseudo-terminal");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let name = name
            .to_str()
            .expect("pseudo-terminal path is UTF-8")
            .to_owned();
        let slave = || {
            File::options()
                .read(true)
                .write(true)
                .open(&name)
                .unwrap_or_else(|e| panic!("open {name}: {e}"))
        };
        let mut cmd = Command::new("setsid");
        cmd.args(["--ctty", "--wait"])
            .arg(program)
            .args(args)
            .stdin(Stdio::from(slave()))
            .stdout(Stdio::from(slave()))
            .stderr(Stdio::from(slave()));
        for k in envs_removed {
            cmd.env_remove(k);
        }
        let child = cmd
            .spawn()
            .expect("spawn setsid (util-linux) with a pseudo-terminal");
        // `cmd` (and with it this process's copies of the terminal side) is
        // dropped here, so the reader sees the end once the process exits.
        drop(cmd);
        let master = File::from(master);
        // Reading stops with EIO once no process holds the terminal side.
        let lines = Lines::read(master.try_clone().expect("clone the pseudo-terminal"));
        PtyProcess {
            child,
            master,
            lines,
        }
    }

    /// Types `bytes` at the terminal (`b"\x03"` is Ctrl-C).
    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.master
            .write_all(bytes)
            .expect("write to the pseudo-terminal");
    }

    /// Everything the process printed so far, one line each.
    pub fn output(&mut self) -> String {
        self.lines.text()
    }

    /// Waits for a printed line matching `pred`; panics with the output if
    /// the terminal closes first or after `timeout`.
    pub fn wait_line(&mut self, pred: impl Fn(&str) -> bool, timeout: Duration) -> String {
        match self.lines.wait_for(pred, timeout) {
            Ok(line) => line,
            Err(NoLine::Closed) => {
                panic!("the terminal closed before the line:\n{}", self.output())
            }
            Err(NoLine::Timeout) => panic!("no such line after {timeout:?}:\n{}", self.output()),
        }
    }

    /// Waits for the process to exit and for the rest of its output.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let status = crate::eventually("the process in the terminal to exit", timeout, || {
            self.child.try_wait().expect("wait for the process")
        });
        self.lines.finish();
        status
    }
}

impl Drop for PtyProcess {
    fn drop(&mut self) {
        // `setsid` needs no fork here (it is not a process group leader),
        // so the child is the process itself.
        stop_child(&mut self.child);
    }
}
