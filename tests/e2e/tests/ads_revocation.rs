//! Revocation and node.id on open streams, with real binaries: revoking a
//! proxy token ends its Envoy-style SotW stream (identity over SDS) with
//! PERMISSION_DENIED naming the revocation, no further Secret arrives, and
//! Certify refuses the token; a stream with the right token but another
//! dataplane's node.id is refused before it can take over, and the proxy's
//! own stream keeps being served.

use std::time::Instant;

use meshlink_e2e::ControlPlane;
use meshlink_e2e::ads::*;
use meshlink_e2e::certify::{certify, csr};
use tonic::Code;

const SDS_NAMES: [&str; 2] = ["identity_cert:web", "mesh_ca:default"];

/// An Envoy-style SotW stream for web-1 that received its identity Secret.
async fn envoy_with_identity(cp: &ControlPlane, token: &str) -> Sotw {
    let ch = connect(cp, None).await;
    let mut s = Sotw::open(
        ch,
        Some(token),
        node("default", "web-1", "envoy"),
        sotw_request(SECRET_TYPE, &SDS_NAMES, "", ""),
    )
    .await
    .expect("stream opens");
    let sds = s.expect(SECRET_TYPE).await;
    assert!(
        sds.resources.len() == 2,
        "identity and trust bundle: {sds:?}"
    );
    s.ack(&sds, &SDS_NAMES).await;
    s
}

#[test]
fn revoking_a_token_ends_its_open_stream_and_certify_refuses_it() {
    let cp = start_xds_mesh();
    let (token, id) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    let mut stream = rt.block_on(envoy_with_identity(&cp, &token));

    let revoked_at = Instant::now();
    cp.cli(&["token", "revoke", &id]).success();
    let status = rt.block_on(async {
        loop {
            match stream.next().await {
                Ok(r) => assert_ne!(
                    r.type_url, SECRET_TYPE,
                    "a Secret arrived after the revocation: {r:?}"
                ),
                Err(status) => break status,
            }
        }
    });
    println!(
        "stream ended {:?} after the revoke command",
        revoked_at.elapsed()
    );
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("token {id} was revoked")),
        "{status:?}"
    );

    // No certificate for that token from Certify either.
    let key = rcgen::KeyPair::generate().expect("key");
    let refused = certify(
        &cp,
        Some(&token),
        "default",
        "web-1",
        "web",
        csr(&key, None),
    )
    .expect_err("Certify refuses a revoked token");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(refused.message().contains("revoked"), "{refused:?}");

    // And no new stream: it is refused before it is served.
    let reopened = rt.block_on(async {
        let ch = connect(&cp, None).await;
        match Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(SECRET_TYPE, &SDS_NAMES, "", ""),
        )
        .await
        {
            Err(s) => s,
            Ok(mut s) => s.next().await.expect_err("refused"),
        }
    });
    assert_eq!(reopened.code(), Code::Unauthenticated, "{reopened:?}");
    assert!(reopened.message().contains("revoked"), "{reopened:?}");
    assert!(
        cp.metric(&["meshlink_xds_rejected_streams_total", "reason=\"revoked\""]) >= 1.0,
        "the revocation is counted"
    );
}

#[test]
fn a_wrong_node_id_is_refused_before_it_takes_over_the_proxy() {
    let cp = start_xds_mesh();
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    rt.block_on(async {
        let mut owner = envoy_with_identity(&cp, &token).await;

        // The same token, with node.id of another dataplane (what
        // meshlink-proxy sends with a wrong --name).
        let ch = connect(&cp, None).await;
        let wrong = match Sotw::open(
            ch,
            Some(&token),
            node("default", "web-2", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        {
            Err(s) => s,
            Ok(mut s) => s.next().await.expect_err("refused"),
        };
        assert_eq!(wrong.code(), Code::PermissionDenied, "{wrong:?}");
        let msg = wrong.message();
        assert!(
            msg.contains("node.id \"default.web-2\"")
                && msg.contains("default.web-1")
                && msg.contains("--name"),
            "{msg}"
        );

        // The owner was not taken over: it is still served (a taken-over
        // stream would end with ABORTED instead).
        owner.send(sotw_request(CLUSTER_TYPE, &[], "", "")).await;
        let clusters = owner.expect(CLUSTER_TYPE).await;
        owner.ack(&clusters, &[]).await;
    });
    assert!(
        cp.metric(&[
            "meshlink_xds_rejected_streams_total",
            "reason=\"node_id_mismatch\""
        ]) >= 1.0
    );
}

#[test]
fn a_proxy_whose_name_differs_from_its_token_is_told_to_check_name() {
    use meshlink_e2e::eventually;
    use meshlink_e2e::proxy::{Sidecar, SidecarOptions, write_token};
    let cp = start_xds_mesh();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("web-1.token");
    write_token(&cp, &token, "web-1");
    // The token is for web-1; the proxy calls itself backend-1.
    let mut proxy = Sidecar::spawn(&SidecarOptions::new(&cp, &token, "backend-1"));
    eventually(
        "the proxy to log why the control plane refused it",
        std::time::Duration::from_secs(30),
        || {
            assert_eq!(proxy.exit_status(), None, "{}", proxy.logs());
            let logs = proxy.logs();
            (logs.contains("--name") && logs.contains("web-1")).then_some(())
        },
    );
}
