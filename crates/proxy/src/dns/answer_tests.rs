//! The answer logic on its own: mesh names, NODATA, NXDOMAIN under a
//! known suffix, forwarding, malformed input and truncation.

use std::net::IpAddr;
use std::time::Duration;

use hickory_proto::op::Query;
use proptest::prelude::*;

use super::*;
use crate::model::dns::DnsRecord;

pub(crate) fn spec_with(names: &[(&str, &[&str])]) -> DnsSpec {
    DnsSpec {
        bind: "127.0.0.1:0".parse().unwrap(),
        table: names
            .iter()
            .map(|(name, ips)| {
                (
                    (*name).to_owned(),
                    DnsRecord {
                        addresses: ips.iter().map(|ip| ip.parse().unwrap()).collect(),
                        ttl: 1,
                    },
                )
            })
            .collect(),
        known_suffixes: vec!["mesh".into()],
        resolver_timeout: Duration::from_millis(300),
        max_pending: 16,
    }
}

fn spec() -> DnsSpec {
    spec_with(&[("backend.mesh", &["240.0.0.1", "fd00:fd00::1"])])
}

pub(crate) fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 0x1234;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

fn answered(h: Handled) -> (Message, Outcome) {
    match h {
        Handled::Answer { bytes, outcome } => (Message::from_vec(&bytes).unwrap(), outcome),
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_and_aaaa_of_a_mesh_name_take_their_family_with_the_ttl() {
    let s = spec();
    let (a, outcome) = answered(handle(
        &query("backend.mesh.", RecordType::A),
        &s,
        Transport::Udp,
    ));
    assert_eq!(outcome, Outcome::Mesh);
    assert_eq!(a.metadata.id, 0x1234);
    assert_eq!(a.metadata.response_code, ResponseCode::NoError);
    assert!(a.metadata.authoritative && a.metadata.recursion_desired);
    assert_eq!(addresses(&a), ["240.0.0.1".parse::<IpAddr>().unwrap()]);
    assert_eq!(a.answers[0].ttl, 1);
    assert_eq!(a.queries.len(), 1, "the question is echoed");
    let (aaaa, _) = answered(handle(
        &query("backend.mesh.", RecordType::AAAA),
        &s,
        Transport::Udp,
    ));
    assert_eq!(
        addresses(&aaaa),
        ["fd00:fd00::1".parse::<IpAddr>().unwrap()]
    );
}

#[test]
fn names_match_in_any_case_and_the_answer_echoes_the_callers_case() {
    let (a, _) = answered(handle(
        &query("BackEnd.MESH.", RecordType::A),
        &spec(),
        Transport::Udp,
    ));
    assert_eq!(addresses(&a).len(), 1);
    assert_eq!(a.answers[0].name.to_ascii(), "BackEnd.MESH.");
    // Without the trailing dot (a relative name on the wire is the same).
    let (a, _) = answered(handle(
        &query("backend.mesh", RecordType::A),
        &spec(),
        Transport::Udp,
    ));
    assert_eq!(addresses(&a).len(), 1);
}

#[test]
fn the_other_family_and_other_types_are_nodata() {
    let only_v4 = spec_with(&[("web.mesh", &["240.0.0.2"])]);
    for qtype in [
        RecordType::AAAA,
        RecordType::TXT,
        RecordType::MX,
        RecordType::SRV,
    ] {
        let (m, outcome) = answered(handle(&query("web.mesh.", qtype), &only_v4, Transport::Udp));
        assert_eq!(
            (m.metadata.response_code, m.answers.len(), outcome),
            (ResponseCode::NoError, 0, Outcome::Mesh),
            "{qtype}"
        );
    }
}

#[test]
fn a_missing_name_under_a_known_suffix_is_nxdomain_and_others_are_forwarded() {
    let (m, outcome) = answered(handle(
        &query("nope.mesh.", RecordType::A),
        &spec(),
        Transport::Udp,
    ));
    assert_eq!(
        (m.metadata.response_code, outcome),
        (ResponseCode::NXDomain, Outcome::NxDomain)
    );
    assert_eq!(m.queries.len(), 1);
    assert!(matches!(
        handle(
            &query("example.com.", RecordType::A),
            &spec(),
            Transport::Udp
        ),
        Handled::Forward(_)
    ));
    // A label no table name can have (a NUL byte, written into the
    // wire form) is still under the suffix.
    let mut odd = query("bxd.mesh.", RecordType::A);
    assert_eq!(odd[14], b'x');
    odd[14] = 0;
    assert!(matches!(
        handle(&odd, &spec(), Transport::Udp),
        Handled::Answer {
            outcome: Outcome::NxDomain,
            ..
        }
    ));
}

#[test]
fn garbage_with_a_header_is_formerr_and_without_one_is_dropped() {
    let mut q = query("backend.mesh.", RecordType::A);
    q.truncate(q.len() - 3);
    let bytes = match handle(&q, &spec(), Transport::Udp) {
        Handled::Answer {
            bytes,
            outcome: Outcome::Malformed,
        } => bytes,
        other => panic!("{other:?}"),
    };
    assert_eq!(&bytes[..2], &[0x12, 0x34], "the id is kept");
    assert_eq!(bytes[2] & 0x80, 0x80, "a response");
    assert_eq!(bytes[3] & 0x0f, 1, "FORMERR");
    assert!(matches!(
        handle(&[1, 2, 3], &spec(), Transport::Udp),
        Handled::Drop
    ));
    // A response sent to the server is never answered.
    let mut r = query("backend.mesh.", RecordType::A);
    r[2] |= 0x80;
    assert!(matches!(handle(&r, &spec(), Transport::Udp), Handled::Drop));
}

#[test]
fn two_questions_are_formerr_and_other_opcodes_notimp() {
    let mut m = Message::query();
    m.add_query(Query::query(
        Name::from_ascii("a.mesh.").unwrap(),
        RecordType::A,
    ));
    m.add_query(Query::query(
        Name::from_ascii("b.mesh.").unwrap(),
        RecordType::A,
    ));
    let (r, outcome) = answered(handle(&m.to_vec().unwrap(), &spec(), Transport::Udp));
    assert_eq!(
        (r.metadata.response_code, outcome),
        (ResponseCode::FormErr, Outcome::Malformed)
    );
    let mut m = Message::query();
    m.metadata.op_code = OpCode::Status;
    let (r, _) = answered(handle(&m.to_vec().unwrap(), &spec(), Transport::Udp));
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp);
}

#[test]
fn an_answer_too_big_for_udp_is_truncated_and_whole_over_tcp() {
    let many: Vec<String> = (0..60).map(|i| format!("240.0.1.{i}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let s = spec_with(&[("big.mesh", &refs)]);
    let q = query("big.mesh.", RecordType::A);
    let (udp, _) = answered(handle(&q, &s, Transport::Udp));
    assert!(udp.metadata.truncation && udp.answers.is_empty());
    let (tcp, _) = answered(handle(&q, &s, Transport::Tcp));
    assert_eq!((tcp.metadata.truncation, tcp.answers.len()), (false, 60));
}

#[test]
fn servfail_keeps_the_question() {
    let request = Message::from_vec(&query("example.com.", RecordType::A)).unwrap();
    let r = Message::from_vec(&servfail(&request, Transport::Udp)).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert_eq!((r.metadata.id, r.queries.len()), (0x1234, 1));
}

proptest! {
    // The handler's fuzz target (the repository has no cargo-fuzz
    // directory): arbitrary bytes, and valid queries with bytes flipped,
    // never panic.
    #[test]
    fn any_input_is_handled_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = handle(&bytes, &spec(), Transport::Udp);
        let _ = handle(&bytes, &spec(), Transport::Tcp);
    }

    #[test]
    fn corrupted_queries_are_handled_without_panicking(at in 0usize..40, with in any::<u8>()) {
        let mut q = query("backend.mesh.", RecordType::AAAA);
        let i = at % q.len();
        q[i] = with;
        let _ = handle(&q, &spec(), Transport::Udp);
    }
}
