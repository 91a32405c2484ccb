//! Runs the real `meshlink` CLI.

use std::io::Write;
use std::process::{Command, Stdio};

/// What a CLI run printed and how it exited.
#[derive(Debug)]
pub struct CliOutput {
    /// Exit code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CliOutput {
    /// Panics with the full output unless the exit code is 0.
    pub fn success(self) -> Self {
        assert_eq!(self.code, 0, "meshlink failed: {self:#?}");
        self
    }
}

/// Runs `meshlink ARGS` with `envs`, feeding `stdin`.
pub fn run_cli(args: &[&str], envs: &[(&str, &str)], stdin: Option<&str>) -> CliOutput {
    let mut cmd = Command::new(crate::bin_path("meshlink"));
    cmd.args(args)
        .env_remove("MESHLINK_SERVER")
        .env_remove("MESHLINK_TOKEN")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn meshlink");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin piped")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait for meshlink");
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
