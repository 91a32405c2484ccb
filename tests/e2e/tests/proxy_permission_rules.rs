//! MeshTrafficPermission `rules` (Kuma's SPIFFE ID matches) through real
//! sidecars: with web's own from[] permission deleted, a rules policy on
//! backend allowing web's exact SPIFFE ID lets web in; rewritten to allow
//! the whole trust domain by prefix but deny web's ID, web is refused (the
//! deny comes first); and while a rules policy decides backend's inbound,
//! a from[] Allow for web does not apply there, as in Kuma.

use std::time::Duration;

use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);

/// The mesh `default` has no trustDomain: its name is the trust domain.
const WEB_ID: &str = "spiffe://default/web";

/// A Kuma universal rules policy on backend with `default` (YAML, indented
/// for its place).
fn backend_rules(default: &str) -> String {
    format!(
        r#"
type: MeshTrafficPermission
name: backend-by-spiffe-id
mesh: default
spec:
  targetRef:
    kind: MeshService
    name: backend
  rules:
    - default:
{default}"#
    )
}

fn allow_web() -> String {
    backend_rules(&format!(
        "        allow:\n          - spiffeID: {{type: Exact, value: \"{WEB_ID}\"}}\n"
    ))
}

fn deny_web_allow_rest() -> String {
    backend_rules(&format!(
        "        allow:\n          - spiffeID: {{type: Prefix, value: \"spiffe://default\"}}\n        \
         deny:\n          - spiffeID: {{type: Exact, value: \"{WEB_ID}\"}}\n"
    ))
}

#[test]
fn rules_allow_and_deny_real_traffic_by_spiffe_id() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    cp.cli(&["delete", "mtp", "web-to-backend", "-m", proxy::MESH])
        .success();
    cp.cli_stdin(&["apply", "-f", "-"], Some(&allow_web()))
        .success();

    let page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let _app = PythonApp::start(ports.backend_app, &[("page.txt", &page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    // allow: Exact web.
    let r = eventually(
        "web -> backend allowed by its exact SPIFFE ID",
        READY,
        || http_get(ports.web_outbound, "/page.txt").ok(),
    );
    assert_eq!((r.status, r.text()), (200, page.clone()));

    // deny: Exact web wins over allow: Prefix of the trust domain.
    let denied = backend.metric("meshlink_proxy_rbac_denied_total");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&deny_web_allow_rest()))
        .success();
    eventually("web -> backend refused by the deny match", READY, || {
        let refused = http_get(ports.web_outbound, "/page.txt").is_err();
        (refused && backend.metric("meshlink_proxy_rbac_denied_total") > denied).then_some(())
    });

    // A from[] Allow for web does not apply where rules decide. It is
    // applied first; the rules change after it shows in backend-1's
    // configuration once the control plane has handled both.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&proxy::pair_yaml(&ports, "1h")))
        .success();
    let other = "spiffe://default/other";
    let rules = deny_web_allow_rest()
        + &format!("          - spiffeID: {{type: Exact, value: \"{other}\"}}\n");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&rules)).success();
    eventually("backend-1 to hold the second deny match", READY, || {
        backend
            .config_dump()
            .to_string()
            .contains(other)
            .then_some(())
    });
    assert!(
        http_get(ports.web_outbound, "/page.txt").is_err(),
        "web is still refused although web-to-backend allows it"
    );

    // Without the rules policy, from[] is in charge again.
    cp.cli(&["delete", "mtp", "backend-by-spiffe-id", "-m", proxy::MESH])
        .success();
    let r = eventually("web -> backend allowed by from[] again", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, page));
    drop(web);
}
