//! `meshlink inspect dataplane` against the real control plane, with a raw
//! ADS stream standing in for the proxy: the connected summary (stream,
//! certificate, per-type ACKs), `-o json|yaml` with RFC 3339 times,
//! `--config-dump` as Envoy's `/config_dump` JSON (parsed, listener and
//! cluster found by name, private key redacted) and YAML, a closed stream,
//! a proxy that never connected, and a Dataplane that does not exist.

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

/// The entry of the `list` of the dump message `kind` that `pick` selects.
fn dump_entry<'a>(
    dump: &'a Value,
    kind: &str,
    list: &str,
    pick: impl Fn(&Value) -> bool,
) -> &'a Value {
    let config = dump["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["@type"] == format!("type.googleapis.com/envoy.admin.v3.{kind}"))
        .unwrap_or_else(|| panic!("no {kind} in {dump}"));
    config[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {config}"))
        .iter()
        .find(|e| pick(e))
        .unwrap_or_else(|| panic!("no matching entry in {kind}.{list}: {config}"))
}

/// The dump of web-1 (outbound to backend on 9001) in Envoy's shape: its
/// outbound listener and the backend cluster, found by name.
fn assert_config_dump(dump: &Value) {
    let l = dump_entry(dump, "ListenersConfigDump", "dynamic_listeners", |l| {
        l["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("outbound:"))
    });
    let listener = &l["active_state"]["listener"];
    assert_eq!(listener["@type"], LISTENER_TYPE, "{l}");
    assert_eq!(listener["name"], l["name"], "{l}");
    assert_eq!(
        listener["address"]["socket_address"]["port_value"], 9001,
        "{l}"
    );
    let c = dump_entry(dump, "ClustersConfigDump", "dynamic_active_clusters", |c| {
        c["cluster"]["name"] == "backend"
    });
    assert_eq!(c["cluster"]["@type"], CLUSTER_TYPE, "{c}");
    assert!(
        c["cluster"]["connect_timeout"]
            .as_str()
            .is_some_and(|t| t.ends_with('s')),
        "{c}"
    );
    assert!(c["version_info"].is_string(), "{c}");
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
    for t in ["notBefore", "notAfter"] {
        let at = cert[t]
            .as_str()
            .unwrap_or_else(|| panic!("{t} is a string: {body}"));
        assert!(
            humantime::parse_rfc3339(at).is_ok(),
            "{t} is RFC 3339: {body}"
        );
    }
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

    // --config-dump: Envoy's /config_dump JSON (jq-able: stdout is one JSON
    // document), with the proxy's listener and cluster findable by name,
    // certificates shown and keys redacted.
    let dump_args = [&inspect[..], &["--config-dump"]].concat();
    let dump = cp.cli(&dump_args).success();
    assert!(!dump.stdout.contains("PRIVATE KEY"), "{dump:#?}");
    let body: Value = serde_json::from_str(&dump.stdout).expect("the dump is JSON");
    assert_config_dump(&body);
    let secret = dump_entry(&body, "SecretsConfigDump", "dynamic_active_secrets", |s| {
        s["name"] == "identity_cert:web"
    });
    let cert = &secret["secret"]["tls_certificate"];
    assert!(
        cert["certificate_chain"]["inline_string"]
            .as_str()
            .is_some_and(|c| c.contains("BEGIN CERTIFICATE")),
        "{secret}"
    );
    assert_eq!(
        cert["private_key"]["inline_string"], "[redacted]",
        "{secret}"
    );
    // -o json is the same document; -o yaml the same in YAML.
    let json = cp
        .cli(&[&dump_args[..], &["-o", "json"]].concat())
        .success();
    assert_eq!(
        serde_json::from_str::<Value>(&json.stdout).expect("JSON"),
        body
    );
    let yaml = cp
        .cli(&[&dump_args[..], &["-o", "yaml"]].concat())
        .success();
    let from_yaml: Value = serde_yaml_ng::from_str(&yaml.stdout).expect("the dump is YAML");
    assert_config_dump(&from_yaml);
    assert!(!yaml.stdout.contains("PRIVATE KEY"), "{yaml:#?}");
    // A config dump has no table form: bad usage, exit code 2.
    let table = cp.cli(&[&dump_args[..], &["-o", "table"]].concat());
    assert_eq!(table.code, 2, "{table:#?}");
    assert!(table.stderr.contains("-o yaml"), "{table:#?}");

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
