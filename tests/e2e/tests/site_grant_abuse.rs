//! Issue 10 Acceptance 6 against the real `meshlink-cp` binary, with curl
//! as the Skupper-style redeemer: every failure of the grant server's
//! table has its exact status and body and changes nothing but the count;
//! 20 concurrent redemptions of a 10-use grant succeed exactly 10 times; a
//! 10 MB body is refused; a TLS 1.2-only client is refused at the
//! handshake; garbage on the port leaves the server serving. (The
//! redemption response applied on another site, which links, is
//! `site_link.rs`.)

use std::process::{Command, Output};

use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::Value;

struct Grant {
    url: String,
    code: String,
    ca: tempfile::NamedTempFile,
}

fn grant(cp: &ControlPlane, name: &str, uses: u32) -> Grant {
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {{name: abuse}}\nspec: {{linkAccess: default}}\n---\napiVersion: skupper.io/v2alpha1\nkind: AccessGrant\nmetadata: {{name: {name}}}\nspec: {{redemptionsAllowed: {uses}, expirationWindow: 1h}}\n"
        )),
    )
    .success();
    cp.cli(&[
        "wait",
        "--for=condition=ready",
        &format!("accessgrant/{name}"),
    ])
    .success();
    let (_, g) = cp.api("GET", &format!("/api/v1/accessgrants/{name}"), None);
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), g["status"]["ca"].as_str().unwrap()).unwrap();
    Grant {
        url: g["status"]["url"].as_str().unwrap().to_owned(),
        code: g["status"]["code"].as_str().unwrap().to_owned(),
        ca,
    }
}

fn curl(g: &Grant, args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(g.ca.path())
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("run curl (apt package curl)")
}

/// (status, body) of a curl call (status 0 when no HTTP answer came).
fn answer(out: &Output) -> (u16, String) {
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

fn post(g: &Grant, url: &str, body: &str) -> (u16, String) {
    answer(&curl(g, &["--data-binary", body, url]))
}

fn redemptions(cp: &ControlPlane, name: &str) -> Value {
    let (_, g) = cp.api("GET", &format!("/api/v1/accessgrants/{name}"), None);
    g["status"]["redemptions"].clone()
}

#[test]
fn every_failure_has_its_status_and_body_and_only_the_count_changes() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let g = grant(&cp, "one-use", 1);
    let (_, before) = cp.api("GET", "/api/v1/accessgrants/one-use", None);
    let base = g.url.rsplit_once('/').unwrap().0.to_owned();

    assert_eq!(
        answer(&curl(&g, &[&g.url])),
        (405, "Only POST is supported".into())
    );
    assert_eq!(
        post(&g, &format!("{base}/no-such-uid"), &g.code),
        (404, "No such claim".into())
    );
    assert_eq!(
        post(&g, &g.url, "wrong-code"),
        (403, "Redemption of access token refused".into())
    );
    // A 10 MB body.
    let big = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(big.path(), vec![b'x'; 10 * 1024 * 1024]).unwrap();
    let at = format!("@{}", big.path().display());
    assert_eq!(
        answer(&curl(&g, &["--data-binary", &at, &g.url])),
        (400, "Request body not valid".into())
    );
    // TLS 1.2 only: refused at the handshake, no HTTP answer.
    let old = curl(
        &g,
        &[
            "--tlsv1.2",
            "--tls-max",
            "1.2",
            "--data-binary",
            &g.code,
            &g.url,
        ],
    );
    assert_eq!(
        answer(&old).0,
        0,
        "{}",
        String::from_utf8_lossy(&old.stderr)
    );
    // Garbage on the port.
    let host_port = g
        .url
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap();
    let mut raw = std::net::TcpStream::connect(host_port).unwrap();
    std::io::Write::write_all(&mut raw, b"\x16\x03\x01\x00\x05garbage\x00\xff").unwrap();
    drop(raw);

    let (_, after) = cp.api("GET", "/api/v1/accessgrants/one-use", None);
    assert_eq!(after, before, "failures change nothing");
    let (status, body) = post(&g, &g.url, &g.code);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("kind: Secret") && body.contains("kind: Link"),
        "{body}"
    );
    assert_eq!(
        post(&g, &g.url, &g.code),
        (404, "No such access granted".into())
    );
    assert_eq!(redemptions(&cp, "one-use"), 1);
}

#[test]
fn twenty_concurrent_redemptions_of_a_ten_use_grant_succeed_ten_times() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let g = grant(&cp, "ten-uses", 10);
    let children: Vec<_> = (0..20)
        .map(|_| {
            Command::new("curl")
                .args(["-sS", "--cacert"])
                .arg(g.ca.path())
                .args(["-w", "\n%{http_code}", "--data-binary", &g.code, &g.url])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn curl")
        })
        .collect();
    let (mut ok, mut used_up) = (0, 0);
    for c in children {
        match answer(&c.wait_with_output().unwrap()) {
            (200, _) => ok += 1,
            (404, b) if b == "No such access granted" => used_up += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((ok, used_up), (10, 10));
    assert_eq!(redemptions(&cp, "ten-uses"), 10);
}
