//! The rotation as the loops see it: order, stale reports, the immediate
//! move after a control plane that is going away, names resolved to
//! several candidates, and the metrics.

use super::*;

fn endpoints(urls: &[&str], first: usize) -> CpEndpoints {
    let urls = urls.iter().map(|u| CpUrl::parse(u).unwrap()).collect();
    CpEndpoints::starting_at(urls, first)
}

fn scrape(e: &CpEndpoints) -> String {
    let mut registry = Registry::with_prefix("meshlink_proxy");
    e.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    text
}

const ABC: [&str; 3] = [
    "https://10.0.0.1:5678",
    "https://10.0.0.2:5678",
    "https://10.0.0.3:5678",
];

#[tokio::test]
async fn failures_go_round_robin_from_the_first_candidate() {
    let e = endpoints(&ABC, 1);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let a = e.attempt().await;
        seen.push(a.to_string());
        a.failed(FailureKind::Other, "timeout");
    }
    assert_eq!(
        seen,
        [
            "https://10.0.0.2:5678 (2 of 3 URLs)",
            "https://10.0.0.3:5678 (3 of 3 URLs)",
            "https://10.0.0.1:5678 (1 of 3 URLs)",
            "https://10.0.0.2:5678 (2 of 3 URLs)",
        ]
    );
    assert!(scrape(&e).contains("meshlink_proxy_cp_failovers_total 4"));
}

#[tokio::test]
async fn a_success_keeps_the_candidate() {
    let e = endpoints(&ABC, 0);
    let a = e.attempt().await;
    a.succeeded();
    assert_eq!(e.attempt().await.url().as_str(), "https://10.0.0.1:5678");
}

#[tokio::test]
async fn two_loops_failing_on_one_candidate_move_the_rotation_once() {
    let e = endpoints(&ABC, 0);
    let xds = e.attempt().await;
    let certify = e.attempt().await;
    xds.failed(FailureKind::Other, "stream reset");
    certify.failed(FailureKind::Other, "stream reset");
    assert_eq!(e.attempt().await.url().as_str(), "https://10.0.0.2:5678");
    assert!(scrape(&e).contains("meshlink_proxy_cp_failovers_total 1"));
}

#[tokio::test]
async fn shutting_down_moves_at_once_until_every_url_failed_in_a_row() {
    let e = endpoints(&ABC, 0);
    let mut paces = Vec::new();
    for _ in 0..4 {
        let a = e.attempt().await;
        paces.push(a.failed(FailureKind::GoingAway, "control plane shutting down"));
    }
    // A and B fail: the next URL at once; C fails too (every URL failed in
    // a row), and A again: back off as with one URL.
    assert_eq!(
        paces,
        [
            Pace::Immediate,
            Pace::Immediate,
            Pace::Backoff,
            Pace::Backoff
        ]
    );
    // A success starts a new run: the next going-away failure moves at once.
    e.attempt().await.succeeded();
    let a = e.attempt().await;
    assert_eq!(a.failed(FailureKind::GoingAway, "refused"), Pace::Immediate);
}

#[tokio::test]
async fn other_failures_and_a_single_url_wait_for_the_backoff() {
    let e = endpoints(&ABC, 0);
    let a = e.attempt().await;
    assert_eq!(a.failed(FailureKind::Other, "timeout"), Pace::Backoff);
    assert_eq!(e.attempt().await.url().as_str(), "https://10.0.0.2:5678");

    let single = endpoints(&["https://127.0.0.1:5678"], 7);
    let a = single.attempt().await;
    assert_eq!(a.to_string(), "https://127.0.0.1:5678");
    assert_eq!(a.failed(FailureKind::GoingAway, "refused"), Pace::Backoff);
    assert!(scrape(&single).contains("meshlink_proxy_cp_failovers_total 0"));
}

#[tokio::test]
async fn a_stale_report_after_the_move_still_goes_at_once() {
    let e = endpoints(&ABC[..2], 0);
    let xds = e.attempt().await;
    let certify = e.attempt().await;
    assert_eq!(xds.failed(FailureKind::GoingAway, "drain"), Pace::Immediate);
    // Certify tried the same control plane; the rotation already left it.
    assert_eq!(
        certify.failed(FailureKind::GoingAway, "drain"),
        Pace::Immediate
    );
    assert_eq!(e.attempt().await.url().as_str(), "https://10.0.0.2:5678");
}

#[tokio::test]
async fn the_random_first_candidate_is_one_of_them() {
    for _ in 0..20 {
        let urls = ABC.iter().map(|u| CpUrl::parse(u).unwrap()).collect();
        let e = CpEndpoints::new(urls);
        let a = e.attempt().await;
        assert!(ABC.contains(&a.url().as_str()), "{a}");
    }
}

#[tokio::test]
async fn a_name_stands_for_each_of_its_addresses_and_keeps_its_name() {
    let e = endpoints(&["https://localhost:5678", "https://127.0.0.9:5678"], 0);
    let first = e.attempt().await;
    let addr = first.addr().expect("localhost resolves");
    assert!(addr.ip().is_loopback() && addr.port() == 5678, "{addr}");
    assert_eq!(first.url().host(), "localhost");
    let text = first.to_string();
    assert!(
        text.starts_with(&format!("https://localhost:5678 at {addr}")),
        "{text}"
    );
    // One turn: every address of the name, then the IP address URL, which
    // is dialled as it is.
    let mut turn = vec![(first.url().to_string(), first.addr())];
    let mut a = first;
    loop {
        a.failed(FailureKind::Other, "test");
        a = e.attempt().await;
        if (a.url().to_string(), a.addr()) == turn[0] {
            break;
        }
        turn.push((a.url().to_string(), a.addr()));
    }
    let (names, ips): (Vec<_>, Vec<_>) = turn.iter().partition(|(u, _)| u.contains("localhost"));
    assert!(
        names
            .iter()
            .all(|(_, a)| a.is_some_and(|a| a.ip().is_loopback())),
        "{turn:?}"
    );
    assert_eq!(
        ips,
        [&("https://127.0.0.9:5678".to_owned(), None)],
        "{turn:?}"
    );
}

#[tokio::test]
async fn the_connected_gauge_follows_the_held_stream() {
    let e = endpoints(&ABC[..2], 0);
    let text = scrape(&e);
    for line in [
        r#"meshlink_proxy_cp_connected{url="https://10.0.0.1:5678"} 0"#,
        r#"meshlink_proxy_cp_connected{url="https://10.0.0.2:5678"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let a = e.attempt().await;
    let guard = a.hold();
    assert!(scrape(&e).contains(r#"meshlink_proxy_cp_connected{url="https://10.0.0.1:5678"} 1"#));
    drop(guard);
    assert!(scrape(&e).contains(r#"meshlink_proxy_cp_connected{url="https://10.0.0.1:5678"} 0"#));
}
