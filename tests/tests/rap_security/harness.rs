//! The fixtures: a tool server with the `gate` tool, an invoker whose callback route is on
//! loopback, and the rig noting each invocation's `callback_url`.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::rap::{
    self, CallTracker, Invocation, Invoker, Notifier, ToolCall, ToolError, ToolOutput, ToolServer,
    ToolServerTarget,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub(crate) const TOKEN: &str = "s3cret";

/// Serves `router` on `listener` (with client addresses, for the rate limit and the shares).
pub(crate) fn serve(listener: TcpListener, router: axum::Router) {
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
}

/// `future`, or a panic after 10 s.
pub(crate) async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

/// Polls `check` every 10 ms, at most 5 s; panics with `what` if it never holds.
pub(crate) async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// One gate per tool call id: the `gate` tool waits at its call's gate until it is opened.
#[derive(Clone, Default)]
pub(crate) struct Gates(Arc<Mutex<HashMap<String, Arc<Notify>>>>);

impl Gates {
    fn gate(&self, id: &str) -> Arc<Notify> {
        self.0
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    pub(crate) fn open(&self, id: &str) {
        self.gate(id).notify_one();
    }
}

#[cancelkit::cancellable]
async fn gate_tool(call: ToolCall, gates: Gates) -> Result<ToolOutput, ToolError> {
    gates.gate(&call.tool_call_id).notified().await;
    Ok(ToolOutput::Text(format!(
        "genuine result of {}",
        call.tool_call_id
    )))
}

/// A tool server with the `gate` tool, allowing callbacks to `origin`.
pub(crate) fn gate_server(
    origin: &str,
    gates: &Gates,
    builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder,
) -> ToolServer {
    let gates = gates.clone();
    let base = ToolServer::builder("security-tests")
        .bearer_token(TOKEN)
        .allow_callback_origin(origin)
        .unwrap()
        .operation(
            "gate",
            "Waits until the test opens its gate",
            json!({"type": "object"}),
            move |_args: Value, call: ToolCall| gate_tool(call, gates.clone()),
        );
    builder(base).build()
}

pub(crate) async fn post(url: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

pub(crate) fn result(id: &str, text: &str) -> Value {
    json!({"type": "tool_result", "group_id": "thread-1", "id": id, "text": text})
}

/// An invoker (its callback route on loopback) and a tool server with the `gate` tool, whose
/// router notes each invocation's `callback_url` before handling it.
pub(crate) struct Rig {
    pub(crate) server: ToolServer,
    pub(crate) target: ToolServerTarget,
    pub(crate) invoker: Invoker,
    pub(crate) gates: Gates,
    callbacks: Arc<Mutex<HashMap<String, String>>>,
}

pub(crate) async fn rig() -> Rig {
    let callback_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", callback_listener.local_addr().unwrap());
    let gates = Gates::default();
    let server = gate_server(&origin, &gates, |b| b);
    let callbacks = Arc::new(Mutex::new(HashMap::new()));
    let seen = callbacks.clone();
    let note = move |request: axum::extract::Request, next: axum::middleware::Next| {
        let seen = seen.clone();
        async move {
            if request.uri().path() != "/invoke" {
                return next.run(request).await;
            }
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            if let Ok(invocation) = serde_json::from_slice::<Value>(&body) {
                seen.lock().unwrap().insert(
                    invocation["id"].as_str().unwrap_or_default().to_owned(),
                    invocation["callback_url"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
            let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(body));
            next.run(request).await
        }
    };
    let tools = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = ToolServerTarget::new(format!("http://{}", tools.local_addr().unwrap()))
        .with_bearer_token(TOKEN);
    serve(
        tools,
        server.router().layer(axum::middleware::from_fn(note)),
    );
    let notifier = Notifier::new([target.clone()], Duration::from_secs(2));
    let tracker = Arc::new(CallTracker::new(Some(notifier)));
    let invoker = Invoker::new(tracker, format!("{origin}/tool_result")).unwrap();
    serve(callback_listener, invoker.callback_router());
    Rig {
        server,
        target,
        invoker,
        gates,
        callbacks,
    }
}

impl Rig {
    pub(crate) fn callback_of(&self, id: &str) -> String {
        self.callbacks.lock().unwrap()[id].clone()
    }

    /// Calls `gate` as `id` from a task of its own; returns once the tool server runs it.
    pub(crate) async fn start(
        &self,
        id: &str,
    ) -> tokio::task::JoinHandle<Result<cancelkit::protocol::rap::ToolResult, rap::InvokeError>>
    {
        let running = self.server.running();
        let call = self
            .invoker
            .invoke(&self.target, Invocation::new("gate", "thread-1", id));
        let task = tokio::spawn(call);
        until("the tool server runs the call", || {
            self.server.running() == running + 1
        })
        .await;
        task
    }
}
