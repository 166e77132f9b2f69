//! A real `redis-server` for tests: on a free loopback port, with no persistence, killed when
//! dropped.
//!
//! [`RedisServer::start`] finds `redis-server` on `PATH`, where `cargo xtask setup` installs
//! Debian's `redis-server` package. A test that needs it is an external test
//! ([`crate::external`]): without it, the test fails at once, naming `cargo xtask setup`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a started server may take to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// The `redis-server` binary on `PATH`; fails the test at once when there is none
/// ([`crate::external::binary`]).
#[track_caller]
pub fn server_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| crate::external::binary("redis-server", "redis-server"))
        .clone()
}

/// A `redis-server` child process on `127.0.0.1`, without persistence (`--save ""
/// --appendonly no`): a restart starts it empty. Dropping it kills it.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    log: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        let port = free_port();
        let log =
            std::env::temp_dir().join(format!("cancelkit-redis-{}-{port}.log", std::process::id()));
        let mut server = RedisServer {
            port,
            log,
            child: None,
        };
        server.spawn();
        server
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it with SIGKILL (no chance to say goodbye to its clients) and waits for it to exit.
    /// Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it (if running) and starts it again, empty, on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one command (its arguments as RESP bulk strings) on a fresh connection and returns
    /// the raw reply, for tests that poke at the server without a client library.
    pub fn command(&self, args: &[&str]) -> String {
        let mut stream = TcpStream::connect(self.addr()).expect("connect to redis-server");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("set a read timeout");
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream
            .write_all(request.as_bytes())
            .expect("send to redis-server");
        read_reply(&mut stream)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    fn spawn(&mut self) {
        let binary = server_binary();
        let log = std::fs::File::create(&self.log).expect("create the redis-server log file");
        let child = Command::new(&binary)
            .args(["--save", "", "--appendonly", "no"])
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                panic!(
                    "redis-server on port {} exited at start ({status}):\n{}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if self.answers_ping() {
                return;
            }
            if started.elapsed() > READY_WITHIN {
                self.kill();
                panic!(
                    "redis-server on port {} did not answer PING within {READY_WITHIN:?}:\n{}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200))
        else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A loopback port nobody listens on right now (the OS picks it; taken back at once).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// Reads one RESP reply (simple types and one level of arrays are enough for tests) and renders
/// it as text: `+OK` as `OK`, integers as digits, bulk strings as their bytes, nil as `(nil)`,
/// arrays as their elements joined by newlines.
fn read_reply(stream: &mut TcpStream) -> String {
    let line = read_line(stream);
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" | "-" | ":" => rest.to_owned(),
        "$" => {
            let len: i64 = rest.parse().expect("a bulk length");
            if len < 0 {
                return "(nil)".to_owned();
            }
            let mut body = vec![0u8; len as usize + 2];
            stream.read_exact(&mut body).expect("a bulk string");
            body.truncate(len as usize);
            String::from_utf8_lossy(&body).into_owned()
        }
        "*" => {
            let len: i64 = rest.parse().expect("an array length");
            (0..len.max(0))
                .map(|_| read_reply(stream))
                .collect::<Vec<_>>()
                .join("\n")
        }
        other => panic!("unexpected RESP reply type {other:?}: {line}"),
    }
}

fn read_line(stream: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).expect("a reply line");
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8_lossy(&line).into_owned()
}
