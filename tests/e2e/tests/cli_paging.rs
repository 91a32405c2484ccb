//! `meshlink get KIND` pages through long lists (`--chunk-size`, the API's
//! `limit`/`continue`) and prints the same table, YAML and JSON as one
//! request does, on both stores.

use meshlink_e2e::{ControlPlane, StoreKind, on_both_stores};

/// Dataplanes `dp-000`… in meshes `east` and `west` (every third in
/// `west`), labelled `tier=gold` on even numbers.
fn fleet(n: usize) -> String {
    let mut yaml = String::new();
    for mesh in ["east", "west"] {
        yaml.push_str(&format!(
            "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: {mesh}}}\n---\n"
        ));
    }
    for i in 0..n {
        let mesh = if i % 3 == 0 { "west" } else { "east" };
        let tier = if i % 2 == 0 { "gold" } else { "silver" };
        yaml.push_str(&format!(
            "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\n\
             metadata: {{name: dp-{i:03}, mesh: {mesh}, labels: {{tier: {tier}}}}}\n\
             spec:\n  networking:\n    address: 127.0.0.{}\n    \
             inbound: [{{port: {}, servicePort: 8080, tags: {{kuma.io/service: svc-{i}}}}}]\n---\n",
            i % 250 + 1,
            10_000 + i
        ));
    }
    yaml
}

/// The `(mesh, name)` of each table row, in printed order.
fn rows(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .skip(1)
        .map(|l| {
            let mut cols = l.split_whitespace();
            let mesh = cols.next().unwrap_or_default().to_string();
            (mesh, cols.next().unwrap_or_default().to_string())
        })
        .collect()
}

fn lists_page_by_page_with_every_output(store: StoreKind) {
    const N: usize = 47;
    let cp = ControlPlane::start(store);
    cp.cli_stdin(&["apply", "-f", "-"], Some(&fleet(N)))
        .success();

    // Table: 47 rows over ten pages of 5, each Dataplane once, sorted.
    let paged = cp.cli(&["get", "dp", "--chunk-size", "5"]).success().stdout;
    let got = rows(&paged);
    let mut want: Vec<(String, String)> = (0..N)
        .map(|i| {
            let mesh = if i % 3 == 0 { "west" } else { "east" };
            (mesh.to_string(), format!("dp-{i:03}"))
        })
        .collect();
    want.sort();
    assert_eq!(
        got, want,
        "every Dataplane once, by mesh and name:\n{paged}"
    );

    // One request, the default chunk size and small chunks print the same.
    // The control plane's status task may still write Dataplane statuses
    // (new resourceVersions), so each pair is read again until it agrees.
    let get = |output: &str, chunk: Option<&str>| {
        let mut args = vec!["get", "dp", "-o", output];
        if let Some(c) = chunk {
            args.extend(["--chunk-size", c]);
        }
        cp.cli(&args).success().stdout
    };
    for output in ["table", "json", "yaml"] {
        for chunk in [Some("1"), Some("5"), Some("500"), None] {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let whole = get(output, Some("0"));
                let paged = get(output, chunk);
                if paged == whole {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "-o {output} --chunk-size {chunk:?} differs from one request:\n{paged}\n---\n{whole}"
                );
            }
        }
    }
    let json: serde_json::Value = serde_json::from_str(
        &cp.cli(&["get", "dp", "-o", "json", "--chunk-size", "4"])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["items"].as_array().unwrap().len(), N, "{json}");

    // Paging with a mesh and a label selector.
    let gold_west = cp
        .cli(&[
            "get",
            "dp",
            "-m",
            "west",
            "-l",
            "tier=gold",
            "--chunk-size",
            "2",
        ])
        .success()
        .stdout;
    let want: Vec<(String, String)> = (0..N)
        .filter(|i| i % 3 == 0 && i % 2 == 0)
        .map(|i| ("west".to_string(), format!("dp-{i:03}")))
        .collect();
    assert_eq!(rows(&gold_west), want, "{gold_west}");

    // A chunk size the API does not take is bad input, named as the flag.
    for bad in ["-1", "1001", "many"] {
        let flag = format!("--chunk-size={bad}");
        let out = cp.cli(&["get", "dp", &flag]);
        assert_eq!(out.code, 2, "--chunk-size {bad}: {out:#?}");
        assert!(out.stderr.contains("--chunk-size"), "{out:#?}");
    }
}

on_both_stores!(lists_page_by_page_with_every_output);
