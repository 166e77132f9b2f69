//! A small server of our own, for what rmcp does not do on purpose.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cancelkit::wire::sse;
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::harness::eventually;

/// What the fake server saw and did.
#[derive(Default)]
pub struct Record {
    /// Speaks the legacy handshake (with a session) rather than 2026-07-28.
    pub legacy: bool,
    /// Every request with the session gets 404 from now on.
    pub session_gone: AtomicBool,
    pub seen: Mutex<Vec<(Method, HeaderMap, Value)>>,
    /// Ids of the `hang` calls whose stream the client closed.
    pub closed: Mutex<Vec<Value>>,
    /// The responses the client POSTed to our requests.
    pub answers: Mutex<Vec<Value>>,
    gets: AtomicUsize,
}

impl Record {
    pub fn posts(&self, method: &str) -> Vec<(HeaderMap, Value)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _, body)| *m == Method::POST && body["method"] == method)
            .map(|(_, headers, body)| (headers.clone(), body.clone()))
            .collect()
    }

    pub fn of(&self, method: Method) -> Vec<HeaderMap> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _, _)| *m == method)
            .map(|(_, headers, _)| headers.clone())
            .collect()
    }
}

pub struct Fake {
    pub url: String,
    pub record: Arc<Record>,
}

impl Fake {
    pub async fn start(legacy: bool) -> Fake {
        let record = Arc::new(Record {
            legacy,
            ..Record::default()
        });
        let app = axum::Router::new()
            .route("/mcp", post(on_post).get(on_get).delete(on_delete))
            .with_state(Arc::clone(&record));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Fake {
            url: format!("http://{addr}/mcp"),
            record,
        }
    }
}

fn json_body(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn result(id: &Value, result: Value) -> Response {
    json_body(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

pub fn event(id: Option<&str>, message: &Value) -> Bytes {
    let mut out = Vec::new();
    sse::write_event(&mut out, id, "message", &message.to_string());
    Bytes::from(out)
}

fn event_stream<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn from_channel(rx: mpsc::Receiver<Bytes>) -> impl Stream<Item = Result<Bytes, Infallible>> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|bytes| (Ok(bytes), rx))
    })
}

/// Keep-alive comments every 50 ms (for at most 20 s); `on_drop` runs when the client
/// closes the stream.
fn hanging(
    on_drop: impl FnOnce() + Send + 'static,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    futures_util::stream::unfold((Guard(Some(on_drop)), 0u32), |(guard, n)| async move {
        if n == 400 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (guard, n + 1)))
    })
}

async fn on_post(State(record): State<Arc<Record>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    record
        .seen
        .lock()
        .unwrap()
        .push((Method::POST, headers.clone(), body.clone()));
    let id = body["id"].clone();
    let Some(method) = body["method"].as_str() else {
        record.answers.lock().unwrap().push(body.clone());
        return StatusCode::ACCEPTED.into_response();
    };
    if headers.contains_key("mcp-session-id") && record.session_gone.load(Ordering::SeqCst) {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    }
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response(); // a notification
    }
    match method {
        "server/discover" if record.legacy => json_body(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
        ),
        "server/discover" => result(
            &id,
            json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}),
        ),
        "initialize" => {
            let mut response = result(
                &id,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}),
            );
            response
                .headers_mut()
                .insert("mcp-session-id", "session-1".parse().unwrap());
            response
        }
        "tools/list" => result(
            &id,
            json!({"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}},
                {"name": "hang", "inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}
                }}},
            ]}),
        ),
        "tools/call" => call(&record, id, &body["params"]).await,
        _ => json_body(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
        ),
    }
}

async fn call(record: &Arc<Record>, id: Value, params: &Value) -> Response {
    fn done(id: &Value, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    }
    match params["name"].as_str().unwrap_or_default() {
        "echo" => json_body(
            StatusCode::OK,
            &done(
                &id,
                params["arguments"]["text"].as_str().unwrap_or_default(),
            ),
        ),
        "hang" => {
            let record = Arc::clone(record);
            event_stream(hanging(move || record.closed.lock().unwrap().push(id)))
        }
        "late" => {
            // The answer (a stream that never ends) begins only after 300 ms.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let record = Arc::clone(record);
            event_stream(hanging(move || record.closed.lock().unwrap().push(id)))
        }
        "cut_with_id" => {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}});
            event_stream(futures_util::stream::iter([Ok(event(
                Some("x1"),
                &progress,
            ))]))
        }
        "huge_json" => json_body(StatusCode::OK, &done(&id, &"x".repeat(100 << 10))),
        "http500" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "boom: the database is on fire",
        )
            .into_response(),
        "rpc400" => json_body(
            StatusCode::BAD_REQUEST,
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32602, "message": "Unknown tool arguments"}}),
        ),
        "bad_json" => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "this is not json",
        )
            .into_response(),
        "huge" => {
            let big = done(&id, &"x".repeat(100 << 10));
            event_stream(futures_util::stream::iter([Ok(event(None, &big))]))
        }
        "cut" => {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}});
            event_stream(futures_util::stream::iter([Ok(event(None, &progress))]))
        }
        "ask" => {
            let (tx, rx) = mpsc::channel(4);
            let record = Arc::clone(record);
            tokio::spawn(async move {
                let ping = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"});
                let _ = tx.send(event(Some("e1"), &ping)).await;
                let answered = eventually("the client answered our ping", || {
                    record
                        .answers
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|a| a["id"] == "srv-1")
                        .cloned()
                })
                .await;
                let text = if answered.get("result").is_some() {
                    "answered"
                } else {
                    "refused"
                };
                let _ = tx.send(event(Some("e2"), &done(&id, text))).await;
            });
            event_stream(from_channel(rx))
        }
        other => json_body(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("no tool {other}")}}),
        ),
    }
}

/// The session's stream: the first carries `first` (id g1) and ends; a reopened one
/// carries `second` (id g2) and stays open.
async fn on_get(State(record): State<Arc<Record>>, headers: HeaderMap) -> Response {
    record
        .seen
        .lock()
        .unwrap()
        .push((Method::GET, headers.clone(), Value::Null));
    if !record.legacy {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let message = |data: &str| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}});
    if record.gets.fetch_add(1, Ordering::SeqCst) == 0 {
        return event_stream(futures_util::stream::iter([Ok(event(
            Some("g1"),
            &message("first"),
        ))]));
    }
    let first = futures_util::stream::iter([Ok(event(Some("g2"), &message("second")))]);
    event_stream(first.chain(hanging(|| {})))
}

async fn on_delete(State(record): State<Arc<Record>>, headers: HeaderMap) -> StatusCode {
    record
        .seen
        .lock()
        .unwrap()
        .push((Method::DELETE, headers, Value::Null));
    StatusCode::OK
}
