//! What the mesh DNS does with one query message: answer it from the
//! table, say it must be forwarded, or drop it. Pure: bytes and a
//! [`DnsSpec`] in, bytes out; no I/O, no clock.
//!
//! It must never panic on any input (a fuzz-style test feeds it random
//! bytes). The wire format is hickory-proto's; only the header-only
//! errors (FORMERR for a message whose header is readable but whose body
//! is not) are written by hand, since no parsed message exists then.

use hickory_proto::op::{Edns, Message, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use super::metrics::Outcome;
use crate::model::dns::{DnsSpec, Lookup};

/// The size of a DNS header.
pub const HEADER_LEN: usize = 12;

/// The UDP payload an answer may fill when the query has no EDNS (RFC
/// 1035 §4.2.1).
const CLASSIC_UDP_PAYLOAD: usize = 512;

/// The UDP payload the server offers in its own EDNS record (the DNS flag
/// day 2020 value, which avoids IP fragmentation).
const EDNS_PAYLOAD: u16 = 1232;

/// The largest DNS message over TCP (its length prefix is 16 bits).
pub const MAX_TCP_MESSAGE: usize = 65_535;

/// How the query arrived, which bounds the answer's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A datagram: 512 bytes, or the query's EDNS payload size.
    Udp,
    /// Length-prefixed over TCP: 65,535 bytes.
    Tcp,
}

/// What to do with one query.
#[derive(Debug)]
pub enum Handled {
    /// Send these bytes back.
    Answer {
        /// The response message.
        bytes: Vec<u8>,
        /// How the query is counted.
        outcome: Outcome,
    },
    /// Not a mesh name: relay the query, as received, to an upstream
    /// resolver. The parsed query is kept for the SERVFAIL if none answers.
    Forward(Box<Message>),
    /// Send nothing.
    Drop,
}

/// Decides what to do with `query` under `spec`.
pub fn handle(query: &[u8], spec: &DnsSpec, transport: Transport) -> Handled {
    if query.len() < HEADER_LEN {
        return Handled::Drop;
    }
    // QR set: a response, not a query. Answering one could start a loop
    // between two servers.
    if query[2] & 0x80 != 0 {
        return Handled::Drop;
    }
    let request = match Message::from_vec(query) {
        Ok(m) => m,
        Err(_) => {
            return Handled::Answer {
                bytes: header_only(query, ResponseCode::FormErr),
                outcome: Outcome::Malformed,
            };
        }
    };
    if request.metadata.op_code != OpCode::Query {
        return answer(
            &request,
            ResponseCode::NotImp,
            Vec::new(),
            transport,
            Outcome::Malformed,
        );
    }
    let [question] = request.queries.as_slice() else {
        return answer(
            &request,
            ResponseCode::FormErr,
            Vec::new(),
            transport,
            Outcome::Malformed,
        );
    };
    match spec.lookup(&lookup_form(question.name())) {
        Lookup::Elsewhere => Handled::Forward(Box::new(request)),
        Lookup::NotFound => answer(
            &request,
            ResponseCode::NXDomain,
            Vec::new(),
            transport,
            Outcome::NxDomain,
        ),
        Lookup::Found(record) => {
            let class_ok = matches!(question.query_class(), DNSClass::IN | DNSClass::ANY);
            let qtype = question.query_type();
            let records = record
                .addresses
                .iter()
                .filter(|_| class_ok)
                .filter_map(|ip| {
                    let rdata = match (ip, qtype) {
                        (std::net::IpAddr::V4(v4), RecordType::A | RecordType::ANY) => {
                            RData::A(A(*v4))
                        }
                        (std::net::IpAddr::V6(v6), RecordType::AAAA | RecordType::ANY) => {
                            RData::AAAA(AAAA(*v6))
                        }
                        _ => return None,
                    };
                    Some(Record::from_rdata(
                        question.name().clone(),
                        record.ttl,
                        rdata,
                    ))
                })
                .collect();
            // No record of the asked type: NOERROR with no answers (NODATA).
            answer(
                &request,
                ResponseCode::NoError,
                records,
                transport,
                Outcome::Mesh,
            )
        }
    }
}

/// `name` as the table spells names: labels joined by dots, letters in
/// lowercase. A label with any other byte than a letter, digit, `-` or
/// `_` is written escaped (`\NNN`), so it never equals a table name but
/// the name can still fall under a known suffix.
fn lookup_form(name: &Name) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, label) in name.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        for &b in label {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                out.push(char::from(b.to_ascii_lowercase()));
            } else {
                out.push_str(&format!("\\{b:03}"));
            }
        }
    }
    out
}

/// SERVFAIL for `request`, with its question (stub resolvers ignore an
/// answer whose question differs from theirs).
pub fn servfail(request: &Message, transport: Transport) -> Vec<u8> {
    match answer(
        request,
        ResponseCode::ServFail,
        Vec::new(),
        transport,
        Outcome::ForwardFailed,
    ) {
        Handled::Answer { bytes, .. } => bytes,
        _ => unreachable!("answer always answers"),
    }
}

/// An authoritative response to `request` with `code` and `records`,
/// truncated (TC, no records) when it does not fit the transport.
fn answer(
    request: &Message,
    code: ResponseCode,
    records: Vec<Record>,
    transport: Transport,
    outcome: Outcome,
) -> Handled {
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata = Metadata::response_from_request(&request.metadata);
    response.metadata.message_type = MessageType::Response;
    response.metadata.authoritative = true;
    response.metadata.recursion_available = true;
    response.metadata.response_code = code;
    response.queries = request.queries.clone();
    response.answers = records;
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        response.set_edns(edns);
    }
    let limit = match transport {
        Transport::Tcp => MAX_TCP_MESSAGE,
        Transport::Udp => request
            .edns
            .as_ref()
            .map_or(CLASSIC_UDP_PAYLOAD, |e| usize::from(e.max_payload()))
            .clamp(CLASSIC_UDP_PAYLOAD, usize::from(EDNS_PAYLOAD)),
    };
    let bytes = match response.to_vec() {
        Ok(b) if b.len() <= limit => b,
        _ => {
            // Too big for this transport (or not encodable): the client
            // asks again over TCP.
            response.answers.clear();
            response.metadata.truncation = true;
            response
                .to_vec()
                .unwrap_or_else(|_| header_only_of(&request.metadata, code))
        }
    };
    Handled::Answer { bytes, outcome }
}

/// A response of just a header, for a query whose header is readable but
/// whose body is not: its id, opcode and RD, QR set, and `code`.
fn header_only(query: &[u8], code: ResponseCode) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    out[..2].copy_from_slice(&query[..2]);
    // QR | OPCODE (copied) | RD (copied); AA, TC clear.
    out[2] = 0x80 | (query[2] & 0x79);
    // RA set; Z, AD, CD clear; RCODE.
    out[3] = 0x80 | (code.low() & 0x0f);
    out
}

fn header_only_of(m: &Metadata, code: ResponseCode) -> Vec<u8> {
    let id = m.id.to_be_bytes();
    let op = u8::from(m.op_code);
    let rd = u8::from(m.recursion_desired);
    header_only(&[id[0], id[1], (op << 3) | rd, 0], code)
}

#[cfg(test)]
#[path = "answer_tests.rs"]
pub(crate) mod tests;
