//! Bad input on the xDS port: garbage bytes, unknown type URLs, missing or
//! wrong credentials, a NACK storm. The server stays up, other proxies are
//! unaffected, and each offender gets a clear status.

use std::io::Write;
use std::time::Duration;

use meshlink_e2e::ads::*;
use meshlink_e2e::{ControlPlane, eventually};
use tonic::Code;

fn token(cp: &ControlPlane, name: &str) -> String {
    cp.dataplane_token(&["--mesh", "default", "--name", name]).0
}

/// A healthy stream for backend-1 still gets its clusters.
async fn healthy(cp: &ControlPlane, token: &str) {
    let ch = connect(cp, None).await;
    let mut s = Sotw::open(
        ch,
        Some(token),
        node("default", "backend-1", "envoy"),
        sotw_request(CLUSTER_TYPE, &[], "", ""),
    )
    .await
    .expect("healthy stream");
    s.expect(CLUSTER_TYPE).await;
}

#[test]
fn garbage_bytes_on_the_xds_port_do_not_hurt_the_server() {
    let cp = start_xds_mesh();
    let addr = cp.xds_url().trim_start_matches("https://").to_owned();
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &[0u8; 4096][..],
        &b"\x16\x03\x01\x00\x05hello"[..],
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff"[..],
    ] {
        let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
        let _ = conn.write_all(junk);
        drop(conn);
    }
    let backend = token(&cp, "backend-1");
    runtime().block_on(healthy(&cp, &backend));
}

#[test]
fn missing_wrong_and_foreign_credentials_are_refused_clearly() {
    let cp = start_xds_mesh();
    let web = token(&cp, "web-1");
    let backend = token(&cp, "backend-1");
    let rt = runtime();
    rt.block_on(async {
        let ch = connect(&cp, None).await;
        let open = |token: Option<String>, name: &'static str| {
            let ch = ch.clone();
            async move {
                let r = Sotw::open(
                    ch,
                    token.as_deref(),
                    node("default", name, "envoy"),
                    sotw_request(CLUSTER_TYPE, &[], "", ""),
                )
                .await;
                match r {
                    Err(s) => s,
                    Ok(mut s) => s.next().await.expect_err("refused"),
                }
            }
        };
        let none = open(None, "web-1").await;
        assert_eq!(none.code(), Code::Unauthenticated, "{none:?}");
        assert!(
            none.message().contains("meshlink token dataplane"),
            "{none:?}"
        );

        let bad = open(Some("not-a-token".into()), "web-1").await;
        assert_eq!(bad.code(), Code::Unauthenticated, "{bad:?}");
        assert!(bad.message().contains("invalid proxy token"), "{bad:?}");

        // backend-1's token presented by a proxy calling itself web-1.
        let foreign = open(Some(backend.clone()), "web-1").await;
        assert_eq!(foreign.code(), Code::PermissionDenied, "{foreign:?}");
        assert!(
            foreign.message().contains("default.backend-1"),
            "{foreign:?}"
        );

        let wrong_kind = {
            let ch = ch.clone();
            let mut s = Sotw::open(
                ch,
                Some(&web),
                node("default", "web-1", "istio"),
                sotw_request(CLUSTER_TYPE, &[], "", ""),
            )
            .await
            .unwrap();
            s.next().await.expect_err("refused")
        };
        assert_eq!(wrong_kind.code(), Code::InvalidArgument);
        assert!(
            wrong_kind.message().contains("meshlink.dev/client"),
            "{wrong_kind:?}"
        );
    });
    // Revoked tokens are refused too.
    let (t, id) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    cp.cli(&["token", "revoke", &id]).success();
    rt.block_on(async {
        let ch = connect(&cp, None).await;
        let err = match Sotw::open(
            ch,
            Some(&t),
            node("default", "web-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        {
            Err(s) => s,
            Ok(mut s) => s.next().await.expect_err("refused"),
        };
        assert_eq!(err.code(), Code::Unauthenticated);
        assert!(err.message().contains("revoked"), "{err:?}");
        healthy(&cp, &backend).await;
    });
}

#[test]
fn client_certificate_from_cert_dir_authenticates_its_dataplane_only() {
    let cp = start_xds_mesh();
    let dir = tempfile::tempdir().unwrap();
    let dir_s = dir.path().to_str().unwrap();
    cp.cli(&[
        "token",
        "dataplane",
        "--mesh",
        "default",
        "--name",
        "web-1",
        "--cert-dir",
        dir_s,
    ])
    .success();
    let cert = std::fs::read_to_string(dir.path().join("tls.crt")).unwrap();
    let key = std::fs::read_to_string(dir.path().join("tls.key")).unwrap();
    runtime().block_on(async {
        let ch = connect(&cp, Some((cert, key))).await;
        let mut ok = Sotw::open(
            ch.clone(),
            None,
            node("default", "web-1", "grpc"),
            sotw_request(LISTENER_TYPE, &["backend"], "", ""),
        )
        .await
        .expect("stream");
        let lds = ok.expect(LISTENER_TYPE).await;
        assert_eq!(
            lds.resources.len(),
            1,
            "API listener named after the target"
        );
        let mut other = Sotw::open(
            ch,
            None,
            node("default", "backend-1", "grpc"),
            sotw_request(LISTENER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let err = other.next().await.expect_err("refused");
        assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    });
}

#[test]
fn unknown_type_url_ends_only_that_stream() {
    let cp = start_xds_mesh();
    let web = token(&cp, "web-1");
    let backend = token(&cp, "backend-1");
    runtime().block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&web),
            node("default", "web-1", "envoy"),
            sotw_request("type.googleapis.com/envoy.config.core.v3.Nope", &[], "", ""),
        )
        .await
        .unwrap();
        let err = s.next().await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("envoy.config.core.v3.Nope"),
            "{err:?}"
        );
        assert!(
            err.message().contains("Cluster"),
            "lists what is served: {err:?}"
        );
        healthy(&cp, &backend).await;
    });
}

#[test]
fn nack_storm_from_one_proxy_does_not_resend_or_hurt_others() {
    let cp = start_xds_mesh();
    let web = token(&cp, "web-1");
    let backend = token(&cp, "backend-1");
    let rt = runtime();
    let storm = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&web),
            node("default", "web-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .unwrap();
        let v1 = s.expect(CLUSTER_TYPE).await;
        for i in 0..2000 {
            s.send(sotw_nack(&v1, &[], &format!("bad config #{i}")))
                .await;
        }
        healthy(&cp, &backend).await;
        s
    });
    eventually("all NACKs processed", Duration::from_secs(30), || {
        let r = cp
            .api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None)
            .1;
        (r["types"]["Cluster"]["lastNack"]["detail"] == "bad config #1999").then_some(())
    });
    let r = cp
        .api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None)
        .1;
    assert_eq!(
        r["types"]["Cluster"]["responses"], 1,
        "the NACKed version is never re-sent: {r}"
    );
    assert!(cp.metric(&["meshlink_xds_nacks_total", "type=\"Cluster\""]) >= 2000.0);
    drop(storm);
}
