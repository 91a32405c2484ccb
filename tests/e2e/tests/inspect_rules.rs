//! `meshlink inspect dataplane NAME --rules` against the real control
//! plane: Kuma's default MeshTimeout and MeshRetry policies plus a more
//! specific MeshTimeout and a shadow MeshRetry (more specific than Kuma's
//! default, so it would win if applied), applied verbatim; the
//! table names, for each merged field, the policy entry that set it, a
//! policy selecting another service contributes nothing, and `-o json`
//! carries the same with the shadow result apart.

use meshlink_e2e::ads::start_xds_mesh;
use serde_json::Value;

/// Kuma's default policies (as `kumactl` creates them in a new mesh) and
/// two of the user's, in Kuma's universal form.
const POLICIES: &str = r#"
type: MeshTimeout
name: mesh-timeout-all-default
mesh: default
labels:
  kuma.io/mesh: default
spec:
  targetRef:
    kind: Mesh
  from:
    - targetRef:
        kind: Mesh
      default:
        connectionTimeout: 5s
        idleTimeout: 1h
        http:
          requestTimeout: 15s
          streamIdleTimeout: 30m
  to:
    - targetRef:
        kind: Mesh
      default:
        connectionTimeout: 5s
        idleTimeout: 1h
        http:
          requestTimeout: 15s
          streamIdleTimeout: 30m
---
type: MeshRetry
name: mesh-retry-all-default
mesh: default
labels:
  kuma.io/mesh: default
spec:
  targetRef:
    kind: Mesh
  to:
    - targetRef:
        kind: Mesh
      default:
        tcp:
          maxConnectAttempt: 5
        http:
          numRetries: 5
          perTryTimeout: 16s
          backOff:
            baseInterval: 25ms
            maxInterval: 250ms
        grpc:
          numRetries: 5
          perTryTimeout: 16s
          backOff:
            baseInterval: 25ms
            maxInterval: 250ms
---
type: MeshTimeout
name: web-to-backend
mesh: default
spec:
  targetRef:
    kind: MeshService
    name: web
  to:
    - targetRef:
        kind: MeshService
        name: backend
      default:
        http:
          requestTimeout: 1s
---
type: MeshTimeout
name: backend-only
mesh: default
spec:
  targetRef:
    kind: MeshService
    name: backend
  to:
    - targetRef:
        kind: Mesh
      default:
        idleTimeout: 5m
---
type: MeshRetry
name: try-more
mesh: default
labels:
  kuma.io/effect: shadow
spec:
  targetRef:
    kind: MeshService
    name: web
  to:
    - targetRef:
        kind: Mesh
      default:
        http:
          numRetries: 9
"#;

/// The row of the table whose target, field and value are given.
fn row<'a>(table: &'a str, target: &str, field: &str) -> Option<Vec<&'a str>> {
    table.lines().find_map(|l| {
        let cols: Vec<&str> = l
            .split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        (cols.first() == Some(&target) && cols.get(1) == Some(&field)).then_some(cols)
    })
}

#[test]
fn rules_show_each_merged_field_and_the_policy_that_set_it() {
    let cp = start_xds_mesh();
    cp.cli_stdin(&["apply", "-f", "-"], Some(POLICIES))
        .success();

    let out = cp
        .cli(&["inspect", "dataplane", "web-1", "--rules"])
        .success();
    let table = out.stdout.as_str();
    assert!(
        table.contains("MeshTimeout to (policies, lowest priority first: mesh-timeout-all-default, web-to-backend)"),
        "{table}"
    );
    assert_eq!(
        row(table, "MeshService backend", "/http/requestTimeout"),
        Some(vec![
            "MeshService backend",
            "/http/requestTimeout",
            "1s",
            "web-to-backend (to[0])"
        ]),
        "{table}"
    );
    assert_eq!(
        row(table, "Mesh", "/connectionTimeout"),
        Some(vec![
            "Mesh",
            "/connectionTimeout",
            "5s",
            "mesh-timeout-all-default (to[0])"
        ]),
        "{table}"
    );
    assert!(table.contains("MeshTimeout from"), "inbound rules: {table}");
    assert_eq!(
        row(table, "Mesh", "/http/numRetries").map(|r| r[2]),
        Some("5"),
        "the shadow policy does not change what applies: {table}"
    );
    assert!(
        !table.contains("backend-only"),
        "it selects backend, not web: {table}"
    );

    let json = cp
        .cli(&["inspect", "dataplane", "web-1", "--rules", "-o", "json"])
        .success();
    let rules: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let retry = rules
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "MeshRetry")
        .expect("MeshRetry rules");
    assert_eq!(
        retry["rules"][0]["conf"]["http"]["numRetries"], 5,
        "{retry}"
    );
    assert_eq!(
        retry["shadow"][0]["conf"]["http"]["numRetries"], 9,
        "{retry}"
    );
    assert_eq!(
        retry["shadow"][0]["origins"]["/http/numRetries"], "try-more (to[0])",
        "{retry}"
    );

    // backend-1 gets backend-only's idle timeout; a Dataplane no policy
    // selects says so.
    let out = cp
        .cli(&["inspect", "dataplane", "backend-1", "--rules"])
        .success();
    assert_eq!(
        row(&out.stdout, "Mesh", "/idleTimeout").map(|r| r[2..].to_vec()),
        Some(vec!["5m", "backend-only (to[0])"]),
        "{}",
        out.stdout
    );
    let out = cp.cli(&["inspect", "dataplane", "nope", "--rules"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stderr.contains("not found"), "{out:#?}");
}

#[test]
fn apply_dry_run_names_the_proxies_whose_rules_would_change_and_writes_nothing() {
    let cp = start_xds_mesh();
    cp.cli_stdin(&["apply", "-f", "-"], Some(POLICIES))
        .success();

    // A stricter timeout for web's calls to backend: web-to-backend again,
    // with 500ms.
    let change = POLICIES
        .split("---")
        .find(|doc| doc.contains("name: web-to-backend"))
        .expect("web-to-backend is in POLICIES")
        .replace("requestTimeout: 1s", "requestTimeout: 500ms");
    let out = cp
        .cli_stdin(&["apply", "-f", "-", "--dry-run"], Some(&change))
        .success();
    let text = out.stdout.as_str();
    assert!(
        text.contains("meshtimeout/web-to-backend (mesh default) would be configured (dry run)"),
        "{text}"
    );
    assert!(
        text.contains("mesh default: 1 of 2 proxies would get different L7 rules"),
        "{text}"
    );
    assert!(text.contains("  default/web-1:"), "{text}");
    assert!(
        text.contains(
            r#"MeshTimeout to {"kind":"MeshService","name":"backend"} /http/requestTimeout: 1s (web-to-backend (to[0])) -> 500ms (web-to-backend (to[0]))"#
        ),
        "{text}"
    );
    assert!(
        !text.contains("default/backend-1:"),
        "backend-1 is not touched: {text}"
    );
    assert!(text.ends_with("dry run: nothing was applied\n"), "{text}");

    // Nothing was written.
    let rules = cp
        .cli(&["inspect", "dataplane", "web-1", "--rules", "-o", "json"])
        .success();
    assert!(
        rules.stdout.contains(r#""requestTimeout": "1s""#),
        "{}",
        rules.stdout
    );

    // A bad document is refused as by apply, and nothing is printed as done.
    let out = cp.cli_stdin(
        &["apply", "-f", "-", "--dry-run"],
        Some("type: MeshRetry\nname: r\nmesh: default\nspec:\n  to:\n    - targetRef: {kind: Mesh}\n      default: {numRetries: 3}\n"),
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("did you mean default.http.numRetries?"),
        "{out:#?}"
    );
    assert!(!out.stdout.contains("would be"), "{out:#?}");
}
