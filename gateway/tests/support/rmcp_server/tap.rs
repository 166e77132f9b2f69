//! What the server saw and did: the tools' log, the tap in front of the server (every POST
//! body and DELETE, how each answer ended) and the listener that counts closed connections.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What the tools did, in order.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Value>>>);

impl Log {
    pub(super) fn push(&self, entry: Value) {
        self.0.lock().unwrap().push(entry);
    }

    /// Every entry, in order.
    pub fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    /// The first entry matching `pred`.
    pub fn find(&self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        self.all().into_iter().find(|e| pred(e))
    }

    /// The `started` entry of the sleep labelled `label`.
    pub fn started(&self, label: &str) -> Value {
        self.find(|e| e["event"] == "started" && e["label"] == label)
            .unwrap_or_else(|| panic!("no sleep `{label}` started: {:?}", self.all()))
    }
}

/// Waits (at most 10 s) for an entry matching `pred`.
pub async fn wait_for(log: &Log, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(entry) = log.find(&pred) {
            return entry;
        }
        assert!(
            Instant::now() < deadline,
            "not seen within 10 s; the log: {:?}",
            log.all()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One POST the server received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The JSON-RPC message.
    pub body: Value,
    /// Its `Mcp-Session-Id`.
    pub session: Option<String>,
    /// How its answer ended (`None` while it is being written).
    pub ended: Option<Ended>,
}

/// How the answer to a POST ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The server wrote all of it: a JSON body, an empty one, or an SSE stream to its end.
    Complete,
    /// The connection went away first: before the answer began, or during its SSE stream.
    Closed,
}

/// Every request the server received, and how many connections it closed.
#[derive(Clone, Default)]
pub struct Tap {
    pub(super) posts: Arc<Mutex<Vec<Post>>>,
    pub(super) deletes: Arc<Mutex<Vec<Option<String>>>>,
    pub(super) answers: Arc<Mutex<Vec<(String, String)>>>,
    pub(super) closed: Arc<AtomicUsize>,
    /// How long (ms) a `tools/call` POST is held before rmcp gets it.
    pub(super) hold_ms: Arc<AtomicUsize>,
}

impl Tap {
    /// Every POST, in order.
    pub fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// How many POSTs carried `method`.
    pub fn count(&self, method: &str) -> usize {
        self.posts()
            .iter()
            .filter(|p| p.body["method"] == method)
            .count()
    }

    /// The content types of the answers to `method`.
    pub fn answered_as(&self, method: &str) -> Vec<String> {
        self.answers
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, content_type)| content_type.clone())
            .collect()
    }

    /// The session of every DELETE.
    pub fn deletes(&self) -> Vec<Option<String>> {
        self.deletes.lock().unwrap().clone()
    }

    /// The POST of the request with this JSON-RPC id (not a notification naming it).
    pub fn request(&self, id: &Value) -> Option<Post> {
        self.posts()
            .into_iter()
            .find(|p| p.body["id"] == *id && p.body.get("method").is_some())
    }

    /// How many TCP connections the server has closed.
    pub fn closed_connections(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

/// The tap: records the request, then passes it on unchanged.
pub(super) async fn record(tap: Tap, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    if parts.method != axum::http::Method::POST {
        if parts.method == axum::http::Method::DELETE {
            tap.deletes.lock().unwrap().push(session);
        }
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let method = body["method"].as_str().map(str::to_owned);
    let hold = if method.as_deref() == Some("tools/call") {
        tap.hold_ms.load(Ordering::SeqCst)
    } else {
        0
    };
    let mut ending = {
        let mut posts = tap.posts.lock().unwrap();
        posts.push(Post {
            body,
            session,
            ended: None,
        });
        Ending {
            posts: Arc::clone(&tap.posts),
            index: posts.len() - 1,
            complete: false,
        }
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    // Dropped here (`Closed`) if the connection goes away before the answer begins.
    let response = if hold > 0 {
        // Held in a task of its own: rmcp gets the request even if the client goes away.
        let held = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(hold as u64)).await;
            next.run(request).await
        });
        held.await.expect("the held request")
    } else {
        next.run(request).await
    };
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if let Some(method) = method {
        tap.answers
            .lock()
            .unwrap()
            .push((method, content_type.clone()));
    }
    if !content_type.starts_with("text/event-stream") {
        // A whole body (JSON, or none): complete as it is.
        ending.complete = true;
        return response;
    }
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body.into_data_stream(),
        ending,
    };
    Response::from_parts(parts, Body::from_stream(watched))
}

/// Records in its POST how the answer ended, when dropped.
struct Ending {
    posts: Arc<Mutex<Vec<Post>>>,
    index: usize,
    complete: bool,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let ended = if self.complete {
            Ended::Complete
        } else {
            Ended::Closed
        };
        if let Some(post) = self.posts.lock().unwrap().get_mut(self.index) {
            post.ended = Some(ended);
        }
    }
}

/// An SSE answer, complete once its stream ended.
struct Watched<S> {
    inner: S,
    ending: Ending,
}

impl<S: Stream + Unpin> Stream for Watched<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let next = self.inner.poll_next_unpin(cx);
        if let Poll::Ready(None) = next {
            self.ending.complete = true;
        }
        next
    }
}

/// A listener whose connections count themselves when closed.
pub(super) struct Counting {
    pub(super) inner: TcpListener,
    pub(super) closed: Arc<AtomicUsize>,
}

impl axum::serve::Listener for Counting {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            if let Ok((stream, addr)) = self.inner.accept().await {
                let closed = Arc::clone(&self.closed);
                return (Counted { stream, closed }, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

pub(super) struct Counted {
    stream: TcpStream,
    closed: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
