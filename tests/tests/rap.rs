//! RAP tool cancellation over real HTTP on loopback: the tool-server router, process tools, the
//! notifier's fan-out and the runtime's call tracker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use cancelkit::rap::{
    self, CallTracker, Notifier, ToolCall, ToolError, ToolOutput, ToolServer, ToolServerTarget,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "s3cret";

/// The process tool's grace period between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(1500);

/// Serves `router` on a fresh loopback port (with client addresses, for the rate limit).
async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Collects the `tool_result`s posted to it.
#[derive(Clone, Default)]
struct Callbacks(Arc<Mutex<Vec<Value>>>);

impl Callbacks {
    async fn start(&self) -> String {
        let router = axum::Router::new()
            .route(
                "/results",
                post(|State(seen): State<Callbacks>, axum::Json(result): axum::Json<Value>| async move {
                    seen.0.lock().unwrap().push(result);
                }),
            )
            .with_state(self.clone());
        format!("http://{}/results", serve(router).await)
    }

    fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    async fn wait_for(&self, count: usize) -> Vec<Value> {
        for _ in 0..500 {
            if self.all().len() >= count {
                return self.all();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {count} results, got {:?}", self.all());
    }
}

/// A tool server with `echo` (instant), `sleep` (cancellable, async) and `run` (a shell script
/// as a process tool).
fn tool_server(
    builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder,
) -> ToolServer {
    let base = ToolServer::builder("test-tools")
        .bearer_token(TOKEN)
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
            |args: Value, call: ToolCall| sleep_tool(args, call),
        )
        .operation(
            "panic",
            "Has a bug",
            json!({"type": "object"}),
            |_args: Value, _call: ToolCall| async move {
                if true {
                    panic!("tool bug");
                }
                Ok(ToolOutput::from("unreachable"))
            },
        )
        .operation(
            "run",
            "Runs a shell script",
            json!({"type": "object"}),
            |args: Value, _call: ToolCall| async move {
                let mut command = tokio::process::Command::new("sh");
                command
                    .arg("-c")
                    .arg(args["script"].as_str().unwrap_or("true"));
                let output = rap::process::run(command, GRACE).await?;
                Ok(ToolOutput::Text(output.stdout))
            },
        );
    builder(base).build()
}

#[cancelkit::cancellable]
async fn sleep_tool(args: Value, call: ToolCall) -> Result<ToolOutput, ToolError> {
    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
    Ok(ToolOutput::Text(format!("{} slept", call.tool_call_id)))
}

struct Rig {
    base: String,
    server: ToolServer,
    callbacks: Callbacks,
    callback_url: String,
    http: reqwest::Client,
}

async fn rig(builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder) -> Rig {
    let server = tool_server(builder);
    let base = format!("http://{}", serve(server.router()).await);
    let callbacks = Callbacks::default();
    let callback_url = callbacks.start().await;
    Rig {
        base,
        server,
        callbacks,
        callback_url,
        http: reqwest::Client::new(),
    }
}

impl Rig {
    async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> (u16, String) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn invoke(&self, operation: &str, id: &str, arguments: Value) -> u16 {
        let body = json!({
            "operation": operation, "arguments": arguments, "id": id, "call_id": format!("c-{id}"),
            "callback_url": self.callback_url, "group_id": "thread_1",
        });
        self.post("/invoke", Some(TOKEN), body.to_string()).await.0
    }

    async fn cancel(&self, thread: &str, call: &str) -> (u16, String) {
        let body = json!({"thread_id": thread, "tool_call_id": call});
        self.post("/cancel_tool_call", Some(TOKEN), body.to_string())
            .await
    }

    async fn wait_running(&self, n: usize) {
        for _ in 0..500 {
            if self.server.running() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("expected {n} running calls, have {}", self.server.running());
    }
}

/// Kills what is left of a process group when a test fails half-way.
struct KillGroup(i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{}", self.0)])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Processes (not zombies) whose process group is `pgid`, from /proc.
fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ... ; comm may contain spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            members.push(pid);
        }
    }
    members
}

/// Runs `prelude` then two background sleeps in a process tool, cancels it, and checks that
/// the whole group is gone, its directory removed and no result sent; returns how long the
/// group took to disappear after the cancel.
async fn cancel_process_group(prelude: &str) -> Duration {
    let r = rig(|b| b).await;
    let marker = tempfile::NamedTempFile::new().unwrap();
    let marker_path = marker.path().to_str().unwrap().to_owned();
    let script = format!(
        "{prelude} sleep 300 & sleep 300 & touch inside && printf '%s %s' \"$$\" \"$PWD\" > {marker_path}.ready && mv {marker_path}.ready {marker_path}; wait"
    );
    std::fs::remove_file(&marker_path).unwrap();
    assert_eq!(
        r.invoke("run", "call_proc", json!({"script": script}))
            .await,
        200
    );
    let (pgid, dir) = loop {
        if let Ok(text) = std::fs::read_to_string(&marker_path)
            && let Some((pid, dir)) = text.split_once(' ')
        {
            break (pid.parse::<i32>().unwrap(), dir.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _cleanup = KillGroup(pgid);
    assert!(
        live_group_members(pgid).len() >= 3,
        "the shell and its two sleeps run"
    );
    assert!(std::path::Path::new(&dir).join("inside").exists());

    let cancelled = Instant::now();
    assert_eq!(
        r.cancel("thread_1", "call_proc").await,
        (200, String::new())
    );
    r.wait_running(0).await;
    for _ in 0..500 {
        if live_group_members(pgid).is_empty() && !std::path::Path::new(&dir).exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group is left"
    );
    assert!(
        !std::path::Path::new(&dir).exists(),
        "the call's temporary directory is gone"
    );
    let took = cancelled.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        r.callbacks.all(),
        Vec::<Value>::new(),
        "no result after the cancel"
    );
    let _ = std::fs::remove_file(&marker_path);
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_terminates_the_process_group_removes_its_directory_and_sends_no_result() {
    let took = cancel_process_group("").await;
    assert!(
        took < Duration::from_millis(300),
        "SIGTERM was enough: {took:?}"
    );
}

/// A group that ignores SIGTERM is killed with SIGKILL once the grace period (300 ms) is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_is_killed_after_the_grace_period() {
    let took = cancel_process_group("trap '' TERM;").await;
    assert!(
        took >= Duration::from_millis(300),
        "waited for the grace period: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_posts_its_result_with_the_call_id() {
    let r = rig(|b| b).await;
    assert_eq!(
        r.invoke("echo", "call_1", json!({"text": "hello"})).await,
        200
    );
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_1", "call_id": "c-call_1", "text": "hello"})
    );
    // The process tool's output comes back the same way, and its directory is removed.
    assert_eq!(
        r.invoke("run", "call_2", json!({"script": "pwd"})).await,
        200
    );
    let results = r.callbacks.wait_for(2).await;
    let dir = results[1]["text"].as_str().unwrap().trim().to_owned();
    assert!(dir.contains("cancelkit-tool-"), "{dir}");
    assert!(!std::path::Path::new(&dir).exists());
}

/// A tool that panics is reported as a failed call and leaves nothing running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_reports_an_error_result() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("panic", "call_p", json!({})).await, 200);
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["text"], "the tool panicked");
    r.wait_running(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_endpoint_never_reveals_call_state() {
    let r = rig(|b| b).await;
    assert_eq!(
        r.invoke("sleep", "call_s", json!({"ms": 60_000})).await,
        200
    );
    r.wait_running(1).await;
    // Running, duplicate, unknown, invalid ids, malformed body: all the same empty 200.
    let answers = vec![
        r.cancel("thread_1", "call_s").await,
        r.cancel("thread_1", "call_s").await,
        r.cancel("thread_1", "call_404").await,
        r.cancel("thread 1", "call_s").await,
        r.cancel("thread_1", &"x".repeat(300)).await,
        r.cancel("../../etc", "call_s").await,
        r.post("/cancel_tool_call", Some(TOKEN), "{not json").await,
        r.post("/cancel_tool_call", Some(TOKEN), r#"{"thread_id": 1}"#)
            .await,
    ];
    for answer in answers {
        assert_eq!(answer, (200, String::new()));
    }
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(r.callbacks.all(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_ids_cancel_nothing() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("sleep", "call_v", json!({"ms": 200})).await, 200);
    r.wait_running(1).await;
    assert_eq!(r.cancel("thread_1 ", "call_v").await, (200, String::new()));
    assert_eq!(r.cancel("thread_1", "call_v\n").await, (200, String::new()));
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(
        results[0]["text"], "call_v slept",
        "the call ran to completion"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_result_delivers_at_most_one_result() {
    let r = rig(|b| b.rate_limit(10_000, 10_000)).await;
    for i in 0..20 {
        let id = format!("race_{i}");
        assert_eq!(r.invoke("sleep", &id, json!({"ms": i % 4})).await, 200);
        assert_eq!(r.cancel("thread_1", &id).await, (200, String::new()));
    }
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let results = r.callbacks.all();
    let mut ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "no call delivered twice: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_rate_limit_and_body_limit() {
    let r = rig(|b| b.rate_limit(1, 3).body_limit(1024)).await;
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    assert_eq!(r.post("/cancel_tool_call", None, body.clone()).await.0, 401);
    assert_eq!(
        r.post("/cancel_tool_call", Some("wrong"), body.clone())
            .await
            .0,
        401
    );
    assert_eq!(r.post("/invoke", None, "{}").await.0, 401);
    // The limit counts authenticated requests only: three pass, the fourth is refused.
    for _ in 0..3 {
        assert_eq!(
            r.post("/cancel_tool_call", Some(TOKEN), body.clone())
                .await
                .0,
            200
        );
    }
    assert_eq!(
        r.post("/cancel_tool_call", Some(TOKEN), body.clone())
            .await
            .0,
        429
    );

    let r = rig(|b| b.body_limit(1024)).await;
    let huge = json!({"thread_id": "t", "tool_call_id": "x".repeat(4096)}).to_string();
    assert_eq!(
        r.post("/cancel_tool_call", Some(TOKEN), huge.clone())
            .await
            .0,
        413
    );
    assert_eq!(r.post("/invoke", Some(TOKEN), huge).await.0, 413);
    assert_eq!(r.cancel("t", "c").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_validates_and_the_toolset_lists_operations() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("nope", "call_1", json!({})).await, 400);
    assert_eq!(r.invoke("echo", "bad id", json!({})).await, 400);
    assert_eq!(r.post("/invoke", Some(TOKEN), "{}").await.0, 400);
    assert_eq!(r.invoke("sleep", "dup", json!({"ms": 60_000})).await, 200);
    assert_eq!(r.invoke("sleep", "dup", json!({"ms": 60_000})).await, 409);
    let toolset: Value = reqwest::get(format!("{}/.well-known/rap-toolset", r.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = toolset["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "panic", "run", "sleep"]);
    assert_eq!(toolset["name"], "test-tools");
}

/// A server that counts the cancellations it receives and answers each after `delay`.
async fn counting_server(delay: Duration) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<Instant>>>) {
    let count = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(Mutex::new(Vec::new()));
    let (c, a) = (count.clone(), answered.clone());
    let router = axum::Router::new().route(
        "/cancel_tool_call",
        post(move || {
            let (c, a) = (c.clone(), a.clone());
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                a.lock().unwrap().push(Instant::now());
            }
        }),
    );
    (format!("http://{}", serve(router).await), count, answered)
}

/// Accepts connections and never answers; counts connections.
async fn silent_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (format!("http://{addr}"), connections)
}

/// A loopback address where nothing listens.
async fn refusing_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_to_fifty_servers_is_concurrent_and_never_retried() {
    let mut targets = Vec::new();
    let mut live = Vec::new();
    for _ in 0..35 {
        let (url, count, answered) = counting_server(Duration::from_millis(300)).await;
        targets.push(ToolServerTarget::new(url));
        live.push((count, answered));
    }
    let mut silent = Vec::new();
    for _ in 0..10 {
        let (url, connections) = silent_server().await;
        targets.push(ToolServerTarget::new(url));
        silent.push(connections);
    }
    for _ in 0..5 {
        targets.push(ToolServerTarget::new(refusing_server().await));
    }
    let notifier = Notifier::new(targets, Duration::from_millis(800));

    let started = Instant::now();
    let handle = notifier.notify("thread_1", "call_1");
    let returned = Instant::now();
    assert!(
        returned - started < Duration::from_millis(50),
        "notify returns at once"
    );
    let outcomes = handle.outcomes().await;
    let earliest_answer = live
        .iter()
        .flat_map(|(_, a)| a.lock().unwrap().clone())
        .min()
        .unwrap();
    assert!(
        returned < earliest_answer,
        "notify returned before any server answered"
    );
    assert_eq!(outcomes.len(), 50);
    assert_eq!(outcomes.iter().filter(|d| d.outcome == Ok(200)).count(), 35);
    assert_eq!(outcomes.iter().filter(|d| d.outcome.is_err()).count(), 15);
    // All at once: the whole fan-out took about one timeout, not fifty.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // Wait past every timeout: each live server got exactly one notification, nobody retried.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for (count, _) in &live {
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }
    for connections in &silent {
        assert!(connections.load(Ordering::SeqCst) <= 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_injects_interrupted_and_drops_late_results() {
    let r = rig(|b| b).await;
    let notifier = Notifier::new(
        [ToolServerTarget::new(r.base.clone()).with_bearer_token(TOKEN)],
        Duration::from_secs(2),
    );
    let tracker = CallTracker::new(Some(notifier));
    tracker.start("thread_1", "call_t");
    assert_eq!(
        r.invoke("sleep", "call_t", json!({"ms": 60_000})).await,
        200
    );
    r.wait_running(1).await;
    let interrupted = tracker
        .cancel("thread_1", "call_t")
        .expect("a running call");
    assert_eq!(interrupted["text"], "interrupted");
    assert_eq!(interrupted["is_error"], true);
    r.wait_running(0).await; // the notification reached the server and stopped the call
    assert!(
        tracker.cancel("thread_1", "call_t").is_none(),
        "cancelling twice does nothing"
    );
    let late =
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_t", "text": "too late"});
    assert!(
        tracker.deliver(late).is_none(),
        "a result after the cancel is dropped"
    );

    tracker.start("thread_1", "call_ok");
    let on_time =
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_ok", "text": "fine"});
    assert_eq!(tracker.deliver(on_time.clone()), Some(on_time.clone()));
    assert!(
        tracker.deliver(on_time).is_none(),
        "a second result is dropped"
    );
    assert!(
        tracker
            .deliver(json!({"group_id": "x", "id": "y"}))
            .is_none()
    );
}

/// The example pair works as its docs say.
#[test]
fn the_rap_example_pair_cancels_a_process_tool() {
    cancelkit_tests::example_with_features("rap_tool_server", &["rap"]);
    let runtime = cancelkit_tests::example_with_features("rap_runtime", &["rap"]);
    let output = std::process::Command::new(runtime).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("invoked `run` (a 30 s script): HTTP 200 OK"),
        "{stdout}"
    );
    assert!(
        stdout.contains("recorded \"interrupted\" at once"),
        "{stdout}"
    );
    assert!(
        stdout.contains("real results received for the cancelled call: 0"),
        "{stdout}"
    );
    assert!(stdout.contains("is gone"), "{stdout}");
}
