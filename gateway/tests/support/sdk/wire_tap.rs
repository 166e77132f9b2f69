//! A recording reverse proxy on 127.0.0.1 in front of a Streamable HTTP upstream that is not
//! ours (server-everything): what the gateway sent it and what it answered, for the checks of
//! its stops. Requests and responses pass through unchanged, streamed; when the gateway closes
//! a response stream, the proxy closes the upstream's.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// One request the gateway sent through the proxy, and the body of the answer so far.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// `POST`, `GET` or `DELETE`.
    pub method: String,
    /// Its `Mcp-Session-Id`.
    pub session: Option<String>,
    /// The JSON-RPC message it carried (POST), else null.
    pub request: Value,
    content_type: String,
    body: Vec<u8>,
}

impl Exchange {
    /// The JSON-RPC messages of the answer's body so far: each complete SSE event's data, or the
    /// JSON body.
    pub fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        if !self.content_type.starts_with("text/event-stream") {
            return serde_json::from_str(&text).into_iter().collect();
        }
        let mut found = Vec::new();
        let mut data = Vec::new();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in complete.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.is_empty() {
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    found.push(message);
                }
                data.clear();
            } else if let Some(rest) = line.strip_prefix("data:") {
                data.push(rest.strip_prefix(' ').unwrap_or(rest).to_owned());
            }
        }
        found
    }
}

/// The proxy; it stops when dropped.
pub struct WireTap {
    /// Its endpoint: the upstream's path on the proxy's address.
    pub url: String,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    stop: CancellationToken,
}

#[derive(Clone)]
struct Forward {
    target: String,
    client: reqwest::Client,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
}

impl WireTap {
    /// Starts a proxy to `target` (`http://127.0.0.1:PORT/mcp`).
    pub async fn start(target: &str) -> WireTap {
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let forward = Forward {
            target: target.to_owned(),
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("http client"),
            exchanges: Arc::clone(&exchanges),
        };
        let router = axum::Router::new()
            .fallback(forward_request)
            .with_state(forward);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        let path = target.splitn(4, '/').nth(3).unwrap_or("");
        WireTap {
            url: format!("http://{address}/{path}"),
            exchanges,
            stop,
        }
    }

    /// Every exchange so far, in the order the requests came.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }
}

impl Drop for WireTap {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn forward_request(State(forward): State<Forward>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let index = {
        let mut exchanges = forward.exchanges.lock().unwrap();
        exchanges.push(Exchange {
            method: parts.method.to_string(),
            session,
            request: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            content_type: String::new(),
            body: Vec::new(),
        });
        exchanges.len() - 1
    };
    let mut upstream = forward.client.request(parts.method, &forward.target);
    for (name, value) in &parts.headers {
        if ![header::HOST, header::CONTENT_LENGTH, header::CONNECTION].contains(name) {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.body(bytes).send().await {
        Ok(answer) => answer,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if ![
            header::CONTENT_LENGTH,
            header::CONNECTION,
            header::TRANSFER_ENCODING,
        ]
        .contains(name)
        {
            response = response.header(name, value);
        }
    }
    let content_type = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    forward.exchanges.lock().unwrap()[index].content_type = content_type;
    let exchanges = Arc::clone(&forward.exchanges);
    let body = answer.bytes_stream().map(move |chunk| {
        if let Ok(bytes) = &chunk {
            exchanges.lock().unwrap()[index]
                .body
                .extend_from_slice(bytes);
        }
        chunk
    });
    response.body(Body::from_stream(body)).expect("a response")
}
