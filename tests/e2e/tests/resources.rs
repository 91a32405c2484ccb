//! Resource round trips and importers, through the real CLI and control plane.

use meshlink_e2e::{ControlPlane, StoreKind, fixture, on_both_stores};

const KINDS: [(&str, &str); 10] = [
    ("mesh", "default"),
    ("dataplane", "backend-1"),
    ("meshtrafficpermission", "allow-web"),
    ("site", "west"),
    ("routeraccess", "west-peering"),
    ("accessgrant", "east-grant"),
    ("accesstoken", "to-east"),
    ("link", "link-east"),
    ("listener", "backend"),
    ("connector", "backend"),
];

/// canonical -> store -> `get -o yaml` -> apply reports "unchanged", for every kind.
fn every_kind_round_trips(store: StoreKind) {
    let cp = ControlPlane::start(store);
    let all = fixture("all-kinds.yaml");
    let out = cp.cli(&["apply", "-f", all.to_str().unwrap()]).success();
    assert_eq!(out.stdout.matches(" created").count(), 10, "{}", out.stdout);

    let tmp = tempfile::tempdir().unwrap();
    for (kind, name) in KINDS {
        // Controllers write status (Site, Listener, Dataplane, ...) on their
        // own schedule, which moves resourceVersion; an apply of a copy read
        // before such a write is refused as "was modified ... read it again
        // and retry", and the round trip is read again, as the error says.
        let (yaml, again, piped) = meshlink_e2e::eventually(
            &format!("{kind}/{name} round trip without a concurrent status write"),
            std::time::Duration::from_secs(30),
            || {
                let yaml = cp.cli(&["get", kind, name, "-o", "yaml"]).success().stdout;
                let f = tmp.path().join(format!("{kind}.yaml"));
                std::fs::write(&f, &yaml).unwrap();
                let again = cp.cli(&["apply", "-f", f.to_str().unwrap()]);
                // The same YAML through stdin.
                let piped = cp.cli_stdin(&["apply", "-f", "-"], Some(&yaml));
                let raced =
                    |o: &meshlink_e2e::CliOutput| o.code != 0 && o.stderr.contains("was modified");
                (!raced(&again) && !raced(&piped)).then_some((yaml, again, piped))
            },
        );
        assert!(yaml.contains("apiVersion: meshlink.dev/v1alpha1"), "{yaml}");
        assert!(yaml.contains("resourceVersion:"), "{yaml}");
        let again = again.success();
        assert!(
            again.stdout.trim_end().ends_with("unchanged"),
            "{kind}/{name} printed as\n{yaml}\nre-applied as: {}",
            again.stdout
        );
        let piped = piped.success();
        assert!(piped.stdout.contains("unchanged"), "{}", piped.stdout);
    }
    // The whole original file again: all unchanged, none configured.
    let out = cp.cli(&["apply", "-f", all.to_str().unwrap()]).success();
    assert_eq!(
        out.stdout.matches(" unchanged").count(),
        10,
        "{}",
        out.stdout
    );

    // A real change is reported as configured and is visible.
    let changed = std::fs::read_to_string(&all)
        .unwrap()
        .replace("port: 18080", "port: 18081");
    let out = cp
        .cli_stdin(&["apply", "-f", "-"], Some(&changed))
        .success();
    assert_eq!(
        out.stdout.matches(" configured").count(),
        1,
        "{}",
        out.stdout
    );
    let json = cp
        .cli(&["get", "listener", "backend", "-o", "json"])
        .success()
        .stdout;
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["spec"]["port"], 18081);
}

/// Kuma universal documents are stored as canonical resources; fields we do
/// not implement yet are accepted with a warning naming each one.
fn kuma_universal_is_imported(store: StoreKind) {
    let cp = ControlPlane::start(store);
    let f = fixture("kuma-universal.yaml");
    let out = cp.cli(&["apply", "-f", f.to_str().unwrap()]).success();
    assert_eq!(out.stdout.matches(" created").count(), 4, "{}", out.stdout);
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains("metrics"),
        "{}",
        out.stderr
    );

    let yaml = cp
        .cli(&["get", "dp", "backend-1", "-o", "yaml"])
        .success()
        .stdout;
    assert!(yaml.contains("kind: Dataplane"), "{yaml}");
    assert!(yaml.contains("mesh: default"), "{yaml}");
    assert!(yaml.contains("kuma.io/service: backend"), "{yaml}");
    let table = cp.cli(&["get", "dataplanes"]).success().stdout;
    assert!(
        table.contains("web-1") && table.contains("backend-1"),
        "{table}"
    );
    let mtp = cp
        .cli(&["get", "mtp", "web-to-backend", "-o", "json"])
        .success()
        .stdout;
    let v: serde_json::Value = serde_json::from_str(&mtp).unwrap();
    assert_eq!(v["apiVersion"], "meshlink.dev/v1alpha1");
    assert_eq!(v["spec"]["from"][0]["default"]["action"], "Allow");
    // The Kuma file re-applies as unchanged.
    let again = cp.cli(&["apply", "-f", f.to_str().unwrap()]).success();
    assert_eq!(
        again.stdout.matches(" unchanged").count(),
        4,
        "{}",
        again.stdout
    );
}

/// The two-site Skupper v1alpha1 setup applies to two control planes and is
/// stored canonically (routerMode interior -> edge false).
fn skupper_two_site_is_imported(store: StoreKind) {
    let west = ControlPlane::start(store.clone());
    let east = ControlPlane::start(match store {
        StoreKind::Sqlite => StoreKind::Sqlite,
        StoreKind::Postgres(_) => StoreKind::fresh("postgres"),
    });
    let w = west
        .cli(&[
            "apply",
            "-f",
            fixture("skupper-west.yaml").to_str().unwrap(),
        ])
        .success();
    // `linkAccess: default` makes the site controller create RouterAccess
    // `skupper-router` (as Skupper does), so the file's own `skupper-router`
    // is `created` or `configured` depending on who came first.
    let applied = w.stdout.matches(" created").count() + w.stdout.matches(" configured").count();
    assert_eq!(applied, 4, "{}", w.stdout);
    assert!(
        w.stdout.contains("site/west created")
            && w.stdout.contains("accessgrant/grant-for-east created"),
        "{}",
        w.stdout
    );
    let e = east
        .cli(&[
            "apply",
            "-f",
            fixture("skupper-east.yaml").to_str().unwrap(),
        ])
        .success();
    assert_eq!(e.stdout.matches(" created").count(), 2, "{}", e.stdout);

    let site: serde_json::Value = serde_json::from_str(
        &west
            .cli(&["get", "site", "west", "-o", "json"])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(site["apiVersion"], "meshlink.dev/v1alpha1");
    assert!(
        site["spec"]["edge"] == false || site["spec"]["edge"].is_null(),
        "{site}"
    );
    assert!(site["spec"].get("routerMode").is_none(), "{site}");

    let ra: serde_json::Value = serde_json::from_str(
        &west
            .cli(&["get", "routeraccess", "skupper-router", "-o", "json"])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(ra["spec"]["generateTlsCredentials"], true);
    assert_eq!(ra["spec"]["issuer"], "skupper-site-ca");
    assert_eq!(ra["spec"]["roles"][0]["name"], "inter-router");
    assert_eq!(ra["spec"]["roles"][0]["port"], 55671);

    let grant: serde_json::Value = serde_json::from_str(
        &west
            .cli(&["get", "accessgrant", "grant-for-east", "-o", "json"])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(grant["spec"]["redemptionsAllowed"], 10);
    assert_eq!(grant["spec"]["expirationWindow"], "1h");

    let listener: serde_json::Value = serde_json::from_str(
        &east
            .cli(&["get", "listener", "backend", "-o", "json"])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(listener["spec"]["routingKey"], "backend");
    // Re-applying the Skupper file is a no-op.
    let again = west
        .cli(&[
            "apply",
            "-f",
            fixture("skupper-west.yaml").to_str().unwrap(),
        ])
        .success();
    assert_eq!(
        again.stdout.matches(" unchanged").count(),
        4,
        "{}",
        again.stdout
    );
}

on_both_stores!(
    every_kind_round_trips,
    kuma_universal_is_imported,
    skupper_two_site_is_imported
);
