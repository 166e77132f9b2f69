//! The mock model API every surveyed agent talks to: one HTTP server on 127.0.0.1 (a port of
//! its own), answering each request with what the agent's model API would say in the survey's
//! mode, and recording every request it received (so a run can tell whether the agent reached
//! it, and whether a streamed answer was cut short by the agent hanging up).
//!
//! The wire formats live beside this file (`openai.rs`, `gemini.rs`, `anthropic.rs`); this file
//! only serves, paces and records.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// What the mock model does when the agent asks it for a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The model streams a text answer slowly ([`TICKS`] tokens, one every [`TICK`]), so a
    /// prompt is still running when it is cancelled.
    Slow,
    /// The model answers with a tool call the agent must ask the client permission for; once
    /// the tool's result comes back it answers a short text.
    Permission,
}

impl Mode {
    /// Both modes, in the order the survey runs them.
    pub const ALL: [Mode; 2] = [Mode::Slow, Mode::Permission];

    /// The mode's name in file names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Slow => "slow",
            Mode::Permission => "permission",
        }
    }
}

/// The environment variable naming a directory where the mock writes each request's body (as
/// `N.json`, N its index in the records), for looking into what an agent sent.
pub const BODIES: &str = "CANCELKIT_SURVEY_BODIES";

/// The pause between two tokens of a slow answer.
pub const TICK: Duration = Duration::from_millis(200);
/// How many tokens a slow answer has (so it lasts `TICKS × TICK`, 10 s).
pub const TICKS: usize = 50;
/// The shell command the permission mode's tool call runs (it creates a file in the agent's
/// working directory, which every surveyed agent asks permission for).
pub const COMMAND: &str = "touch cancelkit-survey.txt";
/// The text the model answers once the tool's result is back.
pub const AFTER_TOOL: &str = "The file is there.";

/// One request as the mock saw it, given to the API's answering function.
pub struct Request {
    /// The HTTP method.
    pub method: Method,
    /// The path with its query (`/v1beta/models/m:streamGenerateContent?alt=sse`).
    pub path: String,
    /// The JSON body, or `Null` when there is none or it is not JSON.
    pub body: Value,
}

/// The mock's answer to one request.
pub enum Reply {
    /// A JSON body with this status.
    Json(StatusCode, Value),
    /// A `text/event-stream` body: each frame is written after its delay.
    Sse(Vec<Frame>),
}

/// One piece of a streamed answer.
pub struct Frame {
    /// How long to wait before writing it.
    pub delay: Duration,
    /// The bytes written (one or more complete SSE events).
    pub text: String,
}

impl Frame {
    /// A frame written at once.
    pub fn now(text: String) -> Frame {
        Frame {
            delay: Duration::ZERO,
            text,
        }
    }

    /// A frame written one [`TICK`] after the previous one.
    pub fn tick(text: String) -> Frame {
        Frame { delay: TICK, text }
    }
}

/// One SSE event: an optional `event:` line and one `data:` line.
pub fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// The tokens of a slow answer: "tick 1 ", "tick 2 ", … (the last without the space).
pub fn ticks() -> impl Iterator<Item = String> {
    (1..=TICKS).map(|n| {
        if n == TICKS {
            format!("tick {n}.")
        } else {
            format!("tick {n} ")
        }
    })
}

/// A number not handed out before in this process (for tool call ids, which agents pair with
/// their results and may expect unique across turns).
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An API's answering function: which answer it chose (a short label for the record) and the
/// reply.
pub type Answer = fn(Mode, &Request) -> (&'static str, Reply);

/// What the mock recorded of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Milliseconds since the mock started.
    pub at_ms: u64,
    /// The HTTP method.
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The answer the API chose (`"slow text"`, `"tool call"`, `"404"`, …).
    pub answer: &'static str,
    /// How many frames of a streamed answer were planned (0 for JSON).
    pub frames: usize,
    /// How many were written before the stream ended.
    pub sent: usize,
    /// Whether the agent hung up before the stream's end.
    pub cut: bool,
    /// Milliseconds since the mock started when the stream ended (written in full or cut).
    pub ended_ms: Option<u64>,
}

impl Record {
    /// Whether this request was one of the agent's model turns (answered with slow text, a
    /// tool call, or the text after a tool), not a side question or an unknown path.
    pub fn is_turn(&self) -> bool {
        matches!(self.answer, "slow text" | "tool call" | "text after tool")
    }
}

/// A running mock: serves until dropped.
pub struct Mock {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    records: Arc<Mutex<Vec<Record>>>,
    stop: Option<oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

#[derive(Clone)]
struct State {
    mode: Mode,
    answer: Answer,
    started: Instant,
    records: Arc<Mutex<Vec<Record>>>,
}

impl Mock {
    /// Starts a mock of one API in `mode` on a free loopback port.
    pub fn start(answer: Answer, mode: Mode) -> Result<Mock, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the mock's runtime: {e}"))?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(SocketAddr::from((
                [127, 0, 0, 1],
                0,
            ))))
            .map_err(|e| format!("cannot bind the mock to 127.0.0.1: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("the mock's address: {e}"))?
            .port();
        let records = Arc::new(Mutex::new(Vec::new()));
        let state = State {
            mode,
            answer,
            started: Instant::now(),
            records: records.clone(),
        };
        let app = Router::new().fallback(move |method, uri, body| serve(state, method, uri, body));
        let (stop, stopped) = oneshot::channel::<()>();
        runtime.spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Mock {
            url: format!("http://127.0.0.1:{port}"),
            records,
            stop: Some(stop),
            runtime: Some(runtime),
        })
    }

    /// Every request received so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().expect("mock records").clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

async fn serve(state: State, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let request = Request {
        method: method.clone(),
        path: path.clone(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (label, reply) = (state.answer)(state.mode, &request);
    let at_ms = millis(state.started);
    let mut records = state.records.lock().expect("mock records");
    let index = records.len();
    if let Some(dir) = std::env::var_os(BODIES) {
        let _ = std::fs::write(Path::new(&dir).join(format!("{index}.json")), &body);
    }
    let frames = match &reply {
        Reply::Json(..) => 0,
        Reply::Sse(frames) => frames.len(),
    };
    records.push(Record {
        at_ms,
        method: method.to_string(),
        path,
        answer: label,
        frames,
        sent: 0,
        cut: false,
        ended_ms: None,
    });
    drop(records);
    match reply {
        Reply::Json(status, value) => (status, axum::Json(value)).into_response(),
        Reply::Sse(frames) => stream(state, index, frames),
    }
}

/// A streamed body written frame by frame; the writer stops (and records the cut) as soon as
/// the agent hangs up.
fn stream(state: State, index: usize, frames: Vec<Frame>) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(1);
    tokio::spawn(async move {
        let total = frames.len();
        let mut sent = 0;
        for frame in frames {
            if !frame.delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(frame.delay) => {}
                    () = tx.closed() => break,
                }
            }
            if tx.send(Ok(Bytes::from(frame.text))).await.is_err() {
                break;
            }
            sent += 1;
        }
        let mut records = state.records.lock().expect("mock records");
        let record = &mut records[index];
        record.sent = sent;
        record.cut = sent < total;
        record.ended_ms = Some(millis(state.started));
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A JSON error body for a path the API does not serve.
pub fn not_found(request: &Request) -> (&'static str, Reply) {
    let body = serde_json::json!({
        "error": {"message": format!("the survey's mock does not serve {}", request.path)}
    });
    ("404", Reply::Json(StatusCode::NOT_FOUND, body))
}
