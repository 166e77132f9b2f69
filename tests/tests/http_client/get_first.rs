//! A server that sends its own request on the session's `GET` stream, and drops it when no such
//! stream is open yet (as the TypeScript SDK's server does with a tool's
//! `elicitation/create`), and whose `GET` is slow to answer: the client opens the stream right
//! after `notifications/initialized` and sends nothing more until the server has answered it,
//! so a call made at once still gets the server's request through. (The conformance suite's
//! `elicitation-sep1034-client-defaults` lost that race on a loaded machine.)

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cancelkit::http::client::HttpClient;
use cancelkit::peer::McpRevision;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::fake::event;
use crate::harness::{call, connect, eventually, negotiate, text};

/// How long the server takes to answer the `GET`.
const SLOW_GET: Duration = Duration::from_millis(300);

#[derive(Default)]
struct Server {
    /// The open `GET` stream, once its answer is on its way.
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// The client's answers to our requests.
    answers: Mutex<Vec<Value>>,
}

fn json_response(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn on_post(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = body["id"].clone();
    let Some(method) = body["method"].as_str() else {
        server.answers.lock().unwrap().push(body);
        return StatusCode::ACCEPTED.into_response();
    };
    let result =
        |result: Value| json_response(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    match method {
        "initialize" => {
            let mut response = result(json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "slow-get", "version": "0"}}));
            let session = "session-1".parse().unwrap();
            response.headers_mut().insert("mcp-session-id", session);
            response
        }
        _ if id.is_null() => StatusCode::ACCEPTED.into_response(),
        "tools/call" => {
            let stream = server.stream.lock().unwrap().clone();
            let Some(stream) = stream else {
                // No stream to send our request on: it is dropped.
                return result(json!({"content": [{"type": "text", "text": "no GET stream yet"}]}));
            };
            let ask = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"});
            stream.send(event(Some("g1"), &ask)).await.unwrap();
            let answer = eventually("the client answered roots/list", || {
                server.answers.lock().unwrap().first().cloned()
            })
            .await;
            let root = answer["result"]["roots"][0]["name"].as_str().unwrap_or("?");
            result(json!({"content": [{"type": "text", "text": root}]}))
        }
        _ => json_response(&json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}})),
    }
}

async fn on_get(State(server): State<Arc<Server>>) -> Response {
    tokio::time::sleep(SLOW_GET).await;
    let (tx, rx) = mpsc::channel(4);
    *server.stream.lock().unwrap() = Some(tx);
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(bytes), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(events))
        .unwrap()
}

#[tokio::test]
async fn a_call_right_after_the_handshake_finds_the_get_stream_open() {
    let server = Arc::new(Server::default());
    let app = axum::Router::new()
        .route(
            "/mcp",
            post(on_post)
                .get(on_get)
                .delete(|| async { StatusCode::OK }),
        )
        .with_state(Arc::clone(&server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let client = connect(HttpClient::new(&url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let result = call(&handle, "list_roots", json!({})).await.unwrap();
    assert_eq!(text(&result), "work", "{result}");
    client.close().await;
}
