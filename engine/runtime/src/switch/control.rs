//! The switch's control plane: a Unix socket that `quench stats` reads.
//!
//! # Protocol
//! A client connects, writes one request, a JSON object on one line (`{"cmd":"stats"}\n`; a
//! request ended by EOF instead of a newline is read the same), and reads one JSON document until
//! EOF: the [`Snapshot`] for `stats`, or `{"error":{"kind":"...","message":"..."}}` for anything
//! it cannot serve ([`RequestError::kind`] names each refusal). [`parse_request`] is the whole
//! parser; fuzz/fuzz_targets/control.rs feeds it arbitrary bytes.
//!
//! # Serving
//! One thread, one mio poll, every connection non-blocking with its own buffers: a client that
//! connects and sends nothing holds only its own slot while every other client is answered.
//! Bounds: [`MAX_CONNECTIONS`] open at once (a new one beyond closes the one quiet the longest,
//! so silent clients cannot lock the others out), [`MAX_REQUEST`] octets per request, a
//! connection silent for [`IDLE_TIMEOUT`] closed. Each wake-up serves every
//! open connection until its socket would block, so an edge that a signal swallowed (mio is
//! edge-triggered) is never lost.
//!
//! The socket file has mode 0660: the switch's owner and group may ask for the counters, nobody
//! else. It is bound under a temporary name, given its mode, then renamed into place, so it is
//! never reachable with a wider mode.
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};
use units::{Duration, Instant};

use super::stats::{Registry, Snapshot};
use quench_wire::time::Clock;

/// Longest request, octets (the one request there is takes 16).
pub const MAX_REQUEST: usize = 1024;
/// Connections served at once; local tools open one at a time, so this is only a bound.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection that sends no complete request, or does not read its answer, for this long is
/// closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// The socket file's mode.
pub const SOCKET_MODE: u32 = 0o660;

/// How long one wait lasts: the bound on noticing `stop`.
const WAIT: std::time::Duration = std::time::Duration::from_millis(100);
const LISTENER: Token = Token(0);

/// A request the control plane serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `{"cmd":"stats"}`: every port's and queue's counters ([`Snapshot`]).
    Stats,
}

/// Why a request was refused; the client receives [`RequestError::to_json`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request longer than {MAX_REQUEST} octets")]
    TooLong,
    #[error("empty request; send {{\"cmd\":\"stats\"}}")]
    Empty,
    #[error("request is not JSON: {0}")]
    NotJson(String),
    #[error("request is not a JSON object with a string \"cmd\"; send {{\"cmd\":\"stats\"}}")]
    NoCommand,
    #[error("unknown command {0:?}; known: \"stats\"")]
    UnknownCommand(String),
    #[error("unknown key {0:?} in the request; \"stats\" takes none")]
    UnknownKey(String),
}

impl RequestError {
    /// The error's name in the JSON answer.
    pub fn kind(&self) -> &'static str {
        match self {
            RequestError::TooLong => "too_long",
            RequestError::Empty => "empty",
            RequestError::NotJson(_) => "not_json",
            RequestError::NoCommand => "no_command",
            RequestError::UnknownCommand(_) => "unknown_command",
            RequestError::UnknownKey(_) => "unknown_key",
        }
    }

    /// `{"error":{"kind":...,"message":...}}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({"error": {"kind": self.kind(), "message": self.to_string()}}).to_string()
    }
}

/// Parses one request: `bytes` up to its first newline (or all of it) must be a JSON object
/// `{"cmd": NAME}`. Never panics, whatever the bytes.
pub fn parse_request(bytes: &[u8]) -> Result<Request, RequestError> {
    let line = match bytes.iter().position(|&b| b == b'\n') {
        Some(n) => &bytes[..n],
        None => bytes,
    };
    if line.len() > MAX_REQUEST {
        return Err(RequestError::TooLong);
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(RequestError::Empty);
    }
    let v: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| RequestError::NotJson(e.to_string()))?;
    let obj = v.as_object().ok_or(RequestError::NoCommand)?;
    let cmd = obj
        .get("cmd")
        .and_then(|c| c.as_str())
        .ok_or(RequestError::NoCommand)?;
    let req = match cmd {
        "stats" => Request::Stats,
        other => {
            return Err(RequestError::UnknownCommand(
                other.chars().take(64).collect(),
            ))
        }
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "cmd") {
        return Err(RequestError::UnknownKey(k.chars().take(64).collect()));
    }
    Ok(req)
}

/// The answer to `req`, one JSON document and a newline; `stats` gives the `stats` answer.
fn answer(req: Result<Request, RequestError>, stats: &dyn Fn() -> String) -> Vec<u8> {
    let mut body = match req {
        Ok(Request::Stats) => stats(),
        Err(e) => e.to_json(),
    }
    .into_bytes();
    body.push(b'\n');
    body
}

/// One client: reading its request, then writing its answer.
struct Conn {
    stream: UnixStream,
    /// The request so far (at most [`MAX_REQUEST`] + 1 octets are kept).
    request: Vec<u8>,
    /// The answer, once the request is complete, and how much of it is written.
    answer: Option<(Vec<u8>, usize)>,
    /// Last time the client sent or took anything.
    active: Instant,
}

/// What a connection wants after being served.
enum Next {
    Keep,
    Close,
}

impl Conn {
    /// Reads and writes until the socket would block; `Close` once the answer is written or the
    /// connection failed.
    fn serve(&mut self, now: Instant, stats: &dyn Fn() -> String) -> Next {
        if self.answer.is_none() {
            let mut buf = [0u8; 512];
            loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => {
                        // EOF: what came is the request (an empty one is refused).
                        self.answer = Some((answer(parse_request(&self.request), stats), 0));
                        break;
                    }
                    Ok(n) => {
                        self.active = now;
                        let keep = (MAX_REQUEST + 1).saturating_sub(self.request.len());
                        self.request.extend_from_slice(&buf[..n.min(keep)]);
                        if self.request.contains(&b'\n') || self.request.len() > MAX_REQUEST {
                            self.answer = Some((answer(parse_request(&self.request), stats), 0));
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
        }
        let Some((out, at)) = self.answer.as_mut() else {
            return Next::Keep;
        };
        while *at < out.len() {
            match self.stream.write(&out[*at..]) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    *at += n;
                    self.active = now;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        Next::Close
    }
}

/// The bound control socket, not yet served: binding first lets `quench switch` refuse a bad
/// `control_socket` path before any port is opened.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` with mode [`SOCKET_MODE`], replacing a stale socket file; creates the
    /// directory if needed.
    pub fn bind(path: &Path) -> std::io::Result<ControlSocket> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let name = path.file_name().ok_or_else(|| {
            std::io::Error::new(ErrorKind::InvalidInput, "the path names no file")
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let _ = std::fs::remove_file(&tmp);
        let listener = UnixListener::bind(&tmp)?;
        let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(SOCKET_MODE))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(ControlSocket {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// Serves the switch's `registry` until `stop` is set; the socket file is removed when this
    /// returns.
    pub fn serve(self, registry: Arc<Registry>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        let clock = registry.clock;
        self.serve_with(
            &clock,
            &|| {
                serde_json::to_string(&registry.snapshot())
                    .unwrap_or_else(|e| RequestError::NotJson(e.to_string()).to_json())
            },
            stop,
        )
    }

    /// Serves requests until `stop` is set, answering `stats` with what `stats()` returns (one
    /// JSON document): the protocol and bounds of the module docs for any process that has
    /// counters to show (the switch, `quench appliance`). The socket file is removed when this
    /// returns.
    pub fn serve_with(
        mut self,
        clock: &Clock,
        stats: &dyn Fn() -> String,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<()> {
        let mut poll = Poll::new()?;
        poll.registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)?;
        let mut events = Events::with_capacity(MAX_CONNECTIONS);
        let mut conns: HashMap<Token, Conn> = HashMap::new();
        let mut next_token = 1usize;
        while !stop.load(Ordering::Relaxed) {
            match poll.poll(&mut events, Some(WAIT)) {
                // A signal (SIGSTOP then SIGCONT, a debugger, a profiler) interrupts the wait; it
                // must not end the control plane while the switch forwards on.
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            let now = clock.now();
            // Accept until the listener has no connection left, even without an event.
            loop {
                match self.listener.accept() {
                    Ok((mut stream, _)) => {
                        if conns.len() >= MAX_CONNECTIONS {
                            let quiet = conns.iter().min_by_key(|(_, c)| c.active).map(|(t, _)| *t);
                            if let Some(mut old) = quiet.and_then(|t| conns.remove(&t)) {
                                let _ = poll.registry().deregister(&mut old.stream);
                            }
                        }
                        let token = Token(next_token);
                        next_token = next_token.checked_add(1).unwrap_or(1);
                        if poll
                            .registry()
                            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                            .is_ok()
                        {
                            conns.insert(
                                token,
                                Conn {
                                    stream,
                                    request: Vec::new(),
                                    answer: None,
                                    active: now,
                                },
                            );
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            conns.retain(|_, c| {
                let open = matches!(c.serve(now, stats), Next::Keep)
                    && now.saturating_since(c.active) < IDLE_TIMEOUT;
                if !open {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
                open
            });
        }
        Ok(())
    }
}

/// The socket file goes with the socket, served or not (a start that fails after binding).
impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Asks the switch at `path` for a snapshot; an error answer becomes an `io::Error` carrying its
/// message.
pub fn query(path: &Path) -> std::io::Result<Snapshot> {
    serde_json::from_value(query_json(path)?).map_err(std::io::Error::other)
}

/// Asks the process serving `path` (a switch, an appliance) for its `stats` answer, as JSON; an
/// error answer becomes an `io::Error` carrying its message.
pub fn query_json(path: &Path) -> std::io::Result<serde_json::Value> {
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    s.write_all(b"{\"cmd\":\"stats\"}\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(std::io::Error::other)?;
    if let Some(e) = v.get("error") {
        let msg = e.get("message").and_then(|m| m.as_str()).unwrap_or("?");
        return Err(std::io::Error::other(format!("the server refused: {msg}")));
    }
    Ok(v)
}

/// A `stats` answer as [`query_answer`] reads it: a switch's [`Snapshot`], or an appliance's
/// (its pairs' counters and top flows, `Appliance::snapshot`), told apart by its `appliance`
/// key.
pub enum Answer {
    Switch(Box<Snapshot>),
    Appliance(serde_json::Value),
}

impl Answer {
    /// Decodes a `stats` answer.
    pub fn parse(v: serde_json::Value) -> anyhow::Result<Answer> {
        if v.get("appliance").is_some() {
            return Ok(Answer::Appliance(v));
        }
        let s = serde_json::from_value(v).map_err(|e| {
            anyhow::Error::new(e).context("the answer is neither a switch's nor an appliance's")
        })?;
        Ok(Answer::Switch(Box::new(s)))
    }
}

/// Asks the process serving `path` (a switch, an appliance) for its `stats` answer, decoded.
pub fn query_answer(path: &Path) -> anyhow::Result<Answer> {
    let v = query_json(path).map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "no quench switch or appliance answering on {} (is it running, in this network \
             namespace?)",
            path.display()
        ))
    })?;
    Answer::parse(v)
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream as StdStream;
    use std::sync::atomic::AtomicU64;

    use proptest::prelude::*;

    use super::*;
    use crate::switch::stats::{bump, PortCounters, PortInfo, WorkerCounters};
    use quench_node::switch::queue::CLASSES;
    use quench_wire::time::Clock;

    fn registry() -> Arc<Registry> {
        let counters = Arc::new(PortCounters::default());
        bump(&counters.rx_pkts, 5);
        bump(&counters.rx_pkts, 2);
        Arc::new(Registry {
            info: vec![PortInfo {
                name: "a".into(),
                iface: "qn-a".into(),
                kind: "mem".into(),
                mode: "mem".into(),
                worker: 0,
                rate_bps: None,
            }],
            counters: vec![vec![counters]],
            workers: vec![Arc::new(WorkerCounters {
                entries: AtomicU64::new(3),
                refused: AtomicU64::new(4),
                ..Default::default()
            })],
            clock: Clock::monotonic(),
        })
    }

    /// A served socket; stopped and joined on drop.
    struct Server {
        path: PathBuf,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    }

    impl Server {
        fn start(tag: &str) -> Server {
            let path =
                std::env::temp_dir().join(format!("qn-ctl-{tag}-{}.sock", std::process::id()));
            let sock = ControlSocket::bind(&path).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let (r, s) = (registry(), stop.clone());
            let thread = Some(std::thread::spawn(move || sock.serve(r, s)));
            Server { path, stop, thread }
        }

        /// Sends `bytes` (then EOF when `close`) and reads the answer until EOF.
        fn raw(&self, bytes: &[u8], close: bool) -> serde_json::Value {
            let mut s = StdStream::connect(&self.path).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            s.write_all(bytes).unwrap();
            if close {
                s.shutdown(std::net::Shutdown::Write).unwrap();
            }
            let mut body = String::new();
            s.read_to_string(&mut body).unwrap();
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
        }

        fn stop(mut self) -> std::io::Result<()> {
            self.stop.store(true, Ordering::Relaxed);
            self.thread.take().unwrap().join().unwrap()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn kind(v: &serde_json::Value) -> &str {
        v["error"]["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error: {v}"))
    }

    #[test]
    fn serves_snapshots_on_a_0660_socket_and_removes_it() {
        let srv = Server::start("snap");
        let mode = std::fs::metadata(&srv.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, SOCKET_MODE, "{mode:o}");
        let snap = query(&srv.path).unwrap();
        assert_eq!(snap.ports[0].rx_pkts, 7);
        assert_eq!(snap.fdb_entries, 3);
        assert_eq!(snap.fdb_refused, 4);
        assert_eq!(snap.ports[0].queues.len(), CLASSES);
        let path = srv.path.clone();
        srv.stop().unwrap();
        assert!(!path.exists());
        // No temporary name left behind either.
        let dir = std::fs::read_dir(path.parent().unwrap()).unwrap();
        let tmp = format!(".{}.", path.file_name().unwrap().to_string_lossy());
        assert!(!dir
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&tmp)));
    }

    /// Clients that connect and send nothing, or half a request, hold only their own slots: a
    /// full request is answered meanwhile, and a half request completed later is answered too.
    #[test]
    fn silent_clients_do_not_hold_the_socket() {
        let srv = Server::start("silent");
        let silent: Vec<StdStream> = (0..MAX_CONNECTIONS - 2)
            .map(|_| StdStream::connect(&srv.path).unwrap())
            .collect();
        let mut half = StdStream::connect(&srv.path).unwrap();
        half.write_all(b"{\"cmd\":").unwrap();
        for _ in 0..20 {
            assert_eq!(query(&srv.path).unwrap().ports[0].rx_pkts, 7);
        }
        half.write_all(b"\"stats\"}\n").unwrap();
        half.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut body = String::new();
        half.read_to_string(&mut body).unwrap();
        let snap: Snapshot = serde_json::from_str(&body).unwrap();
        assert_eq!(snap.fdb_entries, 3);
        drop(silent);
        srv.stop().unwrap();
    }

    /// A connection beyond the bound closes the one quiet the longest: a flood of silent
    /// clients cannot lock a real one out.
    #[test]
    fn a_new_connection_beyond_the_bound_closes_the_quietest() {
        let srv = Server::start("full");
        let mut first = StdStream::connect(&srv.path).unwrap();
        // Served in order: once `first` is answered, the server holds it.
        assert_eq!(kind(&srv.raw(b"\n", false)), "empty");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let silent: Vec<StdStream> = (0..MAX_CONNECTIONS - 1)
            .map(|_| StdStream::connect(&srv.path).unwrap())
            .collect();
        for _ in 0..3 {
            assert_eq!(query(&srv.path).unwrap().fdb_entries, 3);
        }
        // `first` was the quietest: closed by the server, so it reads EOF.
        first
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        assert_eq!(first.read_to_end(&mut rest).unwrap(), 0);
        drop(silent);
        srv.stop().unwrap();
    }

    #[test]
    fn bad_requests_get_json_errors() {
        let srv = Server::start("bad");
        let cases: [(&[u8], bool, &str); 8] = [
            (b"stats\n", false, "not_json"),
            (b"{\"cmd\":\"reboot\"}\n", false, "unknown_command"),
            (b"{}\n", false, "no_command"),
            (b"[1,2]\n", false, "no_command"),
            (b"{\"cmd\":7}\n", false, "no_command"),
            (b"{\"cmd\":\"stats\",\"port\":1}\n", false, "unknown_key"),
            (b"", true, "empty"),
            (&[0xff, 0xfe, b'\n'], false, "not_json"),
        ];
        for (req, close, want) in cases {
            let v = srv.raw(req, close);
            assert_eq!(kind(&v), want, "{:?}: {v}", String::from_utf8_lossy(req));
            assert!(v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
        }
        let long = vec![b' '; MAX_REQUEST + 10];
        assert_eq!(kind(&srv.raw(&long, false)), "too_long");
        // Without a newline, EOF ends the request.
        let v = srv.raw(b"{\"cmd\":\"stats\"}", true);
        assert_eq!(v["fdb_entries"], 3);
        srv.stop().unwrap();
    }

    /// A signal that lands while the control plane waits (SIGCONT after SIGSTOP, a profiler's
    /// timer) must not end it: the switch forwards on and stays observable.
    #[test]
    fn survives_signals() {
        use std::os::unix::thread::JoinHandleExt;
        let srv = Server::start("sig");
        // Any handler makes epoll_wait return EINTR (it is never restarted, signal(7)).
        let seen = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, seen.clone()).unwrap();
        assert!(query(&srv.path).is_ok(), "no answer before the signals");
        let tid = srv.thread.as_ref().unwrap().as_pthread_t();
        for _ in 0..20 {
            // Safety: the thread is alive (it only returns once `stop` is set or on error,
            // checked below) and SIGUSR1 has a handler.
            unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(seen.load(Ordering::Relaxed));
        assert!(!srv.thread.as_ref().unwrap().is_finished());
        assert_eq!(query(&srv.path).unwrap().fdb_entries, 3);
        srv.stop().unwrap();
    }

    #[test]
    fn a_bad_socket_path_is_an_error_at_bind() {
        let file = std::env::temp_dir().join(format!("qn-ctl-file-{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        // A regular file where the directory should be.
        assert!(ControlSocket::bind(&file.join("ctl.sock")).is_err());
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn parser_accepts_exactly_the_stats_object() {
        assert_eq!(parse_request(b"{\"cmd\":\"stats\"}"), Ok(Request::Stats));
        assert_eq!(
            parse_request(b" {\"cmd\" : \"stats\"} \r\n junk"),
            Ok(Request::Stats)
        );
        assert_eq!(
            parse_request(b"\n{\"cmd\":\"stats\"}"),
            Err(RequestError::Empty)
        );
        assert!(matches!(
            parse_request(b"{\"cmd\":\"stats\""),
            Err(RequestError::NotJson(_))
        ));
    }

    proptest! {
        /// Arbitrary bytes, and mutations of the valid request, never panic, and every refusal
        /// serialises to JSON naming its kind.
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1200),
                               cut in 0usize..20, flip in any::<u8>()) {
            for input in [bytes.clone(), {
                let mut v = b"{\"cmd\":\"stats\"}\n".to_vec();
                let i = cut % v.len();
                v[i] ^= flip;
                v
            }] {
                if let Err(e) = parse_request(&input) {
                    let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
                    prop_assert_eq!(v["error"]["kind"].as_str(), Some(e.kind()));
                }
            }
        }
    }
}
