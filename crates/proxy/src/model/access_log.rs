//! Envoy's file access logger (`envoy.access_loggers.file`, what Kuma's
//! MeshAccessLog `File` backend becomes) and meshlink's TCP one
//! (`meshlink.v1.TcpAccessLog`, the `Tcp` backend): one line per request,
//! a `Plain` template or a `Json` object of Envoy command operators,
//! appended to a file (or `/dev/stdout`) or written to a TCP connection
//! (re-dialled with back-off when it fails; lines that find it down are
//! lost, as with Kuma's forwarder).
//!
//! Writing never blocks the data path: a request's line goes into a
//! bounded queue ([`QUEUE`] lines per file) that one thread per file
//! drains in batches ([`BATCH_PAUSE`]); when the queue is full the line
//! is dropped and counted
//! (`meshlink_proxy_access_log_dropped_total`). Listeners that log to the
//! same path share its queue and thread, which ends when no listener
//! logs there any more.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use http::HeaderName;
use meshlink_api::spec::access_log_format::{Operator, Token};
use serde::Serialize;

/// Lines queued per file before new ones are dropped.
pub const QUEUE: usize = 8192;

/// What a line is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LineFormat {
    /// A template (its trailing newline included).
    Text(Vec<Token>),
    /// A JSON object: each key's template, as a string value; keys sorted
    /// and unique (see [`LineFormat::json`]).
    Json(Vec<(String, Vec<Token>)>),
}

impl LineFormat {
    /// A JSON format of `fields`, in the order lines print them: sorted by
    /// key (as Envoy's `json_format` struct is), the last of a repeated
    /// key winning.
    pub fn json(mut fields: Vec<(String, Vec<Token>)>) -> LineFormat {
        fields.reverse();
        fields.sort_by(|a, b| a.0.cmp(&b.0)); // stable: the last one first
        fields.dedup_by(|later, first| later.0 == first.0);
        LineFormat::Json(fields)
    }

    fn tokens(&self) -> impl Iterator<Item = &Token> {
        let (text, json) = match self {
            LineFormat::Text(t) => (Some(t), None),
            LineFormat::Json(f) => (None, Some(f)),
        };
        text.into_iter()
            .flatten()
            .chain(json.into_iter().flatten().flat_map(|(_, t)| t))
    }
}

/// One access log of a listener.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessLog {
    /// Where the lines go.
    pub target: LogTarget,
    /// The line's format.
    pub format: LineFormat,
    /// Leave out empty values (JSON keys; `-` placeholders in text).
    pub omit_empty_values: bool,
    /// The request headers the format reads (`%REQ(..)%`, and `host` and
    /// `content-length` for `:authority` and `BYTES_RECEIVED`): all a
    /// request keeps for its line.
    #[serde(skip)]
    pub request_headers: Vec<HeaderName>,
    /// The file's queue.
    #[serde(skip)]
    pub sink: Arc<Sink>,
}

impl PartialEq for AccessLog {
    /// Compares the configuration, not the queue.
    fn eq(&self, other: &Self) -> bool {
        (&self.target, &self.format, self.omit_empty_values)
            == (&other.target, &other.format, other.omit_empty_values)
    }
}

impl Eq for AccessLog {}

impl AccessLog {
    /// A log of `format` lines to `target` (whose queue and writer are
    /// shared with the listeners that already log there).
    pub fn new(target: LogTarget, format: LineFormat, omit_empty_values: bool) -> AccessLog {
        let mut request_headers: Vec<HeaderName> = Vec::new();
        for op in format.tokens().filter_map(|t| match t {
            Token::Operator(op) => Some(op),
            Token::Literal(_) => None,
        }) {
            let names: Vec<&str> = match (op.name.as_str(), op.arg.as_deref()) {
                ("REQ", Some(arg)) => arg
                    .split('?')
                    .map(|n| {
                        if n.eq_ignore_ascii_case(":authority") {
                            "host"
                        } else {
                            n
                        }
                    })
                    .collect(),
                ("BYTES_RECEIVED", _) => vec!["content-length"],
                _ => Vec::new(),
            };
            for name in names {
                // A pseudo-header or an invalid name is never a header.
                if let Ok(h) = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
                    && !request_headers.contains(&h)
                {
                    request_headers.push(h);
                }
            }
        }
        AccessLog {
            sink: Sink::for_target(&target),
            target,
            format,
            omit_empty_values,
            request_headers,
        }
    }

    /// Formats one entry with `value` (which appends an operator's value
    /// to the line and says whether it had one: `-` in text, `null` in
    /// JSON when not, as in Envoy; left out with `omit_empty_values`) and
    /// queues it; `false` when the queue was full and the entry was
    /// dropped.
    pub fn write(&self, value: impl Fn(&Operator, &mut String) -> bool) -> bool {
        let line = match &self.format {
            LineFormat::Text(tokens) => {
                let empty = if self.omit_empty_values { "" } else { "-" };
                let mut line = String::with_capacity(256);
                render(tokens, &value, empty, &mut line);
                line.into_bytes()
            }
            LineFormat::Json(fields) => {
                let mut line = Vec::with_capacity(64 * fields.len() + 2);
                let mut v = String::with_capacity(64);
                line.push(b'{');
                for (key, tokens) in fields {
                    v.clear();
                    let valued = render(tokens, &value, "", &mut v);
                    let has_operator = tokens.iter().any(|t| matches!(t, Token::Operator(_)));
                    let shown = valued || !has_operator;
                    if !shown && self.omit_empty_values {
                        continue;
                    }
                    if line.len() > 1 {
                        line.push(b',');
                    }
                    json_string(&mut line, key);
                    line.push(b':');
                    if shown {
                        json_string(&mut line, &v);
                    } else {
                        line.extend_from_slice(b"null");
                    }
                }
                line.extend_from_slice(b"}\n");
                line
            }
        };
        self.sink.send(line)
    }
}

/// Appends `s` to `out` as a JSON string.
fn json_string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing JSON into a Vec cannot fail");
}

/// Appends `tokens` to `out` with each operator's value (`empty` for
/// none, cut to its `:N` length); says whether any operator had a value.
fn render(
    tokens: &[Token],
    value: &impl Fn(&Operator, &mut String) -> bool,
    empty: &str,
    out: &mut String,
) -> bool {
    let mut valued = false;
    for t in tokens {
        match t {
            Token::Literal(l) => out.push_str(l),
            Token::Operator(op) => {
                let at = out.len();
                if value(op, out) {
                    valued = true;
                    if let Some(n) = op.max_len
                        && let Some((cut, _)) = out[at..].char_indices().nth(n)
                    {
                        out.truncate(at + cut);
                    }
                } else {
                    out.truncate(at);
                    out.push_str(empty);
                }
            }
        }
    }
    valued
}

/// Where an access log's lines go.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LogTarget {
    /// A file (or `/dev/stdout`), appended to.
    File(String),
    /// A TCP address (`host:port`).
    Tcp(String),
}

/// A target's queue, shared by the listeners that log to it.
#[derive(Debug)]
pub struct Sink {
    tx: SyncSender<Vec<u8>>,
}

impl Sink {
    /// The queue of `target`, started (with its writer thread) if no
    /// listener logs there yet.
    pub fn for_target(target: &LogTarget) -> Arc<Sink> {
        static SINKS: OnceLock<Mutex<HashMap<LogTarget, Weak<Sink>>>> = OnceLock::new();
        let mut sinks = SINKS
            .get_or_init(Default::default)
            .lock()
            .expect("access log sinks lock");
        if let Some(s) = sinks.get(target).and_then(Weak::upgrade) {
            return s;
        }
        sinks.retain(|_, s| s.strong_count() > 0);
        let (tx, rx) = sync_channel(QUEUE);
        let owned = target.clone();
        let spawned = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || match &owned {
                LogTarget::File(path) => write_lines(path, &rx),
                LogTarget::Tcp(address) => send_lines(address, &rx),
            });
        if let Err(e) = spawned {
            tracing::warn!(?target, error = %e, "cannot start the access log writer");
        }
        let sink = Arc::new(Sink { tx });
        sinks.insert(target.clone(), Arc::downgrade(&sink));
        sink
    }

    fn send(&self, line: Vec<u8>) -> bool {
        match self.tx.try_send(line) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

/// How long a busy writer gathers lines between two writes. While lines
/// keep coming the writer sleeps this long after each batch, so a busy
/// log costs one wake-up and one `write` per pause instead of one per
/// line (the senders never wake a sleeping writer); an idle writer blocks
/// and writes the next line at once. Envoy flushes its file logs every
/// second; this pause is the most a line waits.
pub const BATCH_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// Calls `write` with each batch of queued lines until every [`Sink`] of
/// the queue is gone.
fn for_each_batch(rx: &Receiver<Vec<u8>>, mut write: impl FnMut(&[Vec<u8>])) {
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv() {
        batch.push(first);
        loop {
            batch.extend(rx.try_iter());
            write(&batch);
            batch.clear();
            std::thread::sleep(BATCH_PAUSE);
            match rx.try_recv() {
                Ok(line) => batch.push(line),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
    }
}

/// Bytes buffered before a write, as Envoy's file logger's 64 KiB.
const WRITE_BUFFER: usize = 64 * 1024;

/// The writer thread: appends every batch of queued lines to `path`;
/// ends when every [`Sink`] of the path is gone.
fn write_lines(path: &str, rx: &Receiver<Vec<u8>>) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    let mut out = match file {
        Ok(f) => std::io::BufWriter::with_capacity(WRITE_BUFFER, f),
        Err(e) => {
            tracing::warn!(path, error = %e, "cannot open the access log; its lines are dropped");
            // Keep draining so senders never block.
            while rx.recv().is_ok() {}
            return;
        }
    };
    for_each_batch(rx, |lines| {
        let written = lines
            .iter()
            .try_for_each(|l| out.write_all(l))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            tracing::warn!(path, error = %e, "writing the access log failed");
        }
    });
}

/// The TCP writer thread: sends every batch of queued lines to `address`,
/// dialling when it has lines and no connection, and at most once per
/// [`REDIAL`] after a failure; lines that find no connection are lost.
/// Ends when every [`Sink`] of the address is gone.
fn send_lines(address: &str, rx: &Receiver<Vec<u8>>) {
    let mut conn: Option<std::io::BufWriter<std::net::TcpStream>> = None;
    let mut next_dial = std::time::Instant::now();
    for_each_batch(rx, |lines| {
        if conn.is_none() && std::time::Instant::now() >= next_dial {
            conn = dial(address).map(|s| std::io::BufWriter::with_capacity(WRITE_BUFFER, s));
            if conn.is_none() {
                next_dial = std::time::Instant::now() + REDIAL;
            }
        }
        let Some(stream) = conn.as_mut() else {
            return;
        };
        let sent = lines
            .iter()
            .try_for_each(|l| stream.write_all(l))
            .and_then(|()| stream.flush());
        if let Err(e) = sent {
            tracing::warn!(address, error = %e, "the TCP access log connection failed; redialling");
            conn = None;
            next_dial = std::time::Instant::now() + REDIAL;
        }
    });
}

/// Time between dials of a TCP access log backend that failed.
pub const REDIAL: std::time::Duration = std::time::Duration::from_secs(1);

fn dial(address: &str) -> Option<std::net::TcpStream> {
    use std::net::ToSocketAddrs as _;
    let addrs = match address.to_socket_addrs() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(address, error = %e, "cannot resolve the TCP access log backend");
            return None;
        }
    };
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)) {
            Ok(s) => {
                let _ = s.set_write_timeout(Some(std::time::Duration::from_secs(2)));
                let _ = s.set_nodelay(true);
                return Some(s);
            }
            Err(e) => {
                tracing::warn!(address, error = %e, "cannot connect to the TCP access log backend")
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "access_log_tests.rs"]
mod tests;
