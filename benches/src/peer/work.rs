//! The work every stack does, byte for byte the same: which request means what, the payload it
//! carries, and how a server's handlers report that they started and stopped.
//!
//! MCP: a `tools/call` named `noop` (answered at once), `park` (waits until cancelled) or `heap`
//! (reports the server process's live heap bytes, then answers), with arguments
//! `{"label": N, "text": PAYLOAD}`. Every stack's server deserializes them into rmcp's
//! `CallToolRequestParams` and answers with rmcp's `CallToolResult`.
//!
//! ACP: a `session/prompt` whose one text block is `noop:PAYLOAD`, `park:N:PAYLOAD` or `heap`.
//! Every stack's agent deserializes it into the ACP SDK's `PromptRequest` and answers with its
//! `PromptResponse`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::v1::schema::{ContentBlock, PromptRequest};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What a request asks its handler to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Answer at once.
    Noop,
    /// Report started, then wait until cancelled (reporting the moment it stops).
    Park(u64),
    /// Report the process's live heap bytes, then answer.
    Heap,
}

/// The payload: empty for the no-op rows, 4 KiB of text for the realistic ones.
pub fn payload(bytes: usize) -> Arc<str> {
    // Text a model would send: words and spaces, no escaping needed in JSON.
    let words = "the quick brown fox jumps over the lazy dog ";
    words.repeat(bytes / words.len() + 1)[..bytes].into()
}

/// The MCP `tools/call` params for `work`.
pub fn mcp_params(work: Work, text: &str) -> CallToolRequestParams {
    let (name, label) = match work {
        Work::Noop => ("noop", 0),
        Work::Park(label) => ("park", label),
        Work::Heap => ("heap", 0),
    };
    let arguments = json!({"label": label, "text": text});
    CallToolRequestParams::new(name).with_arguments(match arguments {
        Value::Object(map) => map,
        _ => unreachable!("arguments are an object"),
    })
}

/// What an MCP server's handler was asked to do.
pub fn mcp_work(params: &CallToolRequestParams) -> Work {
    match params.name.as_ref() {
        "park" => Work::Park(
            params
                .arguments
                .as_ref()
                .and_then(|a| a.get("label"))
                .and_then(Value::as_u64)
                .unwrap_or_default(),
        ),
        "heap" => Work::Heap,
        _ => Work::Noop,
    }
}

/// The ACP `session/prompt` params for `work`.
pub fn acp_params(work: Work, text: &str) -> PromptRequest {
    let text = match work {
        Work::Noop => format!("noop:{text}"),
        Work::Park(label) => format!("park:{label}:{text}"),
        Work::Heap => "heap".to_owned(),
    };
    PromptRequest::new("s", vec![text.into()])
}

/// What an ACP agent's handler was asked to do.
pub fn acp_work(prompt: &PromptRequest) -> Work {
    let text = match prompt.prompt.first() {
        Some(ContentBlock::Text(block)) => block.text.as_str(),
        _ => "",
    };
    if let Some(rest) = text.strip_prefix("park:") {
        let label = rest.split(':').next().unwrap_or_default();
        Work::Park(label.parse().unwrap_or_default())
    } else if text == "heap" {
        Work::Heap
    } else {
        Work::Noop
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC`: one clock for both processes of the pipe rows.
#[allow(unsafe_code)] // see the SAFETY comments inside
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to write; CLOCK_MONOTONIC always exists
    // on the Unix systems this benchmark runs on.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How a server's handlers report: into channels of this process, or as lines on standard error
/// for the client process to read (`s LABEL`, `x NANOS`, `h BYTES`).
#[derive(Clone)]
pub enum Signals {
    /// Server and client in one process.
    Local(Arc<LocalSignals>),
    /// The server is a child process; its standard error goes to the client.
    Stderr,
}

/// The sending ends of [`Receivers`].
pub struct LocalSignals {
    started: mpsc::Sender<u64>,
    stopped: mpsc::Sender<u64>,
    heap: mpsc::Sender<u64>,
}

/// What the client reads: labels of handlers that started, stop times (`mono_ns`) and heap
/// reports.
pub struct Receivers {
    /// Labels of parked handlers that started.
    pub started: mpsc::Receiver<u64>,
    /// `mono_ns` at which a parked handler stopped.
    pub stopped: mpsc::Receiver<u64>,
    /// The server process's live heap bytes, one per `heap` request.
    pub heap: mpsc::Receiver<u64>,
}

/// Room for every signal of a run: at most 10,000 parked handlers plus the samples.
pub const SIGNAL_ROOM: usize = 32_768;

/// Channels for a server in this process.
pub fn local_signals() -> (Signals, Receivers) {
    let (started, started_rx) = mpsc::channel(SIGNAL_ROOM);
    let (stopped, stopped_rx) = mpsc::channel(SIGNAL_ROOM);
    let (heap, heap_rx) = mpsc::channel(16);
    (
        Signals::Local(Arc::new(LocalSignals {
            started,
            stopped,
            heap,
        })),
        Receivers {
            started: started_rx,
            stopped: stopped_rx,
            heap: heap_rx,
        },
    )
}

/// The senders of a [`Receivers`] fed from a child's standard error.
pub fn remote_receivers() -> (LocalSignals, Receivers) {
    let (signals, receivers) = local_signals();
    match signals {
        Signals::Local(local) => (
            Arc::into_inner(local).expect("the only reference"),
            receivers,
        ),
        Signals::Stderr => unreachable!(),
    }
}

impl LocalSignals {
    /// Forwards one line of a child's standard error; other lines are printed.
    pub fn forward_line(&self, line: &str) {
        let (kind, value) = line.split_once(' ').unwrap_or((line, ""));
        let value: Option<u64> = value.trim().parse().ok();
        let sent = match (kind, value) {
            ("s", Some(v)) => self.started.blocking_send(v),
            ("x", Some(v)) => self.stopped.blocking_send(v),
            ("h", Some(v)) => self.heap.blocking_send(v),
            _ => {
                eprintln!("server: {line}");
                Ok(())
            }
        };
        let _ = sent; // the client has gone: the run is over
    }
}

/// One signal line, in one write (`writeln!` to the unbuffered stderr would make a syscall per
/// piece, and wake the client's reader for each).
fn stderr_line(kind: char, value: u64) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{kind} {value}\n").as_bytes());
}

impl Signals {
    /// A parked handler started.
    pub fn started(&self, label: u64) {
        match self {
            Signals::Local(local) => local
                .started
                .try_send(label)
                .expect("the client reads the signals"),
            Signals::Stderr => stderr_line('s', label),
        }
    }

    /// A parked handler stopped at `at` (`mono_ns`).
    pub fn stopped(&self, at: u64) {
        match self {
            Signals::Local(local) => {
                let _ = local.stopped.try_send(at); // after the run, nobody reads: fine
            }
            Signals::Stderr => stderr_line('x', at),
        }
    }

    /// Reports this process's live heap bytes.
    pub fn heap(&self) {
        let bytes = crate::alloc::live_bytes() as u64;
        match self {
            Signals::Local(local) => {
                let _ = local.heap.try_send(bytes);
            }
            Signals::Stderr => stderr_line('h', bytes),
        }
    }
}

/// Held by a parked handler: reports the moment it is dropped.
pub struct StopClock(pub Signals);

impl Drop for StopClock {
    fn drop(&mut self) {
        self.0.stopped(mono_ns());
    }
}

/// Counts the bytes written through it (the client's and the server's halves of the duplex).
pub struct CountingWriter<W> {
    inner: W,
    count: Arc<AtomicU64>,
}

impl<W> CountingWriter<W> {
    /// Counts what goes through `inner` into `count`.
    pub fn new(inner: W, count: Arc<AtomicU64>) -> Self {
        Self { inner, count }
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for CountingWriter<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &polled {
            self.count.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_reads_back_the_work_it_was_sent() {
        let text = payload(4096);
        assert_eq!(text.len(), 4096);
        for work in [Work::Noop, Work::Park(42), Work::Heap] {
            assert_eq!(mcp_work(&mcp_params(work, &text)), work);
            assert_eq!(acp_work(&acp_params(work, &text)), work);
        }
    }
}
