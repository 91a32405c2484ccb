//! `meshlink demo`: the CLI starts two sites of real binaries (two control
//! planes, two sidecars, two routers) and links them; `--once` sends one
//! request through the mesh and one across the sites and exits 0; without
//! it the demo writes `--ready-file`, prints commands that work as typed
//! (the CLI against its control plane, `network status`, a curl across the
//! sites, deleting and re-applying the permission with loops that wait for
//! the change), runs until SIGTERM, then stops every child and exits 0; in a
//! terminal, Ctrl-C does the same (the children are not in the terminal's
//! foreground process group, so they are stopped once, by the demo).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshlink_e2e::lines::{Lines, NoLine, stop_child};
use meshlink_e2e::pty::PtyProcess;
use meshlink_e2e::{bin_path, eventually};

const BACKEND_BODY: &str = "hello from backend\n";
const SITE_B_BODY: &str = "hello from site B\n";
/// A safety net only: the demo fails by itself after its own start-up
/// timeouts (60 s per step) and prints why.
const START: Duration = Duration::from_secs(300);
const CHANGE: Duration = Duration::from_secs(60);

#[test]
fn demo_once_sends_a_request_through_the_mesh_and_exits_0() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let mut demo = Demo::start(&["--once", "--data-dir", dir.to_str().unwrap()]);
    let code = demo.wait_exit(START);
    let out = demo.stdout();
    assert_eq!(code, Some(0), "{}", demo.report());
    assert!(
        out.lines()
            .any(|l| l.starts_with("check: GET http://127.0.0.1:")
                && l.ends_with("200 \"hello from backend\"")),
        "{}",
        demo.report()
    );
    assert!(
        out.lines().any(|l| l.starts_with("ok: the mesh works")),
        "{}",
        demo.report()
    );
    assert_stopped_cleanly(&mut demo);
    let pids = started_pids(&out);
    assert_eq!(
        pids.len(),
        6,
        "two control planes, two sidecars, two routers: {}",
        demo.report()
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("check: GET http://127.0.0.1:")
                && l.ends_with("200 \"hello from site B\"")),
        "{}",
        demo.report()
    );
    for pid in pids {
        assert!(
            !running(pid),
            "process {pid} is still running after the demo exited"
        );
    }
}

#[test]
fn demo_runs_until_sigterm_and_then_stops_every_child() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let ready_file = tmp.path().join("ready.json");
    let mut demo = Demo::start(&[
        "--random-ports",
        "--data-dir",
        dir.to_str().unwrap(),
        "--ready-file",
        ready_file.to_str().unwrap(),
    ]);
    demo.wait_line(|l| l.starts_with("ready: "), START);
    let ready: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready_file).expect("--ready-file written"))
            .expect("--ready-file is JSON");
    let url = ready["mesh"].as_str().expect("mesh URL");
    assert_eq!(get(url).as_deref(), Ok(BACKEND_BODY), "{}", demo.report());
    let across = ready["acrossSites"].as_str().expect("across-sites URL");
    assert_eq!(get(across).as_deref(), Ok(SITE_B_BODY), "{}", demo.report());

    // The printed CLI commands work as typed, after the printed export.
    let out = demo.stdout();
    let printed = |suffix: &str| -> String {
        // The last match: the commands to try come after the progress lines.
        out.lines()
            .rev()
            .map(str::trim)
            .find(|l| l.ends_with(suffix))
            .unwrap_or_else(|| panic!("no printed command ending in {suffix:?}:\n{out}"))
            .to_string()
    };
    let export = printed("/admin-token)\"");
    assert!(export.starts_with("export MESHLINK_SERVER="), "{export}");
    let sh = |cmd: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("{export}\n{cmd}"))
            .env_remove("MESHLINK_SERVER")
            .env_remove("MESHLINK_TOKEN")
            .output()
            .expect("run sh");
        let text = format!(
            "$ {cmd}\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{text}");
        text
    };
    let dps = sh(&printed(" get dataplanes"));
    assert!(dps.contains("web") && dps.contains("backend"), "{dps}");
    let inspect = sh(&printed(" inspect dataplane web"));
    assert!(inspect.contains("default/web"), "{inspect}");
    let network = sh(&printed(" network status"));
    assert!(
        network.contains("site-a") && network.contains("site-b") && network.contains("backend-b"),
        "{network}"
    );
    let curl_across = printed(&format!("curl {across}"));
    assert!(
        sh(&curl_across).contains(SITE_B_BODY.trim()),
        "{curl_across}"
    );

    // Deleting the permission stops web -> backend; backend's sidecar counts
    // the denial; re-applying the demo's YAML lets traffic through again.
    let metrics_url = printed("/metrics | grep rbac")
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("metrics URL")
        .to_string();
    sh(&printed(" delete mtp web-to-backend -m default"));
    // The printed loop waits until the change has reached the sidecar:
    // right after it, the request is refused.
    sh(&format!(
        "timeout {} sh -c {:?}",
        CHANGE.as_secs(),
        printed_loop(&out, "until ! curl")
    ));
    assert!(get(url).is_err(), "refused right after the printed wait");
    eventually("a denial in backend's rbac metric", CHANGE, || {
        let text = get(&metrics_url).ok()?;
        text.lines()
            .filter(|l| l.starts_with("meshlink_proxy_rbac_denied_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .any(|v| v > 0.0)
            .then_some(())
    });
    let apply_cmd = printed("/demo.yaml");
    assert!(apply_cmd.contains(" apply -f "), "{apply_cmd}");
    sh(&apply_cmd);
    sh(&format!(
        "timeout {} sh -c {:?}",
        CHANGE.as_secs(),
        printed_loop(&out, "until curl")
    ));
    assert_eq!(
        get(url).as_deref(),
        Ok(BACKEND_BODY),
        "allowed right after the printed wait"
    );

    let children = children_of(demo.pid());
    assert!(
        children.len() >= 6,
        "two control planes, two sidecars, two routers: {children:?}"
    );
    demo.signal("TERM");
    let code = demo.wait_exit(START);
    assert_eq!(code, Some(0), "{}", demo.report());
    assert_stopped_cleanly(&mut demo);
    for pid in children {
        assert!(
            !running(pid),
            "child {pid} is still running after the demo exited"
        );
    }
}

#[test]
fn ctrl_c_in_a_terminal_stops_the_demo_and_it_exits_0() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let mut demo = PtyProcess::start(
        &bin_path("meshlink"),
        &[
            "demo",
            "--random-ports",
            "--data-dir",
            dir.to_str().unwrap(),
        ],
        &["MESHLINK_SERVER", "MESHLINK_TOKEN"],
    );
    demo.wait_line(|l| l.starts_with("ready: "), START);
    // Ctrl-C as typed: the terminal sends SIGINT to its foreground process
    // group. Only the demo may be in it; it then stops each child once.
    demo.type_bytes(b"\x03");
    let status = demo.wait_exit(START);
    let out = demo.output();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(
        out.lines()
            .any(|l| l.ends_with("SIGINT received; stopping the demo")),
        "{out}"
    );
    assert!(!out.contains("did not stop cleanly"), "{out}");
    assert!(!out.contains("exited with"), "{out}");
    for line in [
        "stopped meshlink-proxy for web",
        "stopped meshlink-proxy for backend",
        "stopped meshlink-cp",
        "meshlink demo stopped",
    ] {
        assert!(out.lines().any(|l| l == line), "no {line:?}:\n{out}");
    }
    for pid in started_pids(&out) {
        assert!(
            !running(pid),
            "process {pid} is still running after the demo exited"
        );
    }
}

/// Each child exited after SIGTERM (code 0 or by the signal), then the demo.
fn assert_stopped_cleanly(demo: &mut Demo) {
    let out = demo.stdout();
    for line in [
        "stopped meshlink-proxy for web",
        "stopped meshlink-proxy for backend",
        "stopped meshlink-cp",
        "meshlink demo stopped",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "no {line:?}:\n{}",
            demo.report()
        );
    }
}

// === harness for a demo process ===

/// A running `meshlink demo`; stdout lines are read as they come. On drop
/// it gets SIGTERM (so it stops its children), then SIGKILL if it lingers.
struct Demo {
    child: Child,
    lines: Lines,
    stderr: Arc<Mutex<String>>,
}

impl Demo {
    fn start(args: &[&str]) -> Demo {
        let mut child = Command::new(bin_path("meshlink"))
            .arg("demo")
            .args(args)
            .env_remove("MESHLINK_SERVER")
            .env_remove("MESHLINK_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn meshlink demo");
        let lines = Lines::read(child.stdout.take().expect("stdout piped"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Demo {
            child,
            lines,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything printed on stdout so far.
    fn stdout(&mut self) -> String {
        self.lines.text()
    }

    /// stdout and stderr, for failure messages.
    fn report(&mut self) -> String {
        let out = self.stdout();
        let err = self.stderr.lock().unwrap().clone();
        format!("--- demo stdout:\n{out}\n--- demo stderr:\n{err}")
    }

    /// Waits for a stdout line matching `pred`; panics if stdout closes
    /// (the demo exited) or after `timeout`.
    fn wait_line(&mut self, pred: impl Fn(&str) -> bool, timeout: Duration) -> String {
        match self.lines.wait_for(pred, timeout) {
            Ok(line) => line,
            Err(NoLine::Closed) => {
                let status = self.child.wait().ok();
                panic!(
                    "the demo exited ({status:?}) before the line:\n{}",
                    self.report()
                );
            }
            Err(NoLine::Timeout) => {
                panic!("no such line after {timeout:?}:\n{}", self.report())
            }
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {}", self.pid());
    }

    /// Waits for the process to exit; its exit code (`None`: killed by a signal).
    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let status = eventually("the demo to exit", timeout, || {
            self.child.try_wait().expect("wait for the demo")
        });
        // Wait for the reader to see EOF so every line is collected.
        self.lines.finish();
        status.code()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// The printed shell loop that starts with `start`.
fn printed_loop(out: &str, start: &str) -> String {
    out.lines()
        .map(str::trim)
        .find(|l| l.starts_with(start) && l.ends_with("done"))
        .unwrap_or_else(|| panic!("no printed loop starting {start:?}:\n{out}"))
        .to_string()
}

// === processes and requests ===

/// The pids in the demo's `started NAME (pid N)` lines.
fn started_pids(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .filter(|l| l.starts_with("started "))
        .filter_map(|l| {
            let rest = l.split_once("(pid ")?.1;
            rest.split(')').next()?.parse().ok()
        })
        .collect()
}

/// `(state, ppid)` from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = s.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// Live (non-zombie) processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat(pid), Some((s, pp)) if pp == parent && s != 'Z'))
        .collect()
}

/// The process exists and is not a zombie.
fn running(pid: u32) -> bool {
    matches!(stat(pid), Some((s, _)) if s != 'Z')
}

/// GET `url`; the body of a 200, else an error.
fn get(url: &str) -> Result<String, String> {
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let r = client.get(url).send().map_err(|e| e.to_string())?;
    let status = r.status();
    let body = r.text().map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(format!("{status}: {body}"))
    }
}
