//! A trace collector for the MeshTrace tests: a plain HTTP/1.1 server on a
//! thread of its own (std `TcpListener`) that takes `POST`s (OTLP/HTTP
//! protobuf at `/v1/traces`, Zipkin v2 JSON at `/api/v2/spans`), answers
//! 200 and keeps every request so a test can decode what the sidecars
//! exported with the real schemas (`opentelemetry-proto`, Zipkin's JSON).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// One request the collector took.
#[derive(Debug, Clone)]
pub struct Export {
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// Its `content-type`.
    pub content_type: String,
    /// Its body.
    pub body: Vec<u8>,
}

/// An OTLP span with the service that exported it.
#[derive(Debug, Clone)]
pub struct ServiceSpan {
    /// `service.name` of its resource.
    pub service: String,
    /// The span.
    pub span: Span,
}

impl ServiceSpan {
    /// The string attribute `key`, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.as_str()),
                _ => None,
            })
    }
}

/// A running collector; its thread ends with the test process.
pub struct SpanCollector {
    port: u16,
    received: Arc<Mutex<Vec<Export>>>,
}

impl SpanCollector {
    /// Starts a collector on a free port of 127.0.0.1.
    pub fn start() -> SpanCollector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the collector");
        let port = listener.local_addr().expect("local addr").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let into = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let into = into.clone();
                std::thread::spawn(move || serve(stream, &into));
            }
        });
        SpanCollector { port, received }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every request taken so far.
    pub fn exports(&self) -> Vec<Export> {
        self.received.lock().expect("collector lock").clone()
    }

    /// Every OTLP span taken so far (requests to `/v1/traces`, decoded).
    pub fn otlp_spans(&self) -> Vec<ServiceSpan> {
        let mut out = Vec::new();
        for e in self.exports().iter().filter(|e| e.path == "/v1/traces") {
            let req = ExportTraceServiceRequest::decode(e.body.as_slice())
                .unwrap_or_else(|err| panic!("not OTLP protobuf: {err}"));
            for rs in req.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        any_value::Value::StringValue(s) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        out.push(ServiceSpan {
                            service: service.clone(),
                            span,
                        });
                    }
                }
            }
        }
        out
    }

    /// Every Zipkin span taken so far (JSON arrays at `/api/v2/spans`).
    pub fn zipkin_spans(&self) -> Vec<serde_json::Value> {
        self.exports()
            .iter()
            .filter(|e| e.path == "/api/v2/spans")
            .flat_map(|e| {
                let v: serde_json::Value = serde_json::from_slice(&e.body).expect("Zipkin v2 JSON");
                v.as_array().cloned().expect("a JSON array of spans")
            })
            .collect()
    }
}

/// Serves one connection: every request on it, until it closes.
fn serve(stream: TcpStream, into: &Mutex<Vec<Export>>) {
    let mut writer = stream.try_clone().expect("clone the stream");
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        );
        let (mut length, mut content_type) = (0usize, String::new());
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "content-type" => content_type = value.trim().to_owned(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        into.lock().expect("collector lock").push(Export {
            method,
            path,
            content_type,
            body,
        });
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer).is_err() {
            return;
        }
    }
}
