//! A third-party server run as a child process on a free `127.0.0.1` port, killed when dropped:
//! how the tests start the real Streamable HTTP peers (server-everything in [`crate::node`],
//! FastMCP in [`crate::python`]).

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to accept a TCP connection (FastMCP imports for a few
/// seconds before it listens).
const LISTENING_WITHIN: Duration = Duration::from_secs(60);

/// Attempts at starting a server: the free port is found by binding and releasing it, so another
/// process may take it before the server binds it; the server then exits and is started again
/// on another port.
const ATTEMPTS: u32 = 3;

/// A server child process listening on `127.0.0.1`; dropping it kills it (SIGKILL) and removes
/// its log.
#[derive(Debug)]
pub struct HttpPeer {
    child: Child,
    port: u16,
    url: String,
    log: PathBuf,
}

impl HttpPeer {
    /// Starts `command(port)` on a free loopback port with its stdout and stderr in a log file,
    /// and waits until the port accepts a TCP connection; `path` is the endpoint (`/mcp`), `what`
    /// names the server in panic messages.
    ///
    /// Panics with the server's log if it exits before it listens (after [`ATTEMPTS`] tries, in
    /// case the port was taken meanwhile) or is not listening within [`LISTENING_WITHIN`].
    pub(crate) fn start(what: &str, path: &str, command: impl Fn(u16) -> Command) -> HttpPeer {
        let mut last_log = String::new();
        for _ in 0..ATTEMPTS {
            let port = crate::redis::free_port();
            let log = std::env::temp_dir().join(format!(
                "cancelkit-{}-{}-{port}.log",
                what.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
                std::process::id()
            ));
            let file = std::fs::File::create(&log)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
            let child = command(port)
                .stdin(Stdio::null())
                .stdout(file.try_clone().expect("clone the log file handle"))
                .stderr(file)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
            let mut peer = HttpPeer {
                child,
                port,
                url: format!("http://127.0.0.1:{port}{path}"),
                log,
            };
            match peer.wait_listening(what) {
                Ok(()) => return peer,
                Err(log) => last_log = log,
            }
        }
        panic!("{what} exited before it listened, {ATTEMPTS} times; its last log:\n{last_log}");
    }

    /// Waits until the port accepts a connection; `Err(log)` if the server exited first.
    fn wait_listening(&mut self, what: &str) -> Result<(), String> {
        let started = Instant::now();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return Err(format!("({status})\n{}", self.log()));
            }
            // A connection to itself (Linux's TCP simultaneous open, when the free port is also
            // the ephemeral port the connect picked) is not a listener: keep waiting.
            let listening = TcpStream::connect_timeout(&address, Duration::from_millis(200))
                .is_ok_and(|stream| stream.local_addr().ok() != stream.peer_addr().ok());
            if listening {
                // Someone listens; if it is not our server (the port was taken meanwhile), ours
                // exits with "address in use", which the next poll sees.
                std::thread::sleep(Duration::from_millis(50));
                if let Some(status) = self.child.try_wait().expect("poll the server") {
                    return Err(format!("({status})\n{}", self.log()));
                }
                return Ok(());
            }
            if started.elapsed() > LISTENING_WITHIN {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{what} did not listen on 127.0.0.1:{} within {LISTENING_WITHIN:?}:\n{}",
                    self.port,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The endpoint, `http://127.0.0.1:<port><path>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Everything the server printed so far (stdout and stderr interleaved), for failure
    /// messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
