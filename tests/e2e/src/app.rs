//! The applications around the sidecars: a plain HTTP/1.1 client over
//! `std::net::TcpStream` (what an app does to call `http://127.0.0.1:Q/`),
//! a tiny threaded HTTP server with byte-exact and gated slow responses, a
//! real `python3 -m http.server`, and a background request loop that counts
//! failures.
//!
//! Nothing here knows about the proxy; the tests point these at its ports.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one client request may take before it counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

// === impl HttpResponse ===

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Body (after `Content-Length` or chunked decoding).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The body as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn bad_data(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// `GET path` on `127.0.0.1:port` with `Connection: close`, one fresh TCP
/// connection per call. Any failure (refused, reset, closed before a full
/// response, timeout) is an `Err`.
pub fn http_get(port: u16, path: &str) -> io::Result<HttpResponse> {
    http_get_at(SocketAddr::from(([127, 0, 0, 1], port)), path)
}

/// [`http_get`] on any address (e.g. a site's own loopback address).
pub fn http_get_at(addr: SocketAddr, path: &str) -> io::Result<HttpResponse> {
    let stream = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut conn = HttpConn {
        reader: BufReader::new(stream),
    };
    conn.send(path, false)?;
    conn.read_response(|_| {})
}

/// One keep-alive HTTP/1.1 connection: several requests on one TCP stream.
pub struct HttpConn {
    reader: BufReader<TcpStream>,
}

impl HttpConn {
    /// Connects to `127.0.0.1:port`.
    pub fn connect(port: u16) -> io::Result<HttpConn> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        Ok(HttpConn {
            reader: BufReader::new(stream),
        })
    }

    /// `GET path`, keeping the connection open.
    pub fn get(&mut self, path: &str) -> io::Result<HttpResponse> {
        self.send(path, true)?;
        self.read_response(|_| {})
    }

    fn send(&mut self, path: &str, keep_alive: bool) -> io::Result<()> {
        let conn = if keep_alive { "keep-alive" } else { "close" };
        let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: {conn}\r\n\r\n");
        self.reader.get_mut().write_all(req.as_bytes())
    }

    /// Reads one response; `progress` sees the body byte count as it grows.
    fn read_response(&mut self, mut progress: impl FnMut(usize)) -> io::Result<HttpResponse> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            ));
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad_data(format!("bad status line {line:?}")))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(bad_data("connection closed inside the headers"));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
        let body = if chunked {
            self.read_chunked(&mut progress)?
        } else if let Some(n) = length {
            self.read_exact_progress(n, &mut progress)?
        } else {
            let mut body = Vec::new();
            self.reader.read_to_end(&mut body)?;
            body
        };
        Ok(HttpResponse { status, body })
    }

    fn read_exact_progress(
        &mut self,
        n: usize,
        progress: &mut impl FnMut(usize),
    ) -> io::Result<Vec<u8>> {
        let mut body = vec![0; n];
        let mut got = 0;
        while got < n {
            match self.reader.read(&mut body[got..])? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("body cut after {got} of {n} bytes"),
                    ));
                }
                k => got += k,
            }
            progress(got);
        }
        Ok(body)
    }

    fn read_chunked(&mut self, progress: &mut impl FnMut(usize)) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad_data(format!("bad chunk size {line:?}")))?;
            let chunk = self.read_exact_progress(size, &mut |_| {})?;
            body.extend_from_slice(&chunk);
            progress(body.len());
            line.clear();
            self.reader.read_line(&mut line)?;
            if size == 0 {
                return Ok(body);
            }
        }
    }
}

// === impl Transfer ===

/// A `GET` running on its own thread, whose progress can be watched.
pub struct Transfer {
    received: Arc<AtomicUsize>,
    handle: JoinHandle<io::Result<HttpResponse>>,
}

impl Transfer {
    /// Starts `GET path` on `127.0.0.1:port` (reads time out after 30 s).
    pub fn start(port: u16, path: &str) -> Transfer {
        let received = Arc::new(AtomicUsize::new(0));
        let counter = received.clone();
        let path = path.to_owned();
        let handle = std::thread::spawn(move || {
            let mut conn = HttpConn::connect(port)?;
            conn.reader
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(30)))?;
            conn.send(&path, false)?;
            conn.read_response(|n| counter.store(n, Ordering::SeqCst))
        });
        Transfer { received, handle }
    }

    /// Body bytes received so far.
    pub fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    /// Whether the transfer has ended (either way).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the result.
    pub fn join(self) -> io::Result<HttpResponse> {
        self.handle.join().expect("transfer thread panicked")
    }
}

// === impl HttpApp ===

/// The byte at `offset` of every generated body (period 251, so a shifted,
/// dropped or duplicated chunk shows).
pub fn pattern_byte(offset: usize) -> u8 {
    (offset % 251) as u8
}

/// `n` bytes of [`pattern_byte`].
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(pattern_byte).collect()
}

/// A gate the slow route waits at; open it with [`Gate::open`].
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// Lets every waiting (and future) slow response continue.
    pub fn open(&self) {
        *self.0.0.lock().expect("gate lock") = true;
        self.0.1.notify_all();
    }

    fn wait(&self) {
        let mut open = self.0.0.lock().expect("gate lock");
        while !*open {
            open = self.0.1.wait(open).expect("gate lock");
        }
    }
}

/// A threaded HTTP/1.1 server on 127.0.0.1 (keep-alive aware). Routes:
/// - `/name` → the app's name and a newline;
/// - `/bytes/N` → N bytes of [`pattern`];
/// - `/slow/N` → N bytes of [`pattern`]: the first quarter at once, then it
///   waits for [`HttpApp::gate`], then the rest spread over about 3 s;
/// - anything else → 404.
///
/// Stops accepting on drop.
pub struct HttpApp {
    addr: SocketAddr,
    port: u16,
    stop: Arc<AtomicBool>,
    gate: Gate,
    accept: Option<JoinHandle<()>>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl HttpApp {
    /// Starts on a free port.
    pub fn start(name: &str) -> HttpApp {
        Self::start_on(name, 0)
    }

    /// Starts on `port` (0 = any free port); listening when this returns.
    pub fn start_on(name: &str, port: u16) -> HttpApp {
        Self::start_at(name, "127.0.0.1", port)
    }

    /// Starts on `host:port` (e.g. a Dataplane's own loopback address).
    pub fn start_at(name: &str, host: &str, port: u16) -> HttpApp {
        let listener = TcpListener::bind((host, port))
            .unwrap_or_else(|e| panic!("app {name}: bind {host}:{port}: {e}"));
        let addr = listener.local_addr().expect("local addr");
        let port = addr.port();
        let stop = Arc::new(AtomicBool::new(false));
        let gate = Gate::default();
        let (name, stop2, gate2) = (name.to_owned(), stop.clone(), gate.clone());
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let Ok(conn) = conn else { continue };
                let (name, gate) = (name.clone(), gate2.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &name, &gate);
                });
            }
        });
        HttpApp {
            addr,
            port,
            stop,
            gate,
            accept: Some(accept),
            connections,
        }
    }

    /// How many connections the app accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The gate `/slow/N` waits at.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
}

impl Drop for HttpApp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag and drops the listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Serves requests on one connection until the client closes it or asks to.
fn serve(conn: TcpStream, name: &str, gate: &Gate) -> io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut close = line.contains("HTTP/1.0");
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                break;
            }
            let l = line.to_ascii_lowercase();
            if l.starts_with("connection:") {
                close = l.contains("close");
            }
        }
        let conn_hdr = if close { "close" } else { "keep-alive" };
        let head = |status: &str, len: usize| {
            format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: {conn_hdr}\r\n\r\n")
        };
        let size = |prefix: &str| path.strip_prefix(prefix)?.parse::<usize>().ok();
        if path == "/name" {
            let body = format!("{name}\n");
            out.write_all(head("200 OK", body.len()).as_bytes())?;
            out.write_all(body.as_bytes())?;
        } else if let Some(n) = size("/bytes/") {
            out.write_all(head("200 OK", n).as_bytes())?;
            out.write_all(&pattern(n))?;
        } else if let Some(n) = size("/slow/") {
            out.write_all(head("200 OK", n).as_bytes())?;
            write_slowly(&mut out, n, gate)?;
        } else {
            out.write_all(head("404 Not Found", 0).as_bytes())?;
        }
        out.flush()?;
        if close {
            return Ok(());
        }
    }
}

fn write_slowly(out: &mut TcpStream, n: usize, gate: &Gate) -> io::Result<()> {
    let body = pattern(n);
    let first = n / 4;
    out.write_all(&body[..first])?;
    out.flush()?;
    gate.wait();
    const CHUNK: usize = 64 * 1024;
    let chunks = (n - first).div_ceil(CHUNK).max(1);
    // Pacing of the workload (a slow producer), not a wait for the system.
    let pause = Duration::from_millis(3000) / chunks as u32;
    for chunk in body[first..].chunks(CHUNK) {
        out.write_all(chunk)?;
        std::thread::sleep(pause);
    }
    Ok(())
}

// === impl PythonApp ===

/// A real `python3 -m http.server` on 127.0.0.1 serving a temporary
/// directory. Killed on drop.
pub struct PythonApp {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl PythonApp {
    /// Serves `files` (name, content) on `port`; returns once it answers.
    pub fn start(port: u16, files: &[(&str, &str)]) -> PythonApp {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).expect("write app file");
        }
        let log = std::fs::File::create(dir.path().join("http.server.log")).expect("log");
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .arg("--directory")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn python3 -m http.server (is python3 installed?)");
        let mut app = PythonApp { child, port, dir };
        crate::eventually(
            "python3 http.server to listen",
            Duration::from_secs(20),
            || {
                if let Ok(Some(s)) = app.child.try_wait() {
                    panic!("python3 http.server exited with {s}: {}", app.logs());
                }
                TcpStream::connect(("127.0.0.1", app.port)).ok().map(|_| ())
            },
        );
        app
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log (one line per request).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("http.server.log")).unwrap_or_default()
    }

    /// The directory it serves.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PythonApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// === impl Traffic ===

/// What a [`Traffic`] loop saw.
#[derive(Debug, Default, Clone)]
pub struct TrafficReport {
    /// Requests answered with the expected status and body.
    pub ok: u64,
    /// Requests that failed.
    pub failed: u64,
    /// The first failures: (seconds since start, reason).
    pub failures: Vec<(f64, String)>,
}

/// A background loop of `GET path` on `127.0.0.1:port`, each on a new
/// connection (so each one goes through a new mTLS handshake), about 50 a
/// second, expecting status 200 and `expected` as the body.
pub struct Traffic {
    stop: Arc<AtomicBool>,
    report: Arc<Mutex<TrafficReport>>,
    handle: Option<JoinHandle<()>>,
}

impl Traffic {
    /// Starts the loop.
    pub fn start(port: u16, path: &str, expected: &[u8]) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let report = Arc::new(Mutex::new(TrafficReport::default()));
        let (stop2, report2) = (stop.clone(), report.clone());
        let (path, expected) = (path.to_owned(), expected.to_vec());
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            while !stop2.load(Ordering::SeqCst) {
                let outcome = match http_get(port, &path) {
                    Ok(r) if r.status == 200 && r.body == expected => Ok(()),
                    Ok(r) => Err(format!("status {} body {:?}", r.status, r.text())),
                    Err(e) => Err(format!("{:?}: {e}", e.kind())),
                };
                let mut rep = report2.lock().expect("report lock");
                match outcome {
                    Ok(()) => rep.ok += 1,
                    Err(e) => {
                        rep.failed += 1;
                        if rep.failures.len() < 20 {
                            rep.failures.push((start.elapsed().as_secs_f64(), e));
                        }
                    }
                }
                drop(rep);
                // Request rate of the workload, not a wait for the system.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Traffic {
            stop,
            report,
            handle: Some(handle),
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> TrafficReport {
        self.report.lock().expect("report lock").clone()
    }

    /// Stops the loop and returns the final counts.
    pub fn stop(mut self) -> TrafficReport {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.join().expect("traffic thread panicked");
        }
        self.snapshot()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
