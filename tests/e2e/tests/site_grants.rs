//! Issue 10 Acceptance 1 up to the redemption, with the real binaries: two
//! sites, each a control plane on its own loopback address, take the seed
//! YAML unchanged; the script's `wait --for=condition=ready`, `get -o yaml`
//! and hand-written v1alpha1 AccessToken redeem in the other site, which
//! stores the Secret and Link. Also `token issue`/`token redeem` and
//! `link generate | apply -f -` across sites.
//! (The Link becoming Operational needs routers, which this test does not
//! start.)

use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::Value;

fn seed(i: &str) -> String {
    include_str!("../fixtures/grant-seed.yaml").replace("$i", i)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

#[test]
fn the_seed_script_redeems_a_token_from_dmz_a_in_dmz_b() {
    let dir = tempfile::tempdir().unwrap();
    let sites = [
        (
            "dmz-a",
            ControlPlane::start_on(StoreKind::Sqlite, "127.0.0.2"),
        ),
        (
            "dmz-b",
            ControlPlane::start_on(StoreKind::Sqlite, "127.0.0.3"),
        ),
    ];
    for (i, cp) in &sites {
        let file = write(&dir, &format!("{i}.yaml"), &seed(i));
        cp.cli(&["apply", "-f", &file]).success();
        cp.cli(&[
            "wait",
            "--for=condition=ready",
            &format!("accessgrant/{i}-grant"),
        ])
        .success();
    }
    let (_, a) = &sites[0];
    let (_, b) = &sites[1];
    let out = a
        .cli(&["get", "accessgrant", "dmz-a-grant", "-o", "yaml"])
        .success();
    let grant: Value = serde_yaml_ng::from_str(&out.stdout).expect("get -o yaml is YAML");
    let status = &grant["status"];
    let url = status["url"].as_str().expect("url");
    assert!(url.starts_with("https://127.0.0.2:"), "{url}");
    // The code is shown to the admin, as Skupper shows it (resources.md):
    // 24 letters and digits, not a placeholder.
    let code = status["code"].as_str().expect("code");
    assert!(
        code.len() == 24 && code.chars().all(|c| c.is_ascii_alphanumeric()),
        "{code}"
    );
    // The token exactly as the script writes it.
    let token = format!(
        "apiVersion: skupper.io/v1alpha1\nkind: AccessToken\nmetadata:\n  name: token-dmz-a\nspec:\n  url: {}\n  code: {}\n  ca: {}\n",
        serde_json::to_string(url).unwrap(),
        serde_json::to_string(status["code"].as_str().unwrap()).unwrap(),
        serde_json::to_string(status["ca"].as_str().unwrap()).unwrap(),
    );
    let token_file = write(&dir, "token-dmz-a.yaml", &token);
    b.cli(&["apply", "-f", &token_file]).success();
    b.cli(&[
        "wait",
        "--for=condition=redeemed",
        "accesstoken/token-dmz-a",
    ])
    .success();
    b.cli(&["get", "secret", "token-dmz-a"]).success();
    let link = b
        .cli(&["get", "link", "token-dmz-a", "-o", "yaml"])
        .success();
    assert!(link.stdout.contains("host: 127.0.0.2"), "{}", link.stdout);
    assert!(link.stdout.contains("port: 55671"), "{}", link.stdout);
    // Re-applying the token is unchanged and redeems nothing again.
    let again = b.cli(&["apply", "-f", &token_file]).success();
    assert!(again.stdout.contains("unchanged"), "{again:?}");
    let (_, g) = a.api("GET", "/api/v1/accessgrants/dmz-a-grant", None);
    assert_eq!(g["status"]["redemptions"], 1, "{g}");
    // The seed applied again is unchanged too.
    let file = write(&dir, "dmz-a-again.yaml", &seed("dmz-a"));
    let again = a.cli(&["apply", "-f", &file]).success();
    assert!(!again.stdout.contains("configured"), "{again:?}");
    for (_, cp) in &sites {
        let (code, _) = cp.api("GET", "/api/v1/sites", None);
        assert_eq!(code, 200, "no control plane exited: {}", cp.logs());
    }
}

#[test]
fn token_issue_and_redeem_and_link_generate_work_across_sites() {
    let dir = tempfile::tempdir().unwrap();
    let a = ControlPlane::start_on(StoreKind::Sqlite, "127.0.0.2");
    let b = ControlPlane::start_on(StoreKind::Sqlite, "127.0.0.3");
    a.cli(&["apply", "-f", &write(&dir, "a.yaml", &seed("west"))])
        .success();
    let b_site = "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: east}\nspec: {}\n";
    b.cli(&["apply", "-f", &write(&dir, "b.yaml", b_site)])
        .success();

    let token = dir.path().join("t.yaml").display().to_string();
    a.cli(&[
        "token",
        "issue",
        &token,
        "--redemptions",
        "2",
        "--expiration-window",
        "10m",
    ])
    .success();
    let out = b
        .cli(&["token", "redeem", &token, "--link-timeout", "0s"])
        .success();
    assert!(out.stdout.contains("redeemed"), "{out:?}");

    // `link generate` output applies unchanged on the other site.
    let generated = a
        .cli(&["link", "generate", "--name", "from-west"])
        .success();
    assert!(generated.stdout.contains("kind: Secret"), "{generated:?}");
    b.cli_stdin(&["apply", "-f", "-"], Some(&generated.stdout))
        .success();
    b.cli(&["get", "link", "from-west"]).success();
    let shown = b
        .cli(&["get", "secret", "from-west", "-o", "yaml"])
        .success();
    assert!(shown.stdout.contains("<redacted>"), "{}", shown.stdout);
}
