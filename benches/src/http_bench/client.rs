//! The load generator, the same code and the same request bytes for both stacks.
//!
//! Sessions (2025-11-25): each client is one reqwest client (HTTP/1.1, its own keep-alive
//! pool) with one session — `initialize`, `notifications/initialized`, then every request
//! with its `Mcp-Session-Id` and `MCP-Protocol-Version`. A `tools/call` answer (an event
//! stream on both stacks) is read to its end.
//!
//! The 2026-07-28 closed-stream cancel uses a bare TCP connection per sample instead: the
//! request's bytes are written by hand, and the cancel is the connection closing (with a reset,
//! `SO_LINGER` 0, the same way for both stacks, whatever each has sent by then).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cancelkit::wire::sse;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::child::Server;
use super::unix_ns;

/// The revision of the sessions.
pub const REVISION: &str = "2025-11-25";
/// The revision of the closed-stream cancel.
pub const STATELESS_REVISION: &str = "2026-07-28";
/// What every `echo` call sends.
pub const ECHO_TEXT: &str = "the quick brown fox";
/// How long a cancelled `sleep` asks for at least: far longer than any sample. Each sleep adds
/// its sample's number, so the server's lines name the sleep they are about.
pub const SLEEP_MS: u64 = 10_000;
/// How long the bench waits for a cancelled request's stream to end before it drops the
/// connection (which is not a cancel at 2025-11-25: the request was cancelled already).
const STREAM_END_WAIT: Duration = Duration::from_millis(50);
/// How long a whole throughput measurement may take.
const PATIENCE: Duration = Duration::from_secs(300);

/// The body of `tools/call echo`.
pub fn echo_body(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{ECHO_TEXT}"}}}}}}"#
    )
}

fn sleep_body(id: u64, ms: u64, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":{ms}}}{meta}}}}}"#
    )
}

fn cancel_body(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"bench"}}}}"#
    )
}

/// The JSON-RPC messages of an answer: one JSON body, or the data of each event of a stream.
fn messages(content_type: &str, body: &[u8]) -> Result<Vec<Value>, String> {
    let parse = |text: &[u8]| serde_json::from_slice::<Value>(text).map_err(|e| e.to_string());
    if !content_type.starts_with(sse::CONTENT_TYPE) {
        return Ok(vec![parse(body)?]);
    }
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    parser.feed(body, &mut events).map_err(|e| e.to_string())?;
    parser
        .feed(b"\n\n", &mut events)
        .map_err(|e| e.to_string())?;
    events
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| parse(e.data.as_bytes()))
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What one checked echo answer looked like (the "same work" table).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Answer {
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its body's bytes.
    pub body_bytes: usize,
    /// The session id's length.
    pub session_id_bytes: usize,
}

/// One client's session.
pub struct Session {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    next_id: AtomicU64,
}

impl Session {
    /// Opens a session on `url`: `initialize`, then `notifications/initialized`.
    pub async fn open(url: &str) -> Result<Arc<Session>, String> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .http1_only()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())?;
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": {},
                "clientInfo": {"name": "cancelkit-bench", "version": "1"}
            }
        });
        let response = http
            .post(url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(initialize.to_string())
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .cloned()
            .ok_or_else(|| {
                format!(
                    "initialize answered {} without a session",
                    response.status()
                )
            })?;
        let content_type = header(&response, CONTENT_TYPE);
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        let answer = messages(&content_type, &body)?;
        let version = answer
            .iter()
            .find_map(|m| m["result"]["protocolVersion"].as_str())
            .ok_or_else(|| format!("initialize answered {answer:?}"))?;
        if version != REVISION {
            return Err(format!("initialize agreed on {version}, not {REVISION}"));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert("mcp-session-id", session);
        headers.insert("mcp-protocol-version", HeaderValue::from_static(REVISION));
        let session = Arc::new(Session {
            http,
            url: url.to_owned(),
            headers,
            next_id: AtomicU64::new(1),
        });
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let status = session
            .post(initialized.to_owned())
            .send()
            .await
            .map_err(|e| format!("notifications/initialized: {e}"))?
            .status();
        if status != reqwest::StatusCode::ACCEPTED {
            return Err(format!("notifications/initialized answered {status}"));
        }
        Ok(session)
    }

    fn post(&self, body: String) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// One `echo` round trip, its answer read to the end (a cheap check of it).
    pub async fn echo(&self) {
        let response = self
            .post(echo_body(self.id()))
            .send()
            .await
            .expect("an echo is answered");
        assert_eq!(response.status(), reqwest::StatusCode::OK, "echo");
        let body = response.bytes().await.expect("an echo's answer is read");
        assert!(
            contains(&body, ECHO_TEXT.as_bytes()),
            "an echo answer carries its text"
        );
    }

    /// One `echo` whose answer is parsed and checked whole.
    pub async fn echo_checked(&self) -> Result<Answer, String> {
        let id = self.id();
        let response = self
            .post(echo_body(id))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let content_type = header(&response, CONTENT_TYPE);
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        let found = messages(&content_type, &body)?
            .into_iter()
            .find(|m| m["id"] == id);
        match found {
            Some(m) if m["result"]["content"][0]["text"] == ECHO_TEXT => Ok(Answer {
                content_type,
                body_bytes: body.len(),
                session_id_bytes: self.headers["mcp-session-id"].len(),
            }),
            _ => Err(format!(
                "echo answered {status}: {}",
                String::from_utf8_lossy(&body)
            )),
        }
    }

    /// One session cancel: a `sleep` of `ms` is started, and once it runs
    /// `notifications/cancelled` is sent for it.
    pub async fn cancel(&self, server: &mut Server, ms: u64) -> SessionCancel {
        let id = self.id();
        let call = self.post(sleep_body(id, ms, "")).send();
        let mut call = tokio::spawn(async move {
            let response = call.await.map_err(|e| e.to_string())?;
            let status = response.status();
            let content_type = header(&response, CONTENT_TYPE);
            let body = response.bytes().await.map_err(|e| e.to_string())?;
            if status != reqwest::StatusCode::OK {
                return Err(format!("sleep answered {status}"));
            }
            messages(&content_type, &body)
        });
        tokio::select! {
            () = server.started(ms) => {}
            ended = &mut call => panic!("a sleep ended before it was cancelled: {ended:?}"),
        }
        let t0 = unix_ns();
        let accepted = self.post(cancel_body(id)).send();
        let (accepted, stopped) = tokio::join!(accepted, server.stopped(ms));
        let status = accepted.expect("a cancel is accepted").status();
        assert_eq!(
            status,
            reqwest::StatusCode::ACCEPTED,
            "notifications/cancelled"
        );
        let (ended, answered) = match tokio::time::timeout(STREAM_END_WAIT, &mut call).await {
            Ok(Ok(Ok(messages))) => (true, messages.iter().any(|m| m["id"] == id)),
            Ok(_) => (false, false),
            Err(_) => {
                call.abort();
                (false, false)
            }
        };
        SessionCancel {
            latency: stopped.map(|at| at.saturating_sub(t0) as f64 / 1e3),
            ended,
            answered,
        }
    }
}

/// What became of one session cancel.
pub struct SessionCancel {
    /// From just before the cancel's POST to the handler's stop (µs); `None` if the handler
    /// did not stop within [`LOST_AFTER`](super::child::LOST_AFTER).
    pub latency: Option<f64>,
    /// Whether the request's stream then ended by itself within 50 ms.
    pub ended: bool,
    /// Whether that stream carried a response to the cancelled request (MCP says it must not).
    pub answered: bool,
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Opens `clients` sessions on `server`.
pub async fn sessions(server: &Server, clients: usize) -> Vec<Arc<Session>> {
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        let session = Session::open(&server.url)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", server.stack.name()));
        sessions.push(session);
    }
    sessions
}

/// Round trips per second: `calls` echoes from the `sessions`, each calling one at a time.
pub async fn throughput(sessions: &[Arc<Session>], calls: usize) -> f64 {
    let per_client = (calls / sessions.len()).max(1);
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for session in sessions {
        let session = Arc::clone(session);
        clients.spawn(async move {
            for _ in 0..per_client {
                session.echo().await;
            }
        });
    }
    tokio::time::timeout(PATIENCE, clients.join_all())
        .await
        .expect("a throughput measurement ends in time");
    (per_client * sessions.len()) as f64 / start.elapsed().as_secs_f64()
}

/// One 2026-07-28 closed-stream cancel: a stamped `sleep` of `ms` on a connection of its own,
/// closed once the handler runs. From just before the close to the handler's stop (µs);
/// `None` if it did not stop within [`LOST_AFTER`](super::child::LOST_AFTER).
pub async fn closed_stream_cancel(server: &mut Server, id: u64, ms: u64) -> Option<f64> {
    let meta = format!(
        r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"{STATELESS_REVISION}","io.modelcontextprotocol/clientCapabilities":{{}}}}"#
    );
    let body = sleep_body(id, ms, &meta);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nmcp-protocol-version: {STATELESS_REVISION}\r\n\
         mcp-method: tools/call\r\nmcp-name: sleep\r\ncontent-length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    let mut tcp = tokio::net::TcpStream::connect(&server.addr)
        .await
        .expect("connect to the server");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    tcp.write_all(request.as_bytes())
        .await
        .expect("send the request");
    if !server.started_in_time(ms).await {
        let mut answer = vec![0; 4096];
        let read = tokio::time::timeout(Duration::from_secs(1), tcp.read(&mut answer)).await;
        let n = read.ok().and_then(Result::ok).unwrap_or(0);
        panic!(
            "{} started no stamped sleep; it answered: {}",
            server.stack.name(),
            String::from_utf8_lossy(&answer[..n])
        );
    }
    tcp.set_zero_linger().expect("SO_LINGER 0");
    let t0 = unix_ns();
    drop(tcp);
    let stopped = server.stopped(ms).await?;
    Some(stopped.saturating_sub(t0) as f64 / 1e3)
}
