//! `curl` against a local port, for tests that must observe exactly what a
//! real HTTP client sees: the status, the headers and the body.

use std::process::Command;

use serde_json::Value;

/// What curl saw: status, headers (lower-case names) and body.
pub struct Seen {
    /// The status code.
    pub status: u16,
    /// Headers, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Seen {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// `curl -si` against `127.0.0.1:port` with `args`.
pub fn curl(port: u16, path: &str, args: &[&str]) -> Seen {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "20"])
        .args(args)
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Seen {
        status,
        headers,
        body: body.to_owned(),
    }
}
