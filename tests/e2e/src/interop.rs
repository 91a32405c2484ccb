//! The grpcio side of the gRPC tests: the venv python of `tests/interop`
//! and its scripts, and `greeter_server.py` run as a child process.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

/// The venv python with grpcio; panics with the fix when it is missing.
pub fn interop_python() -> PathBuf {
    let root = crate::workspace_root();
    let python = std::env::var_os("MESHLINK_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/interop/.venv/bin/python"));
    let fix = "create it from the workspace root with `scripts/setup-test-deps` \
               (scripts/test runs it), or set MESHLINK_INTEROP_PYTHON to a python that has grpcio";
    assert!(
        python.exists(),
        "interop python {} not found: {fix}",
        python.display()
    );
    let ok = Command::new(&python)
        .args(["-c", "import grpc"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{} cannot `import grpc`: {fix}", python.display());
    python
}

/// A script of `tests/interop`.
pub fn script(name: &str) -> PathBuf {
    crate::manifest_dir().join("../interop").join(name)
}

/// A child process killed (and reaped) on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `greeter_server.py`: a real gRPC server answering with its id.
pub struct Greeter {
    /// Its listening port.
    pub port: u16,
    _stdin: ChildStdin,
    _child: Killed,
}

impl Greeter {
    /// Starts `greeter_server.py --id ID` on a free port and waits for it.
    pub fn start(python: &std::path::Path, id: &str) -> Greeter {
        let mut child = Command::new(python)
            .arg(script("greeter_server.py"))
            .args(["--id", id, "--exit-on-stdin-eof"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn greeter_server.py");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read greeter_server.py stdout");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("greeter_server.py {id} did not start ({e}): {line:?}"));
        let port = v["port"].as_u64().expect("port in the listening line") as u16;
        Greeter {
            port,
            _stdin: stdin,
            _child: Killed(child),
        }
    }
}
