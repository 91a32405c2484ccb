//! Issue 10 Acceptance 1, the field's reproducer as written, to the end:
//! two sites, each a control plane plus a router on its own loopback
//! address. Each router is started **before** its control plane and
//! before any credential exists; the seed YAML is applied unchanged, the
//! script's grant/token steps are followed with our CLI, and the Link
//! becomes Operational on both sides. No process exits at any point.

use std::time::Duration;

use meshlink_e2e::site::{Site, condition};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);

fn seed(i: &str) -> String {
    include_str!("../fixtures/grant-seed.yaml").replace("$i", i)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

fn assert_running(sites: &mut [Site]) {
    for s in sites.iter_mut() {
        assert!(
            s.cp.exit_status().is_none(),
            "control plane {} exited:\n{}",
            s.name,
            s.cp.logs()
        );
        let r = s.router.as_mut().expect("router");
        assert!(
            r.exit_status().is_none(),
            "router {} exited:\n{}",
            s.name,
            r.logs()
        );
    }
}

#[test]
fn routers_started_first_link_two_sites_from_the_seed_script() {
    let dir = tempfile::tempdir().unwrap();
    let mut sites = [Site::prepare("dmz-a", 2), Site::prepare("dmz-b", 3)];
    // Routers first: no control plane, no CA file, no token yet.
    for s in sites.iter_mut() {
        s.spawn_router();
    }
    for s in &sites {
        let (code, body) = s.router().ready();
        assert_eq!(code, 503, "{body}");
        let missing = body["missing"].to_string();
        assert!(
            missing.contains("does not exist yet") || missing.contains("waiting"),
            "/ready names what is missing: {missing}"
        );
    }
    for s in sites.iter_mut() {
        s.start_cp();
        let file = write(&dir, &format!("{}.yaml", s.name), &seed(&s.name));
        s.cp.cli(&["apply", "-f", &file]).success();
        s.write_router_token();
    }
    assert_running(&mut sites);
    for s in sites.iter_mut() {
        s.router.as_mut().unwrap().wait_ready(DEADLINE);
        s.cp.cli(&[
            "wait",
            "--for=condition=ready",
            &format!("accessgrant/{}-grant", s.name),
        ])
        .success();
    }
    let [a, b] = &sites;
    let out =
        a.cp.cli(&["get", "accessgrant", "dmz-a-grant", "-o", "yaml"])
            .success();
    let grant: Value = serde_yaml_ng::from_str(&out.stdout).expect("YAML");
    let status = &grant["status"];
    let token = format!(
        "apiVersion: skupper.io/v1alpha1\nkind: AccessToken\nmetadata:\n  name: token-dmz-a\nspec:\n  url: {}\n  code: {}\n  ca: {}\n",
        serde_json::to_string(status["url"].as_str().unwrap()).unwrap(),
        serde_json::to_string(status["code"].as_str().unwrap()).unwrap(),
        serde_json::to_string(status["ca"].as_str().unwrap()).unwrap(),
    );
    b.cp.cli(&["apply", "-f", &write(&dir, "token-dmz-a.yaml", &token)])
        .success();

    // dmz-b dialled: its Link is Operational and names dmz-a.
    let link = b.wait_link_operational("token-dmz-a", DEADLINE);
    assert_eq!(link["status"]["remoteSiteName"], "dmz-a", "{link}");
    assert_eq!(condition(&link, "Ready"), Some(true), "{link}");
    // dmz-a accepted: both Sites see two sites and an operational link.
    for s in [a, b] {
        let site = meshlink_e2e::eventually(
            &format!("site {} sees the network", s.name),
            DEADLINE,
            || {
                let site = s.site();
                let network = site["status"]["network"].as_array()?.clone();
                let linked = network.iter().any(|r| {
                    r["links"]
                        .as_array()
                        .is_some_and(|ls| ls.iter().any(|l| l["operational"] == true))
                });
                (site["status"]["sitesInNetwork"] == 2 && linked).then_some(site)
            },
        );
        assert_eq!(site["status"]["status"], "Ready", "{site}");
    }
    // The routers show the link in /config_dump and /metrics.
    let dump = b.router().config_dump();
    assert_eq!(dump["links"]["token-dmz-a"]["state"], "up", "{dump}");
    assert_eq!(dump["links"]["token-dmz-a"]["peerSite"], "dmz-a", "{dump}");
    assert_eq!(
        b.router().metric("meshlink_link_up{link=\"token-dmz-a\"}"),
        1.0
    );
    // dmz-b redeemed with its site id, so its client certificate names its
    // router and dmz-a's router bound dmz-b's hello to it.
    assert!(
        a.router()
            .metric("meshlink_link_peer_identity_total{result=\"bound\"}")
            >= 1.0
    );
    assert_running(&mut sites);
}

#[test]
fn a_redemption_response_from_curl_applies_on_another_site_and_links() {
    let dir = tempfile::tempdir().unwrap();
    let a = Site::start("curl-a", 2);
    let b = Site::start("curl-b", 3);
    a.apply(
        "apiVersion: skupper.io/v2alpha1\nkind: AccessGrant\nmetadata: {name: g}\nspec: {redemptionsAllowed: 1}\n",
    );
    a.cp.cli(&["wait", "--for=condition=ready", "accessgrant/g"])
        .success();
    let (_, grant) = a.cp.api("GET", "/api/v1/accessgrants/g", None);
    let status = &grant["status"];
    let ca = write(&dir, "ca.pem", status["ca"].as_str().unwrap());
    // Skupper's protocol with a plain HTTPS client: POST the code.
    let out = std::process::Command::new("curl")
        .args(["-sS", "--fail-with-body", "--tlsv1.3", "--cacert", &ca])
        .args(["-H", "name: from-curl", "--data-binary"])
        .arg(status["code"].as_str().unwrap())
        .arg(status["url"].as_str().unwrap())
        .output()
        .expect("run curl (apt package curl)");
    let body = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl: {body}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.apply(&body);
    let link = b.wait_link_operational("from-curl", DEADLINE);
    assert_eq!(link["status"]["remoteSiteName"], "curl-a", "{link}");
}
