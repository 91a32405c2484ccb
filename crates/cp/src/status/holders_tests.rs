//! The `DuplicateHolder` rule on sequences of stream views and Certify
//! issuances, with explicit times (the module is pure).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use meshlink_xds::ads::{Holder, StreamView};
use meshlink_xds::owner::ProxyKey;

use super::*;
use crate::identity::issuance::{Delivery, Issuance};

const T0: Duration = Duration::from_secs(1_800_000_000);

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(secs)
}

fn key() -> ProxyKey {
    ProxyKey::new("default", "web-1")
}

/// Process `instance` calling from loopback port `port`.
fn process(instance: &str, port: u16) -> Holder {
    Holder {
        instance: Some(instance.to_owned()),
        peer: Some(SocketAddr::from(([127, 0, 0, 1], port))),
    }
}

/// A client that names no process, calling from `ip`:`port`.
fn anonymous(ip: [u8; 4], port: u16) -> Holder {
    Holder {
        instance: None,
        peer: Some(SocketAddr::from((ip, port))),
    }
}

fn opened(h: &Holder) -> StreamView {
    view(h, true, false)
}

fn view(h: &Holder, connected: bool, taken_over: bool) -> StreamView {
    StreamView {
        key: key(),
        connected,
        control_plane: "cp-a".into(),
        connected_at: at(0),
        disconnected_at: (!connected).then(|| at(0)),
        certificate: None,
        rejected: None,
        holder: h.clone(),
        taken_over,
    }
}

fn issued(serial: &str, h: &Holder) -> Issuance {
    Issuance {
        mesh: "default".into(),
        dataplane: "web-1".into(),
        serial: serial.into(),
        spiffe_id: "spiffe://default/web".into(),
        ca_fingerprint: "ff".into(),
        backend: "ca-1".into(),
        issued_at: at(0),
        not_after: at(3600),
        delivery: Delivery::Certify,
        holder: h.clone(),
    }
}

fn message(h: &Holders, now: SystemTime) -> Option<String> {
    h.condition(&key(), now, "cp-a").map(|c| {
        assert_eq!(c.type_, DUPLICATE_HOLDER);
        assert_eq!(c.reason, SECOND_CONNECTION);
        c.message
    })
}

#[test]
fn two_processes_taking_turns_are_named_with_their_certificates_until_one_stops() {
    let (a, b) = (process("111-aa", 40001), process("222-bb", 40002));
    let mut h = Holders::default();
    assert_eq!(
        h.on_issued(&key(), &issued("0a", &a), at(0))
            .map(|e| e.serial),
        Some("0a".into())
    );
    h.on_view(&opened(&a), at(1));
    // The second process asks for a certificate and takes the stream over:
    // nothing proves yet that the first one is alive.
    assert_eq!(
        h.on_issued(&key(), &issued("0b", &b), at(2))
            .map(|e| e.serial),
        Some("0b".into())
    );
    h.on_view(&opened(&b), at(3));
    assert_eq!(message(&h, at(3)), None);
    // The first one takes it back: two processes.
    let shown = h.on_view(&opened(&a), at(4));
    assert_eq!(
        shown.map(|e| e.serial),
        Some("0a".into()),
        "the first one's"
    );
    let m = message(&h, at(4)).expect("the condition");
    assert!(m.starts_with("2 processes hold"), "{m}");
    for part in [
        "127.0.0.1:40001 (process 111-aa)",
        "127.0.0.1:40002 (process 222-bb)",
        "certificate 0a",
        "certificate 0b",
        "control plane cp-a",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    assert!(m.find("40001") < m.find("40002"), "first seen first: {m}");
    // The second one renews: the status keeps the first one's certificate.
    assert_eq!(
        h.on_issued(&key(), &issued("1b", &b), at(5))
            .map(|e| e.serial),
        Some("0a".into())
    );
    assert!(message(&h, at(5)).unwrap().contains("certificate 1b"));
    // The second process stops while the first holds the stream: it is
    // not seen again, and after HOLDER_TTL it no longer counts.
    let later = at(5) + HOLDER_TTL;
    assert!(message(&h, later - Duration::from_secs(1)).is_some());
    let shown = h.expire(later);
    assert_eq!(shown.len(), 1, "the status is told once the conflict ends");
    assert_eq!(message(&h, later), None);
}

#[test]
fn a_second_process_that_stops_while_holding_the_stream_clears_it_at_once() {
    let (a, b) = (process("111-aa", 40001), process("222-bb", 40002));
    let mut h = Holders::default();
    h.on_view(&opened(&a), at(0));
    h.on_view(&opened(&b), at(1));
    h.on_view(&opened(&a), at(2));
    h.on_issued(&key(), &issued("0b", &b), at(3));
    h.on_view(&opened(&b), at(4));
    assert!(message(&h, at(4)).is_some());
    h.on_view(&view(&b, false, false), at(5));
    assert_eq!(message(&h, at(5)), None, "its stream closed: it left");
}

#[test]
fn one_process_reconnecting_or_restarting_elsewhere_is_no_duplicate() {
    // Same process, new connections; the old stream's takeover close
    // comes before, after, or never.
    let mut h = Holders::default();
    let (old, new) = (process("111-aa", 40001), process("111-aa", 40009));
    h.on_view(&opened(&old), at(0));
    h.on_view(&view(&old, false, true), at(1));
    h.on_view(&opened(&new), at(1));
    h.on_issued(&key(), &issued("0a", &new), at(2));
    h.on_view(&opened(&old), at(3));
    assert_eq!(message(&h, at(3)), None);
    // An Envoy reconnecting from new ports of the same host.
    let mut h = Holders::default();
    for (i, port) in [50001, 50002, 50003].into_iter().enumerate() {
        h.on_view(&opened(&anonymous([10, 0, 0, 7], port)), at(i as u64));
    }
    assert_eq!(message(&h, at(3)), None);
    // A proxy restarted on another host while the control plane still
    // held its dead stream: the old holder is displaced and never returns.
    let mut h = Holders::default();
    h.on_view(&opened(&process("111-aa", 40001)), at(0));
    h.on_issued(&key(), &issued("0b", &process("333-cc", 40100)), at(1));
    h.on_view(&opened(&process("333-cc", 40101)), at(2));
    h.on_issued(&key(), &issued("1b", &process("333-cc", 40102)), at(3));
    assert_eq!(message(&h, at(3)), None);
    assert!(h.expire(at(3) + HOLDER_TTL).is_empty());
    assert!(
        h.dataplanes
            .get(&key())
            .is_some_and(|d| d.holders.len() == 1)
    );
}

/// How the status task may see one takeover: the new stream's open, and
/// the displaced stream's close before it, after it, or not at all (the
/// new stream's report replaced the old one first).
#[derive(Debug, Clone, Copy)]
enum Seen {
    OpenThenClose,
    CloseThenOpen,
    OpenOnly,
}

fn takeover(h: &mut Holders, by: &Holder, from: &Holder, seen: Seen, now: SystemTime) {
    let close = view(from, false, true);
    match seen {
        Seen::OpenThenClose => {
            h.on_view(&opened(by), now);
            h.on_view(&close, now);
        }
        Seen::CloseThenOpen => {
            h.on_view(&close, now);
            h.on_view(&opened(by), now);
        }
        Seen::OpenOnly => {
            h.on_view(&opened(by), now);
        }
    }
}

#[test]
fn the_order_of_a_takeovers_views_does_not_matter() {
    let (a, b) = (process("111-aa", 40001), process("222-bb", 40002));
    let all = [Seen::OpenThenClose, Seen::CloseThenOpen, Seen::OpenOnly];
    let mut outcomes = Vec::new();
    for first in all {
        for second in all {
            for third in all {
                let mut h = Holders::default();
                h.on_issued(&key(), &issued("0a", &a), at(0));
                h.on_view(&opened(&a), at(0));
                h.on_issued(&key(), &issued("0b", &b), at(1));
                takeover(&mut h, &b, &a, first, at(2));
                let before = message(&h, at(2));
                takeover(&mut h, &a, &b, second, at(3));
                let during = message(&h, at(3));
                takeover(&mut h, &b, &a, third, at(4));
                let shown = h.on_issued(&key(), &issued("1b", &b), at(5));
                outcomes.push((
                    (first, second, third),
                    before,
                    during,
                    message(&h, at(5)),
                    shown.map(|e| e.serial),
                ));
            }
        }
    }
    let (_, before, during, after, shown) = outcomes[0].clone();
    assert_eq!(before, None, "one takeover proves nothing");
    assert!(during.is_some() && after.is_some());
    assert_eq!(
        shown.as_deref(),
        Some("0a"),
        "the first process's certificate"
    );
    for o in &outcomes {
        assert_eq!(
            (&o.1, &o.2, &o.3, &o.4),
            (&before, &during, &after, &shown),
            "{:?}",
            o.0
        );
    }
}

#[test]
fn a_stored_condition_of_this_instance_is_removed_unless_still_true() {
    let mut h = Holders::default();
    let mine = Condition::now(
        DUPLICATE_HOLDER,
        ConditionStatus::True,
        SECOND_CONNECTION,
        "2 processes hold this Dataplane's identity at once (seen by control plane cp-a), …",
    );
    let other = ProxyKey::new("default", "web-2");
    h.stored(&key(), Some(&mine), "cp-a");
    h.stored(&other, Some(&mine), "cp-b");
    assert!(h.written.contains_key(&key()));
    assert!(
        !h.written.contains_key(&other),
        "another replica's is left to it"
    );
    assert_eq!(h.condition(&key(), at(0), "cp-a"), None, "so it is removed");
}
