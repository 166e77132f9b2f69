//! The runtime-side invoke client (`cancelkit::rap::Invoker`) against the real `ToolServer`,
//! over loopback HTTP: results arrive through the callback route; dropping the future, or
//! cancelling its scope, sends `/cancel_tool_call` (the tool's scope is cancelled by it) and
//! leaves the tracker saying "interrupted"; a late result is refused, even with the call's own
//! callback URL (its secret is forgotten once the call stops waiting); the pending bound holds.
//! (Forged callbacks and the other protections are in `rap_security.rs`.)

#![cfg(unix)]

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::rap::{
    CallTracker, Delivered, Invocation, InvokeError, Invoker, Notifier, ToolCall, ToolError,
    ToolOutput, ToolServer, ToolServerTarget,
};
use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
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
struct StopLog {
    stops: Stops,
    id: String,
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
async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

struct Rig {
    server: ToolServer,
    target: ToolServerTarget,
    invoker: Invoker,
    stops: Stops,
    /// The `callback_url` each invocation carried, by tool call id, as the tool server got it.
    callbacks: Arc<Mutex<HashMap<String, String>>>,
}

/// A real tool server (`echo`, `sleep`) and an invoker whose callback route is served on
/// loopback, its tracker notifying that server.
async fn rig(max_pending: usize) -> Rig {
    rig_with(max_pending, Duration::ZERO).await
}

/// [`rig`], with every `/invoke` held for `invoke_delay` before the tool server sees it (a
/// slow network, or a busy server).
async fn rig_with(max_pending: usize, invoke_delay: Duration) -> Rig {
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
    fn sleep(&self, id: &str, ms: u64) -> Invocation {
        Invocation::new("sleep", "thread-1", id).arguments(json!({"ms": ms}))
    }

    /// Waits (at most 5 s) until the tool server runs `n` calls.
    async fn until_running(&self, n: usize) {
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
    async fn drop_call<T: std::fmt::Debug>(&self, call: tokio::task::JoinHandle<T>) {
        call.abort();
        let ended = call.await;
        assert!(
            ended.as_ref().is_err_and(|e| e.is_cancelled()),
            "the call was still waiting when dropped: {ended:?}"
        );
    }

    /// Waits (at most 5 s) for the tool server's `sleep` to record `n` early stops.
    async fn stops(&self, n: usize) -> Vec<(String, String)> {
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
    fn callback_of(&self, id: &str) -> String {
        self.callbacks
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("the tool server saw no invocation of {id}"))
    }

    /// The secret in call `id`'s callback URL (its last path segment).
    fn secret_of(&self, id: &str) -> String {
        let url = self.callback_of(id);
        url.rsplit('/').next().unwrap().to_owned()
    }

    /// The tracker has the call as cancelled: not running (a cancel does nothing), still
    /// remembered, and its result, even with the call's own secret, is refused (the call no
    /// longer waits, so its secret is forgotten).
    fn assert_interrupted(&self, id: &str) {
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

#[tokio::test]
async fn a_result_is_delivered_through_the_callback_route() {
    let rig = rig(8).await;
    let call = Invocation::new("echo", "thread-1", "call-1").arguments(json!({"text": "hi"}));
    let result = within(rig.invoker.invoke(&rig.target, call)).await.unwrap();
    assert_eq!(result.text.as_deref(), Some("hi"));
    assert_eq!(
        (result.group_id.as_str(), result.id.as_str()),
        ("thread-1", "call-1")
    );
    let result = within(rig.invoker.invoke(&rig.target, rig.sleep("call-2", 50)))
        .await
        .unwrap();
    assert_eq!(result.text.as_deref(), Some("call-2 slept"));
    assert!(
        rig.invoker.tracker().is_empty(),
        "delivered calls are forgotten"
    );
    assert_eq!(rig.invoker.pending(), 0);
    assert!(rig.stops.lock().unwrap().is_empty());
}

#[tokio::test]
async fn dropping_the_future_sends_cancel_tool_call() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    rig.drop_call(call).await;
    // The future was dropped: the tool server got /cancel_tool_call and its call's scope was
    // cancelled by it.
    let stops = rig.stops(1).await;
    assert_eq!(
        stops,
        [(
            "call-1".to_owned(),
            "cancelled by the peer: /cancel_tool_call".to_owned()
        )]
    );
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

/// A cancel can overtake its invocation (the runtime gives up while `POST /invoke` is on its
/// way); the server ignores a cancel for a call it does not know yet, so the invoker tells it
/// again once the invocation is answered.
#[tokio::test]
async fn a_cancel_that_overtakes_its_invocation_is_sent_again_once_it_is_answered() {
    let rig = rig_with(8, Duration::from_millis(500)).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    rig.drop_call(call).await;
    assert_eq!(
        rig.server.running(),
        0,
        "the tool server has not seen the invocation yet"
    );
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

#[tokio::test]
async fn cancelling_the_scope_sends_cancel_tool_call_and_answers_interrupted() {
    let rig = rig(8).await;
    let (scope, canceller) = Scope::root();
    let invoker = rig.invoker.clone();
    let target = rig.target.clone();
    let call = rig.sleep("call-1", 60_000);
    let task = tokio::spawn(scope.run(async move { invoker.invoke(&target, call).await }));
    rig.until_running(1).await;
    canceller.cancel(CancelReason::Peer(Some("user pressed stop".into())));
    let outcome = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the invoke future resolves at the cancel")
        .unwrap();
    match outcome {
        Err(InvokeError::Cancelled {
            cancelled,
            interrupted,
        }) => {
            assert_eq!(
                cancelled.reason,
                CancelReason::Peer(Some("user pressed stop".into()))
            );
            assert_eq!(interrupted["text"], "interrupted");
            assert_eq!(interrupted["is_error"], true);
            assert_eq!(interrupted["id"], "call-1");
        }
        other => panic!("expected Cancelled, got {other:?}"),
    }
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

/// A `#[cancellable]` caller with a timeout: its scope is cancelled at the timeout, the call is
/// cancelled at the tool server, and `?` turns it into -32800.
#[cancellable(timeout = "1s")]
async fn ask_the_tool(invoker: Invoker, target: ToolServerTarget) -> Result<String, JsonRpcError> {
    let call = Invocation::new("sleep", "thread-1", "call-1").arguments(json!({"ms": 60_000}));
    let result = invoker.invoke(&target, call).await?;
    Ok(result.text.unwrap_or_default())
}

#[tokio::test]
async fn a_cancellable_callers_timeout_cancels_the_tool_call() {
    let rig = rig(8).await;
    let error = ask_the_tool(rig.invoker.clone(), rig.target.clone())
        .await
        .unwrap_err();
    assert_eq!(error.code.code(), -32800, "{error:?}");
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

#[tokio::test]
async fn a_late_result_after_a_cancel_is_dropped() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    rig.drop_call(call).await;
    rig.stops(1).await;
    // A tool server that sends its result anyway, as the crossing allows: POSTed to the call's
    // own callback URL, refused (the call no longer waits, so its secret is forgotten) with
    // the same answer as a result for a call never made, and dropped.
    let late = json!({"type": "tool_result", "group_id": "thread-1", "id": "call-1", "text": "finished after all"});
    let post = |url: String, body: Value| async move {
        let response = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let (status, answer) = post(rig.callback_of("call-1"), late.clone()).await;
    assert_eq!(status, 403, "{answer}");
    let unknown =
        json!({"type": "tool_result", "group_id": "thread-1", "id": "nobody", "text": "x"});
    assert_eq!(
        post(rig.callback_of("call-1"), unknown.clone()).await,
        (status, answer),
        "nothing about the call is revealed"
    );
    let secret = rig.secret_of("call-1");
    assert_eq!(rig.invoker.deliver(&secret, late), Delivered::Refused);
    rig.assert_interrupted("call-1");
    // A result for a call never made is refused too, and a malformed one ignored.
    assert_eq!(rig.invoker.deliver(&secret, unknown), Delivered::Refused);
    assert_eq!(
        rig.invoker.deliver(&secret, json!({"id": "call-1"})),
        Delivered::Malformed
    );
    let bad_id = json!({"type": "tool_result", "group_id": "../x", "id": "call-1", "text": "x"});
    assert_eq!(rig.invoker.deliver(&secret, bad_id), Delivered::Malformed);
}

/// A call cancelled through the tracker itself (not by dropping its future) ends with
/// `Closed` when its late result is dropped; a tracker shared with other code keeps its records
/// of calls the invoker did not make.
#[tokio::test]
async fn a_call_cancelled_through_the_tracker_ends_when_its_result_is_dropped() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    let tracker = rig.invoker.tracker();
    assert!(tracker.cancel("thread-1", "call-1").is_some());
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    // The call still waits here, so its result, with its secret, is taken and dropped.
    let late = json!({"type": "tool_result", "group_id": "thread-1", "id": "call-1", "text": "x"});
    let secret = rig.secret_of("call-1");
    assert_eq!(rig.invoker.deliver(&secret, late), Delivered::Dropped);
    let outcome = within(call).await.unwrap();
    assert!(matches!(outcome, Err(InvokeError::Closed)), "{outcome:?}");

    tracker.start("thread-1", "elsewhere").unwrap();
    let other =
        json!({"type": "tool_result", "group_id": "thread-1", "id": "elsewhere", "text": "x"});
    assert_eq!(
        rig.invoker.deliver(&secret, other.clone()),
        Delivered::Refused
    );
    assert!(
        tracker.deliver(other).is_some(),
        "the other call's record is left to its owner"
    );
}

#[tokio::test]
async fn at_most_max_pending_calls_wait() {
    let rig = rig(2).await;
    let first = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    let second = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-2", 60_000)));
    rig.until_running(2).await;
    let refused = within(rig.invoker.invoke(&rig.target, rig.sleep("call-3", 0)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            InvokeError::Full {
                pending: 2,
                limit: 2
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "too many tool calls waiting for a result: 2 pending, the limit is 2"
    );
    assert_eq!(rig.server.running(), 2, "the refused call was never sent");
    // A place frees as soon as a waiting call is given up (and cancelled).
    rig.drop_call(first).await;
    rig.stops(1).await;
    let result = within(rig.invoker.invoke(&rig.target, rig.sleep("call-4", 10)))
        .await
        .unwrap();
    assert_eq!(result.text.as_deref(), Some("call-4 slept"));
    rig.drop_call(second).await;
    rig.stops(2).await;
    rig.until_running(0).await;
    assert_eq!(rig.invoker.pending(), 0);
}

#[tokio::test]
async fn a_refused_invocation_is_an_error_and_is_forgotten() {
    let rig = rig(8).await;
    let error = within(rig.invoker.invoke(
        &rig.target,
        Invocation::new("no_such_tool", "thread-1", "call-1"),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, InvokeError::Refused { status: 400, body } if body.contains("no operation")),
        "{error:?}"
    );
    let wrong_token = ToolServerTarget::new(rig.target.base_url.clone()).with_bearer_token("x");
    let error = within(rig.invoker.invoke(&wrong_token, rig.sleep("call-2", 0)))
        .await
        .unwrap_err();
    assert!(
        matches!(error, InvokeError::Refused { status: 401, .. }),
        "{error:?}"
    );
    assert!(rig.invoker.tracker().is_empty());
    assert_eq!(rig.invoker.pending(), 0);
    let error = within(rig.invoker.invoke(&rig.target, rig.sleep("a b", 0)))
        .await
        .unwrap_err();
    assert!(matches!(error, InvokeError::InvalidId), "{error:?}");
    assert!(
        rig.stops.lock().unwrap().is_empty(),
        "nothing was cancelled"
    );
}
