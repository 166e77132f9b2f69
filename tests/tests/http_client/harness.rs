//! The shared helpers: a peer connected through an `HttpClient`, negotiating, bounded calls and
//! waits.

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use cancelkit::JsonRpcError;
use cancelkit::http::client::{Bridge, HttpClient};
use cancelkit::peer::{
    Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, PeerHandle, Protocol, RequestError,
    Router,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The longest any single wait in these tests may take.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn client_info() -> Value {
    json!({"name": "cancelkit-http-client-test", "version": "0.0.0"})
}

/// Waits (at most [`WAIT`]) until `check` gives a value.
pub(crate) async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A peer connected through an [`HttpClient`], its bridge, and the `notifications/message`
/// its router received.
pub(crate) struct Client {
    pub(crate) peer: Peer,
    pub(crate) bridge: Bridge,
    pub(crate) messages: mpsc::Receiver<Value>,
}

impl Client {
    pub(crate) fn handle(&self) -> PeerHandle {
        self.peer.handle()
    }

    /// Closes the peer and waits (bounded) until the bridge has ended the session.
    pub(crate) async fn close(self) {
        self.peer.handle().close();
        tokio::time::timeout(WAIT, async {
            self.peer.closed().await;
            self.bridge.stopped().await;
        })
        .await
        .expect("the peer and its bridge stopped within 10 s");
    }
}

/// Connects a peer through `client`, with a router answering `ping` and `roots/list` and
/// forwarding `notifications/message`.
pub(crate) fn connect(client: HttpClient) -> Client {
    let (messages, received) = mpsc::channel(16);
    let router = Router::new()
        .request("ping", |_: Value, _: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("roots/list", |_: Value, _: Context| async {
            Ok::<_, JsonRpcError>(json!({"roots": [{"uri": "file:///work", "name": "work"}]}))
        })
        .notification("notifications/message", move |params: Value, _: Context| {
            let messages = messages.clone();
            async move {
                let _ = messages.try_send(params);
            }
        });
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router)
        .client_capabilities(json!({"roots": {}}));
    let (peer, bridge) = client.connect_with_bridge(builder);
    Client {
        peer,
        bridge,
        messages: received,
    }
}

pub(crate) async fn negotiate(handle: &PeerHandle) -> McpRevision {
    tokio::time::timeout(
        WAIT,
        handle.discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT),
    )
    .await
    .expect("negotiated within 10 s")
    .expect("negotiated")
    .revision
}

/// `tools/call`, bounded: an answer (result or error) must come, never a hang.
pub(crate) async fn call(
    handle: &PeerHandle,
    tool: &str,
    arguments: Value,
) -> Result<Value, RequestError> {
    let request =
        handle.request::<_, Value>("tools/call", json!({"name": tool, "arguments": arguments}));
    tokio::time::timeout(WAIT, request)
        .await
        .unwrap_or_else(|_| panic!("`{tool}` got no answer within {WAIT:?}"))
}

pub(crate) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

pub(crate) fn rpc_error(outcome: Result<Value, RequestError>) -> JsonRpcError {
    match outcome {
        Err(RequestError::Rpc(error)) => error,
        other => panic!("expected an error response, got {other:?}"),
    }
}

pub(crate) fn header_of<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
