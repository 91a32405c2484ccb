//! `meshlink inspect dataplane` against the real control plane, with a raw
//! ADS stream standing in for the proxy: the connected summary (stream,
//! certificate, per-type ACKs), `-o json|yaml`, `--config-dump` without
//! private keys, a closed stream, a proxy that never connected, and a
//! Dataplane that does not exist.

use std::time::Duration;

use meshlink_e2e::ads::*;
use meshlink_e2e::{CliOutput, eventually};
use serde_json::Value;

const SECRETS: [&str; 2] = ["identity_cert:web", "mesh_ca:default"];

/// The row of `type_` in the summary's type table, split into columns.
fn type_row(out: &CliOutput, type_: &str) -> Option<Vec<String>> {
    out.stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(type_))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
}

#[test]
fn inspect_shows_a_connected_proxy_its_certificate_acks_and_config() {
    let cp = start_xds_mesh();
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    let (stream, sds_version) = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        s.ack(&cds, &[]).await;
        s.send(sotw_request(SECRET_TYPE, &SECRETS, "", "")).await;
        let sds = s.expect(SECRET_TYPE).await;
        s.ack(&sds, &SECRETS).await;
        (s, sds.version_info)
    });

    // The summary, once the Secret ACK reached the report.
    let inspect = ["inspect", "dataplane", "web-1", "--mesh", "default"];
    let out = eventually(
        "inspect to show the Secret ACK",
        Duration::from_secs(10),
        || {
            let out = cp.cli(&inspect).success();
            let row = type_row(&out, "Secret")?;
            (row[2] != "-").then_some(out)
        },
    );
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Dataplane default/web-1: connected to "),
        "{out:#?}"
    );
    assert!(first.contains("sotw, client envoy"), "{out:#?}");
    let secret = type_row(&out, "Secret").unwrap();
    assert_eq!(secret[1], secret[2], "sent = acked: {out:#?}");
    assert!(
        sds_version.starts_with(secret[2].trim_end_matches('…')),
        "ACKed version {} is the one sent ({sds_version})",
        secret[2]
    );
    assert_eq!(secret[3], "2", "two secrets: {out:#?}");
    assert_eq!(secret[5], "-", "no NACK: {out:#?}");
    let cluster = type_row(&out, "Cluster").expect("Cluster row");
    assert_eq!(cluster[1], cluster[2], "{out:#?}");

    // -o json is the API body; its certificate is the one in the summary.
    let json = cp.cli(&[&inspect[..], &["-o", "json"]].concat()).success();
    let body: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(body["connected"], true, "{body}");
    assert!(body.get("configDump").is_none(), "{body}");
    // Times are RFC 3339, not unix seconds.
    let connected_at = body["connectedAt"]
        .as_str()
        .expect("connectedAt is a string");
    assert!(
        connected_at.len() == 20 && connected_at.ends_with('Z') && connected_at.contains('T'),
        "{body}"
    );
    let cert = &body["certificate"];
    assert_eq!(cert["spiffeId"], "spiffe://default/web", "{body}");
    let cert_line = format!(
        "Certificate: spiffe://default/web serial {} ",
        cert["serial"].as_str().expect("serial")
    );
    assert!(out.stdout.contains(&cert_line), "{cert_line:?} in {out:#?}");
    assert!(out.stdout.contains(" expires "), "{out:#?}");

    let yaml = cp.cli(&[&inspect[..], &["-o", "yaml"]].concat()).success();
    assert!(
        yaml.stdout
            .contains(&format!("connectedAt: {connected_at}"))
            || yaml
                .stdout
                .contains(&format!("connectedAt: '{connected_at}'")),
        "{yaml:#?}"
    );
    assert!(
        yaml.stdout.contains("spiffeId: spiffe://default/web"),
        "{yaml:#?}"
    );

    // --config-dump: the resources sent, with certificates but no keys.
    let dump = cp
        .cli(&[&inspect[..], &["--config-dump"]].concat())
        .success();
    assert!(
        dump.stdout
            .starts_with("Dataplane default/web-1: connected")
    );
    assert!(dump.stdout.contains("identity_cert:web"), "{dump:#?}");
    assert!(dump.stdout.contains("BEGIN CERTIFICATE"), "{dump:#?}");
    assert!(!dump.stdout.contains("PRIVATE KEY"), "{dump:#?}");
    let dump_json = cp
        .cli(&[&inspect[..], &["--config-dump", "-o", "json"]].concat())
        .success();
    assert!(!dump_json.stdout.contains("PRIVATE KEY"), "{dump_json:#?}");
    let body: Value = serde_json::from_str(&dump_json.stdout).expect("JSON");
    let names: Vec<&str> = body["configDump"]["Secret"]
        .as_array()
        .expect("Secret dump")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(names.contains(&"identity_cert:web"), "{body}");

    // The proxy goes away: inspect says so, and when.
    rt.block_on(async move { drop(stream) });
    let out = eventually(
        "inspect to show the stream closed",
        Duration::from_secs(10),
        || {
            let out = cp.cli(&inspect).success();
            out.stdout
                .starts_with("Dataplane default/web-1: disconnected from ")
                .then_some(out)
        },
    );
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(first.contains(" at 20"), "RFC 3339 time: {out:#?}");
    assert!(first.contains("closed"), "close reason: {out:#?}");
    let second = out.stdout.lines().nth(1).unwrap_or_default();
    assert!(second.starts_with("Last stream: stream "), "{out:#?}");
    assert!(
        type_row(&out, "Secret").is_some(),
        "last stream's types: {out:#?}"
    );
}

#[test]
fn inspect_reports_never_connected_and_missing_dataplanes() {
    let cp = start_xds_mesh();

    // backend-1 exists but no proxy ever connected for it.
    let out = cp.cli(&["inspect", "dp", "backend-1"]).success();
    assert!(
        out.stdout
            .starts_with("Dataplane default/backend-1: not connected: "),
        "{out:#?}"
    );
    assert!(out.stdout.contains("has not connected"), "{out:#?}");
    let json = cp
        .cli(&["inspect", "dataplane", "backend-1", "-o", "json"])
        .success();
    let body: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(body["connected"], false, "{body}");

    // A Dataplane that does not exist: a runtime failure naming it.
    for args in [
        &["inspect", "dataplane", "nope"][..],
        &["inspect", "dataplane", "web-1", "--mesh", "other"][..],
    ] {
        let out = cp.cli(args);
        assert_eq!(out.code, 1, "{out:#?}");
        assert!(out.stdout.is_empty(), "{out:#?}");
        assert!(out.stderr.starts_with("error: "), "{out:#?}");
        assert!(out.stderr.contains("not found"), "{out:#?}");
        assert!(
            out.stderr.contains(args[2]),
            "names the dataplane: {out:#?}"
        );
    }

    // Bad usage is exit code 2.
    let out = cp.cli(&["inspect", "dataplane", "web-1", "-o", "xml"]);
    assert_eq!(out.code, 2, "{out:#?}");
}
