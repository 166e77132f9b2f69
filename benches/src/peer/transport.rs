//! The two transports: an in-memory duplex in one process, and real OS pipes to a child process
//! (the client spawns the server, which talks on its standard input and output).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::stacks::{BoxRead, BoxWrite, acp_sdk, cancelkit, rmcp};
use super::work::{CountingWriter, Receivers, Signals, local_signals, remote_receivers};
use super::{Flavor, Stack};

/// The client's ends of a connection to a fresh server of `stack`.
pub struct Link {
    /// What the client reads.
    pub read: BoxRead,
    /// What the client writes.
    pub write: BoxWrite,
    /// The server's signals.
    pub rx: Receivers,
    /// Bytes written by the client and by the server (in-memory duplex only).
    pub bytes: Option<(Arc<AtomicU64>, Arc<AtomicU64>)>,
    /// The server process (pipes only); killed when the link is dropped.
    pub _child: Option<tokio::process::Child>,
}

/// Runs a server of `stack` on `read`/`write` until the connection ends.
pub async fn serve(stack: Stack, read: BoxRead, write: BoxWrite, signals: Signals) {
    match stack {
        Stack::CancelkitMcp => cancelkit::serve(false, read, write, signals).await,
        Stack::CancelkitAcp => cancelkit::serve(true, read, write, signals).await,
        Stack::Rmcp => rmcp::serve(read, write, signals).await,
        Stack::AcpSdk => acp_sdk::serve(read, write, signals).await,
    }
}

/// A server of `stack` in a task of this runtime, over an in-memory duplex.
pub fn duplex(stack: Stack) -> Link {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (signals, rx) = local_signals();
    let (client_bytes, server_bytes) = (Arc::default(), Arc::default());
    let (read, write) = tokio::io::split(server);
    let write = CountingWriter::new(write, Arc::clone(&server_bytes));
    tokio::spawn(serve(stack, Box::pin(read), Box::pin(write), signals));
    let (read, write) = tokio::io::split(client);
    let write = CountingWriter::new(write, Arc::clone(&client_bytes));
    Link {
        read: Box::pin(read),
        write: Box::pin(write),
        rx,
        bytes: Some((client_bytes, server_bytes)),
        _child: None,
    }
}

/// A server of `stack` in a child process on a `flavor` runtime, over its standard input and
/// output; its signals come back as lines on its standard error.
pub fn pipes(stack: Stack, flavor: Flavor) -> Link {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut child = tokio::process::Command::new(exe)
        .args(["serve", stack.arg(), flavor.arg()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the benchmark starts its own server");
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (senders, rx) = remote_receivers();
    // Signals are read on a thread of their own, so a busy client runtime does not delay them.
    let stderr = stderr.into_owned_fd().expect("the child's stderr");
    std::thread::spawn(move || {
        use std::io::BufRead;
        let reader = std::io::BufReader::new(std::fs::File::from(stderr));
        for line in reader.lines() {
            match line {
                Ok(line) => senders.forward_line(&line),
                Err(_) => break,
            }
        }
    });
    Link {
        read: Box::pin(stdout),
        write: Box::pin(stdin),
        rx,
        bytes: None,
        _child: Some(child),
    }
}

/// The child's side of [`pipes`]: `cancelkit-bench serve STACK FLAVOR`.
pub fn serve_stdio(stack: Stack, flavor: Flavor) {
    flavor.runtime().block_on(async move {
        let (read, write) = stdio();
        serve(stack, read, write, Signals::Stderr).await;
    });
}

/// Standard input and output as non-blocking pipes driven by tokio's reactor, the same for
/// every stack (rmcp's `stdio_pipes` does the same; `tokio::io::stdin` would hand every read
/// to a blocking thread).
pub fn stdio() -> (BoxRead, BoxWrite) {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |fd: i32, write: bool| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{fd}"))
            .expect("standard input and output can be reopened")
    };
    let read = tokio::net::unix::pipe::Receiver::from_file(open(0, false))
        .expect("standard input is a pipe");
    let write = tokio::net::unix::pipe::Sender::from_file(open(1, true))
        .expect("standard output is a pipe");
    (Box::pin(read), Box::pin(write))
}
