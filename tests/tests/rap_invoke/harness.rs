//! The fixtures: a real tool server (`echo`, `sleep`, which logs why it stopped early) and an
//! invoker whose callback route is served on loopback, its tracker notifying that server.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::cancellable;
use cancelkit::rap::{
    CallTracker, Delivered, Invocation, Invoker, Notifier, ToolCall, ToolError, ToolOutput,
    ToolServer, ToolServerTarget,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "s3cret";

/// Serves `router` on a fresh loopback port (with client addresses, for the rate limit).
async fn serve(listener: TcpListener, router: axum::Router) {
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
}

/// What the tool server's `sleep` tool saw when it stopped early: (tool call id, reason).
type Stops = Arc<Mutex<Vec<(String, String)>>>;

/// Records why a `sleep` call stopped, if it stopped before its end.
pub(crate) struct StopLog {
    pub(crate) stops: Stops,
    pub(crate) id: String,
    done: bool,
}

impl Drop for StopLog {
    fn drop(&mut self) {
        if !self.done {
            let reason = cancelkit::cancel_reason().map(|r| r.to_string());
            self.stops
                .lock()
                .unwrap()
                .push((self.id.clone(), reason.unwrap_or_default()));
        }
    }
}

#[cancellable]
async fn sleep_tool(args: Value, call: ToolCall, stops: Stops) -> Result<ToolOutput, ToolError> {
    let mut log = StopLog {
        stops,
        id: call.tool_call_id.clone(),
        done: false,
    };
    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
    log.done = true;
    Ok(ToolOutput::Text(format!("{} slept", call.tool_call_id)))
}

/// `future`, or a panic after 10 s (so a result that never comes fails the test).
pub(crate) async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

pub(crate) struct Rig {
    pub(crate) server: ToolServer,
    pub(crate) target: ToolServerTarget,
    pub(crate) invoker: Invoker,
    pub(crate) stops: Stops,
    /// The `callback_url` each invocation carried, by tool call id, as the tool server got it.
    callbacks: Arc<Mutex<HashMap<String, String>>>,
}

/// A real tool server (`echo`, `sleep`) and an invoker whose callback route is served on
/// loopback, its tracker notifying that server.
pub(crate) async fn rig(max_pending: usize) -> Rig {
    rig_with(max_pending, Duration::ZERO).await
}

/// [`rig`], with every `/invoke` held for `invoke_delay` before the tool server sees it (a
/// slow network, or a busy server).
pub(crate) async fn rig_with(max_pending: usize, invoke_delay: Duration) -> Rig {
    let callbacks = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", callbacks.local_addr().unwrap());
    let stops = Stops::default();
    let server = {
        let stops = stops.clone();
        ToolServer::builder("invoke-tests")
            .bearer_token(TOKEN)
            .allow_callback_origin(&origin)
            .unwrap()
            .operation(
                "echo",
                "Returns its text",
                json!({"type": "object"}),
                |args: Value, _call: ToolCall| async move {
                    Ok(ToolOutput::from(args["text"].as_str().unwrap_or_default()))
                },
            )
            .operation(
                "sleep",
                "Sleeps for ms milliseconds",
                json!({"type": "object"}),
                move |args: Value, call: ToolCall| sleep_tool(args, call, stops.clone()),
            )
            .build()
    };
    let tools = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = ToolServerTarget::new(format!("http://{}", tools.local_addr().unwrap()))
        .with_bearer_token(TOKEN);
    let noted = Arc::new(Mutex::new(HashMap::new()));
    let seen = noted.clone();
    let hold = move |request: axum::extract::Request, next: axum::middleware::Next| {
        let seen = seen.clone();
        async move {
            if request.uri().path() != "/invoke" {
                return next.run(request).await;
            }
            tokio::time::sleep(invoke_delay).await;
            // Note the invocation's callback URL, then pass the request on unchanged.
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
    serve(
        tools,
        server.router().layer(axum::middleware::from_fn(hold)),
    )
    .await;
    let notifier = Notifier::new([target.clone()], Duration::from_secs(2));
    let tracker = Arc::new(CallTracker::new(Some(notifier)));
    let invoker = Invoker::builder(tracker, format!("{origin}/tool_result"))
        .max_pending(max_pending)
        .build()
        .unwrap();
    serve(callbacks, invoker.callback_router()).await;
    Rig {
        server,
        target,
        invoker,
        stops,
        callbacks: noted,
    }
}

impl Rig {
    pub(crate) fn sleep(&self, id: &str, ms: u64) -> Invocation {
        Invocation::new("sleep", "thread-1", id).arguments(json!({"ms": ms}))
    }

    /// Waits (at most 5 s) until the tool server runs `n` calls.
    pub(crate) async fn until_running(&self, n: usize) {
        for _ in 0..500 {
            if self.server.running() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the tool server runs {} calls, not {n}",
            self.server.running()
        );
    }

    /// Drops the invocation `call` runs, unanswered (aborting its task drops its future).
    pub(crate) async fn drop_call<T: std::fmt::Debug>(&self, call: tokio::task::JoinHandle<T>) {
        call.abort();
        let ended = call.await;
        assert!(
            ended
                .as_ref()
                .is_err_and(tokio::task::JoinError::is_cancelled),
            "the call was still waiting when dropped: {ended:?}"
        );
    }

    /// Waits (at most 5 s) for the tool server's `sleep` to record `n` early stops.
    pub(crate) async fn stops(&self, n: usize) -> Vec<(String, String)> {
        for _ in 0..500 {
            let stops = self.stops.lock().unwrap().clone();
            if stops.len() >= n {
                return stops;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stops = self.stops.lock().unwrap().clone();
        panic!("expected {n} stops, saw {stops:?}");
    }

    /// The callback URL the tool server was given for call `id`.
    pub(crate) fn callback_of(&self, id: &str) -> String {
        self.callbacks
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("the tool server saw no invocation of {id}"))
    }

    /// The secret in call `id`'s callback URL (its last path segment).
    pub(crate) fn secret_of(&self, id: &str) -> String {
        let url = self.callback_of(id);
        url.rsplit('/').next().unwrap().to_owned()
    }

    /// The tracker has the call as cancelled: not running (a cancel does nothing), still
    /// remembered, and its result, even with the call's own secret, is refused (the call no
    /// longer waits, so its secret is forgotten).
    pub(crate) fn assert_interrupted(&self, id: &str) {
        let tracker = self.invoker.tracker();
        assert_eq!(tracker.len(), 1, "the cancelled call is remembered");
        assert!(
            tracker.cancel("thread-1", id).is_none(),
            "the call is no longer running"
        );
        let late = json!({"type": "tool_result", "group_id": "thread-1", "id": id, "text": "late"});
        let secret = self.secret_of(id);
        assert_eq!(self.invoker.deliver(&secret, late), Delivered::Refused);
        assert_eq!(self.invoker.pending(), 0);
    }
}
