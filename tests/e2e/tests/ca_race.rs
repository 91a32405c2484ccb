//! The CA-state race (issue 9 acceptance): two control planes on one
//! PostgreSQL, 50 concurrent Certify calls against each while the Mesh's
//! enabled backend is switched. Only the mesh CA controllers write
//! `internal.MeshCAState`, as a compare-and-swap; the end state has one CA
//! set, every state write is a step of one history (no lost or stale
//! update), and the rotation completes on both control planes.

use std::time::Duration;

use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;
use sqlx::Connection;

const DATAPLANES: usize = 50;
const SETTLED: Duration = Duration::from_secs(60);

fn mesh_yaml(enabled: &str) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: race}}\nspec:\n  mtls:\n    enabledBackend: {enabled}\n    backends:\n      - {{name: ca-1, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n      - {{name: ca-2, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n"
    )
}

fn ca(cp: &ControlPlane) -> Value {
    let (s, v) = cp.api("GET", "/api/v1/meshes/race/ca", None);
    assert_eq!(s, 200, "{v}");
    v
}

/// One Certify call per dataplane against `cp`, all at once; returns the
/// first trust-bundle root each response names (the enabled CA's).
fn certify_all(cp: &ControlPlane, tokens: &[String]) -> Vec<String> {
    std::thread::scope(|s| {
        let calls: Vec<_> = tokens
            .iter()
            .enumerate()
            .map(|(i, token)| {
                s.spawn(move || {
                    let key = rcgen::KeyPair::generate().unwrap();
                    let dp = format!("dp-{i}");
                    let r = certify(cp, Some(token), "race", &dp, "", csr(&key, None))
                        .unwrap_or_else(|e| panic!("certify {dp}: {e:?}"));
                    r.trust_bundle_pem[0].clone()
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

/// The bodies of every write of `kind`, oldest first, from the store's feed.
fn history(url: &str, kind: &str) -> Vec<Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT body FROM changes WHERE kind = $1 ORDER BY revision")
                .bind(kind)
                .fetch_all(&mut conn)
                .await
                .unwrap();
        rows.into_iter()
            .map(|(b,)| serde_json::from_str(&b).unwrap())
            .collect()
    })
}

#[test]
fn two_control_planes_race_certify_during_a_ca_rotation() {
    let StoreKind::Postgres(url) = StoreKind::fresh("postgres") else {
        unreachable!()
    };
    let a = ControlPlane::start(StoreKind::Postgres(url.clone()));
    let b = ControlPlane::start(StoreKind::Postgres(url.clone()));
    a.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("ca-1")))
        .success();
    for cp in [&a, &b] {
        cp.cli(&[
            "wait",
            "mesh/race",
            "--for",
            "condition=Ready",
            "--timeout",
            "30s",
        ])
        .success();
    }
    let tokens: Vec<String> = (0..DATAPLANES)
        .map(|i| {
            a.dataplane_token(&[
                "--mesh",
                "race",
                "--name",
                &format!("dp-{i}"),
                "--service",
                "web",
            ])
            .0
        })
        .collect();

    // Every dataplane holds a certificate from ca-1.
    let old_root = certify_all(&a, &tokens)[0].clone();
    assert!(certify_all(&b, &tokens).iter().all(|r| *r == old_root));

    // The race: 50 Certify calls against each control plane while the
    // enabled backend is switched through one of them.
    std::thread::scope(|s| {
        let on_a = s.spawn(|| certify_all(&a, &tokens));
        let on_b = s.spawn(|| certify_all(&b, &tokens));
        s.spawn(|| {
            a.cli_stdin(&["apply", "-f", "-"], Some(&mesh_yaml("ca-2")))
                .success()
        });
        on_a.join().unwrap();
        on_b.join().unwrap();
    });

    // Every dataplane renews (as sidecars do when the bundle gains a root);
    // from now on both control planes issue from ca-2 only.
    let new_roots: Vec<String> = [certify_all(&a, &tokens), certify_all(&b, &tokens)].concat();
    let new_root = new_roots[0].clone();
    assert_ne!(new_root, old_root, "the rotation moved issuance to ca-2");
    assert!(
        new_roots.iter().all(|r| *r == new_root),
        "both issue from one CA"
    );

    // The rotation completes, and both control planes agree on the result.
    let views = eventually(
        "both control planes to finish the rotation",
        SETTLED,
        || {
            let views = [ca(&a), ca(&b)];
            views
                .iter()
                .all(|v| {
                    v["backend"] == "ca-2"
                        && v["rotation"]["phase"] == "stable"
                        && v["trustBundle"].as_array().map(Vec::len) == Some(1)
                })
                .then_some(views)
        },
    );
    assert_eq!(views[0]["fingerprint"], views[1]["fingerprint"], "one CA");
    assert_eq!(views[0]["trustBundle"], views[1]["trustBundle"]);
    for cp in [&a, &b] {
        cp.cli(&[
            "wait",
            "mesh/race",
            "--for",
            "condition=CARotation=False",
            "--timeout",
            "30s",
        ])
        .success();
    }

    // One CA per backend, each created once.
    assert_eq!(
        history(&url, "internal.MeshCA").len(),
        2,
        "two CAs, created once"
    );
    // The state's whole history: created on ca-1, rotated to ca-2 with ca-1
    // kept, rotation ended. Two writers racing with last-writer-wins puts
    // would show duplicate, lost or stale (ca-1 again) writes here.
    let states = history(&url, "internal.MeshCAState");
    let steps: Vec<(String, Option<String>)> = states
        .iter()
        .map(|s| {
            (
                s["enabledBackend"].as_str().unwrap().to_string(),
                s["previousBackend"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            ("ca-1".to_string(), None),
            ("ca-2".to_string(), Some("ca-1".to_string())),
            ("ca-2".to_string(), None),
        ],
        "{states:#?}"
    );
    let last = states.last().unwrap();
    assert_eq!(last["enabled"]["fingerprint"], views[0]["fingerprint"]);
    assert!(last["previous"].is_null(), "{last}");
}
