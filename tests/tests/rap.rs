//! RAP tool cancellation over real HTTP on loopback: the tool-server router, process tools, the
//! notifier's fan-out and the runtime's call tracker. (The `rap` module is Unix only.)

#![cfg(unix)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use cancelkit::rap::process::{self, ProcessError, RunOptions};
use cancelkit::rap::{
    self, CallTracker, ClientKey, Notifier, ToolCall, ToolError, ToolOutput, ToolServer,
    ToolServerTarget,
};
use cancelkit::{CancelReason, Scope};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

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

/// The `scheme://host:port` of a URL.
fn origin_of(url: &str) -> String {
    let url = reqwest::Url::parse(url).unwrap();
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap()
    )
}

/// A tool server (allowing its callback server's origin) and a callback server, on loopback.
async fn rig(builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder) -> Rig {
    let callbacks = Callbacks::default();
    let callback_url = callbacks.start().await;
    let origin = origin_of(&callback_url);
    let server = tool_server(|b| builder(b.allow_callback_origin(&origin).unwrap()));
    let base = format!("http://{}", serve(server.router()).await);
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

    /// `/invoke` with a callback URL of our choosing.
    async fn invoke_to(
        &self,
        operation: &str,
        id: &str,
        arguments: &Value,
        callback_url: &str,
    ) -> (u16, String) {
        let body = json!({
            "operation": operation, "arguments": arguments, "id": id,
            "callback_url": callback_url, "group_id": "thread_1",
        });
        self.post("/invoke", Some(TOKEN), body.to_string()).await
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

/// When a cancelled process group was seen, counted from just before the cancel was sent.
struct Stopped {
    /// The last time a process of the group was seen running.
    last_seen_alive: Duration,
    /// The first time no process of the group was running and its directory was gone.
    gone: Duration,
}

/// Runs `prelude` then two background sleeps in a process tool, cancels it, and checks that
/// the whole group is gone, its directory removed and no result sent; returns when the group
/// was last seen and when it was gone.
async fn cancel_process_group(prelude: &str) -> Stopped {
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
    assert!(Path::new(&dir).join("inside").exists());

    let cancelled = Instant::now();
    assert_eq!(
        r.cancel("thread_1", "call_proc").await,
        (200, String::new())
    );
    let mut last_seen_alive = Duration::ZERO;
    let mut gone = None;
    while cancelled.elapsed() < Duration::from_secs(10) {
        let seen = Instant::now();
        if live_group_members(pgid).is_empty() {
            if !Path::new(&dir).exists() {
                gone = Some(seen - cancelled);
                break;
            }
        } else {
            last_seen_alive = seen - cancelled;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group is left"
    );
    assert!(
        !Path::new(&dir).exists(),
        "the call's temporary directory is gone"
    );
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        r.callbacks.all(),
        Vec::<Value>::new(),
        "no result after the cancel"
    );
    let _ = std::fs::remove_file(&marker_path);
    Stopped {
        last_seen_alive,
        gone: gone.expect("checked above"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_terminates_the_process_group_removes_its_directory_and_sends_no_result() {
    let stopped = cancel_process_group("").await;
    assert!(
        stopped.gone < Duration::from_millis(300),
        "SIGTERM was enough: gone after {:?}",
        stopped.gone
    );
}

/// A group that ignores SIGTERM outlives the SIGTERM and is killed with SIGKILL once the grace
/// period is over, not long after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_is_killed_after_the_grace_period() {
    let stopped = cancel_process_group("trap '' TERM;").await;
    // The cancel reaches the server after `cancelled`, so its SIGKILL comes at GRACE or later;
    // polling /proc, we saw the group running until shortly before that.
    assert!(
        stopped.last_seen_alive >= GRACE * 3 / 4,
        "SIGTERM alone did not stop it: last seen running {:?} after the cancel",
        stopped.last_seen_alive
    );
    assert!(
        stopped.gone >= GRACE,
        "killed only after the grace period: gone after {:?}",
        stopped.gone
    );
    assert!(
        stopped.gone <= GRACE + Duration::from_millis(1000),
        "killed soon after the grace period: gone after {:?}",
        stopped.gone
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
    assert!(!Path::new(&dir).exists());
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

/// What became of each call of the `gate` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Waiting for its gate to open.
    Waiting,
    /// Its gate opened and it returned its result.
    Finished,
    /// Stopped (its future dropped) before its gate opened.
    Stopped,
}

/// The `gate` tool's calls wait until the test opens their gate, and record their fate.
#[derive(Clone, Default)]
struct Gates {
    gates: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    fates: Arc<Mutex<HashMap<String, Fate>>>,
}

impl Gates {
    fn gate(&self, id: &str) -> Arc<Notify> {
        self.gates
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    fn open(&self, id: &str) {
        self.gate(id).notify_one(); // kept as a permit if the call is not waiting yet
    }

    fn fate(&self, id: &str) -> Option<Fate> {
        self.fates.lock().unwrap().get(id).copied()
    }

    async fn wait_fate(&self, id: &str, fate: Fate) {
        for _ in 0..500 {
            if self.fate(id) == Some(fate) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{id}: expected {fate:?}, is {:?}", self.fate(id));
    }

    /// Adds the `gate` operation to a tool server.
    fn tool(&self, builder: rap::ToolServerBuilder) -> rap::ToolServerBuilder {
        let gates = self.clone();
        builder.operation(
            "gate",
            "Waits until the test opens its gate",
            json!({"type": "object"}),
            move |_args: Value, call: ToolCall| {
                let gates = gates.clone();
                async move {
                    /// Records `Stopped` if dropped before the gate opened.
                    struct Record(Gates, String, bool);
                    impl Drop for Record {
                        fn drop(&mut self) {
                            let fate = if self.2 {
                                Fate::Finished
                            } else {
                                Fate::Stopped
                            };
                            self.0.fates.lock().unwrap().insert(self.1.clone(), fate);
                        }
                    }
                    let id = call.tool_call_id;
                    let gate = gates.gate(&id);
                    gates
                        .fates
                        .lock()
                        .unwrap()
                        .insert(id.clone(), Fate::Waiting);
                    let mut record = Record(gates, id, false);
                    gate.notified().await;
                    record.2 = true;
                    Ok(ToolOutput::from("released"))
                }
            },
        )
    }
}

/// A cancel and a result for the same call: the cancel stops a call that has not finished, it
/// comes too late for one that has, and a call never delivers more than one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_result_delivers_at_most_one_result() {
    let gates = Gates::default();
    let r = rig(|b| gates.tool(b.rate_limit(10_000, 10_000))).await;
    let results_for = |id: &str| {
        r.callbacks
            .all()
            .into_iter()
            .filter(|result| result["id"] == id)
            .count()
    };

    // The cancel wins: the waiting tool is stopped, and opening its gate afterwards posts
    // nothing.
    for i in 0..5 {
        let id = format!("cancel_wins_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        assert_eq!(r.cancel("thread_1", &id).await, (200, String::new()));
        gates.wait_fate(&id, Fate::Stopped).await;
        gates.open(&id);
    }
    r.wait_running(0).await;

    // The result wins: the tool finishes and posts its result; the late cancel changes nothing.
    for i in 0..5 {
        let id = format!("result_wins_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        gates.open(&id);
        gates.wait_fate(&id, Fate::Finished).await;
        for _ in 0..500 {
            if results_for(&id) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(r.cancel("thread_1", &id).await, (200, String::new()));
    }

    // A real race: the gate opens while the cancel is on its way. Either branch may win, but
    // the call's fate and its result agree.
    let mut races = Vec::new();
    for i in 0..20 {
        let id = format!("race_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        let open_after = Duration::from_micros(250 * (i % 8));
        tokio::join!(r.cancel("thread_1", &id), async {
            tokio::time::sleep(open_after).await;
            gates.open(&id);
        });
        races.push(id);
    }
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    for i in 0..5 {
        let id = format!("cancel_wins_{i}");
        assert_eq!(gates.fate(&id), Some(Fate::Stopped), "{id}");
        assert_eq!(results_for(&id), 0, "{id}: no result after the cancel won");
        let id = format!("result_wins_{i}");
        assert_eq!(gates.fate(&id), Some(Fate::Finished), "{id}");
        assert_eq!(results_for(&id), 1, "{id}: exactly one result");
    }
    let (mut stopped, mut delivered, mut held_back) = (0, 0, 0);
    for id in &races {
        match (gates.fate(id), results_for(id)) {
            (Some(Fate::Stopped), 0) => stopped += 1,
            (Some(Fate::Finished), 1) => delivered += 1,
            // Finished just as the cancel arrived: the server holds the result back.
            (Some(Fate::Finished), 0) => held_back += 1,
            (fate, results) => panic!("{id}: {fate:?} with {results} results"),
        }
    }
    eprintln!("races: {stopped} stopped, {delivered} delivered, {held_back} held back");
    assert_eq!(stopped + delivered + held_back, races.len());
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
    // The limit comes before authentication: three refused attempts spent the burst, so even
    // the right token is now refused, and guessing goes on being throttled.
    for token in [Some(TOKEN), Some("wrong"), None] {
        assert_eq!(
            r.post("/cancel_tool_call", token, body.clone()).await.0,
            429,
            "{token:?}"
        );
    }

    let r = rig(|b| b.rate_limit(1, 3)).await;
    for _ in 0..3 {
        assert_eq!(r.cancel("t", "c").await.0, 200);
    }
    assert_eq!(r.cancel("t", "c").await.0, 429);

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

/// Serves `router` on loopback without client addresses (no `ConnectInfo`).
async fn serve_without_addresses(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// Without `ConnectInfo` the default client key refuses requests instead of pooling every
/// client in one bucket; the other keys are explicit choices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_client_addresses_refuses_instead_of_sharing_one_bucket() {
    let http = reqwest::Client::new();
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    let cancel = |base: &str, forwarded_for: Option<&str>| {
        let mut request = http
            .post(format!("{base}/cancel_tool_call"))
            .bearer_auth(TOKEN)
            .body(body.clone());
        if let Some(address) = forwarded_for {
            request = request.header("x-forwarded-for", address);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };

    let base = serve_without_addresses(tool_server(|b| b).router()).await;
    for _ in 0..3 {
        let (status, text) = cancel(&base, None).await;
        assert_eq!(status, 500);
        assert!(text.contains("cannot identify the client"), "{text}");
    }

    // A trusted proxy's header: one bucket per forwarded address; no header, no service.
    let server = tool_server(|b| {
        b.rate_limit(1, 2)
            .client_key(ClientKey::TrustedHeader("x-forwarded-for".parse().unwrap()))
    });
    let base = serve_without_addresses(server.router()).await;
    for _ in 0..2 {
        assert_eq!(cancel(&base, Some("198.51.100.1, 192.0.2.1")).await.0, 200);
    }
    assert_eq!(cancel(&base, Some("192.0.2.1")).await.0, 429);
    assert_eq!(cancel(&base, Some("192.0.2.2")).await.0, 200);
    assert_eq!(server.rate_limited_clients(), 2);
    assert_eq!(cancel(&base, None).await.0, 500);
    assert_eq!(cancel(&base, Some("not an address")).await.0, 500);

    // One shared bucket, chosen on purpose.
    let server = tool_server(|b| b.rate_limit(1, 2).client_key(ClientKey::Shared));
    let base = serve_without_addresses(server.router()).await;
    assert_eq!(cancel(&base, Some("192.0.2.1")).await.0, 200);
    assert_eq!(cancel(&base, Some("192.0.2.2")).await.0, 200);
    assert_eq!(cancel(&base, None).await.0, 429);
}

/// A `callback_url` outside the allow-list is refused with 400 before the tool runs; the
/// default allows none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_urls_off_the_allow_list_are_refused_before_anything_runs() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let arguments = json!({ "script": script });

    // The default: no origin allowed, not even loopback.
    let callbacks = Callbacks::default();
    let callback_url = callbacks.start().await;
    let server = tool_server(|b| b);
    let r = Rig {
        base: format!("http://{}", serve(server.router()).await),
        server,
        callbacks,
        callback_url: callback_url.clone(),
        http: reqwest::Client::new(),
    };
    let (status, text) = r
        .invoke_to("run", "call_default", &arguments, &callback_url)
        .await;
    assert_eq!(
        (status, text.contains("allowed origin")),
        (400, true),
        "{text}"
    );

    // Only the configured origin, exactly.
    let r = rig(|b| b).await;
    let port = reqwest::Url::parse(&r.callback_url)
        .unwrap()
        .port()
        .unwrap();
    for refused in [
        format!("http://127.0.0.1:{}/results", port + 1),
        format!("https://127.0.0.1:{port}/results"),
        format!("http://localhost:{port}/results"),
        format!("http://127.0.0.2:{port}/results"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "file:///etc/passwd".to_owned(),
        "results".to_owned(),
    ] {
        assert_eq!(
            r.invoke_to("run", "call_refused", &arguments, &refused)
                .await
                .0,
            400,
            "{refused}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.server.running(), 0);
    assert!(!marker.exists(), "no refused invocation ran its tool");
    assert_eq!(r.callbacks.all(), Vec::<Value>::new());

    // The allowed origin, any path.
    let elsewhere = format!("http://127.0.0.1:{port}/results?from=tools");
    assert_eq!(
        r.invoke_to("run", "call_allowed", &arguments, &elsewhere)
            .await
            .0,
        200
    );
    assert_eq!(r.callbacks.wait_for(1).await[0]["id"], "call_allowed");
    assert!(marker.exists());
}

/// A callback that answers with a redirect does not send the result anywhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_callback_is_not_followed() {
    let elsewhere = Callbacks::default();
    let elsewhere_url = elsewhere.start().await;
    let redirect = axum::Router::new().route(
        "/results",
        post(move || {
            let to = elsewhere_url.clone();
            async move { axum::response::Redirect::temporary(&to) }
        }),
    );
    let redirect_url = format!("http://{}/results", serve(redirect).await);
    let origin = origin_of(&redirect_url);
    let server = tool_server(|b| b.allow_callback_origin(&origin).unwrap());
    let r = Rig {
        base: format!("http://{}", serve(server.router()).await),
        server,
        callbacks: Callbacks::default(),
        callback_url: redirect_url,
        http: reqwest::Client::new(),
    };
    assert_eq!(r.invoke("echo", "call_r", json!({"text": "hi"})).await, 200);
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(elsewhere.all(), Vec::<Value>::new());
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
    tracker.start("thread_1", "call_t").unwrap();
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

    tracker.start("thread_1", "call_ok").unwrap();
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
    assert_eq!(tracker.len(), 1, "only the cancelled call is remembered");
}

/// Runs a process tool in a cancellable scope of its own.
fn spawn_process(
    command: tokio::process::Command,
    options: RunOptions,
) -> (
    tokio::task::JoinHandle<Result<process::ProcessOutput, ProcessError>>,
    cancelkit::Canceller,
) {
    let (scope, canceller) = Scope::root();
    let task = tokio::spawn(scope.run(process::run_with(command, options)));
    (task, canceller)
}

/// A `sh` command running `script`, with `vars` in its environment.
fn shell(script: &str, vars: &[(&str, &Path)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(script);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

async fn wait_for_file(path: &Path) {
    for _ in 0..1000 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} never appeared", path.display());
}

/// Whether `pid` is a running process (not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// The leader exits at SIGTERM, a member needs half a second to clean up: the member gets it,
/// because the grace period is the group's, not the leader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_keep_the_grace_period_when_the_leader_exits_first() {
    let marks = tempfile::tempdir().unwrap();
    let (ready, cleaned) = (marks.path().join("ready"), marks.path().join("cleaned"));
    let script = r#"
        cleanup() { sleep 0.5; echo cleaned > "$CLEANED"; exit 0; }
        ( trap cleanup TERM; touch "$READY"; while :; do sleep 0.05; done ) &
        wait
    "#;
    let command = shell(script, &[("READY", &ready), ("CLEANED", &cleaned)]);
    let (task, canceller) = spawn_process(command, RunOptions::new(GRACE));
    wait_for_file(&ready).await;
    let cancelled = Instant::now();
    canceller.cancel(CancelReason::Peer(None));
    let outcome = task.await.unwrap();
    let took = cancelled.elapsed();
    assert!(
        matches!(outcome, Err(ProcessError::Cancelled(_))),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&cleaned).ok().as_deref(),
        Some("cleaned\n"),
        "the member finished its cleanup (the group was stopped after {took:?})"
    );
    assert!(
        took < GRACE,
        "the group exited by itself within the grace period: {took:?}"
    );
}

/// Processes the leader leaves behind when it exits normally are stopped (SIGTERM) while its
/// directory still exists, and the call returns even if they hold its output open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_normal_exit_are_stopped_before_the_directory_goes() {
    let marks = tempfile::tempdir().unwrap();
    let (ready, verdict, pid_file, dir_file) = (
        marks.path().join("ready"),
        marks.path().join("verdict"),
        marks.path().join("pid"),
        marks.path().join("dir"),
    );
    // The member reports, when it gets SIGTERM, whether the call's directory still exists.
    let script = r#"
        DIR=$PWD; export DIR
        sh -c 'trap "if [ -d \"\$DIR\" ]; then echo present; else echo gone; fi > \"\$VERDICT\"; exit 0" TERM
               touch "$READY"; while :; do sleep 0.05; done' >/dev/null 2>&1 &
        echo $! > "$PID_FILE"; echo "$DIR" > "$DIR_FILE"
        while [ ! -e "$READY" ]; do sleep 0.01; done
        echo hello
    "#;
    let vars = [
        ("READY", ready.as_path()),
        ("VERDICT", &verdict),
        ("PID_FILE", &pid_file),
        ("DIR_FILE", &dir_file),
    ];
    let (task, _canceller) = spawn_process(shell(script, &vars), RunOptions::new(GRACE));
    let output = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the call returns")
        .unwrap()
        .unwrap();
    let member: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _cleanup = KillGroup(member);
    assert_eq!(output.stdout, "hello\n");
    assert!(output.status.success());
    assert_eq!(
        std::fs::read_to_string(&verdict).ok().as_deref(),
        Some("present\n"),
        "the member was stopped while the directory existed"
    );
    assert!(!running(member), "the member is gone");
    let dir = std::fs::read_to_string(&dir_file).unwrap();
    assert!(!Path::new(dir.trim()).exists(), "the directory is gone");

    // A member that keeps the output pipe open does not hold the call up.
    let script = "sleep 300 & echo started";
    let started = Instant::now();
    let (task, _canceller) = spawn_process(shell(script, &[]), RunOptions::new(GRACE));
    let output = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the call returns although `sleep 300` holds its stdout")
        .unwrap()
        .unwrap();
    assert_eq!(output.stdout, "started\n");
    assert!(started.elapsed() < GRACE, "SIGTERM stopped the sleep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_output_is_capped_with_a_marker() {
    let script = "head -c 300000 /dev/zero | tr '\\0' a; echo oops >&2; head -c 5000 /dev/zero | tr '\\0' e >&2";
    let options = RunOptions::new(GRACE).output_limit(1000);
    let (task, _canceller) = spawn_process(shell(script, &[]), options.clone());
    let output = task.await.unwrap().unwrap();
    assert!(output.status.success(), "the process was never blocked");
    assert_eq!(
        output.stdout,
        format!(
            "{}\n[... output truncated after 1000 bytes]",
            "a".repeat(1000)
        )
    );
    assert_eq!(
        output.stderr,
        format!(
            "oops\n{}\n[... output truncated after 1000 bytes]",
            "e".repeat(995)
        )
    );
    // Under the limit nothing is added.
    let (task, _canceller) = spawn_process(shell("printf 0123456789", &[]), options);
    assert_eq!(task.await.unwrap().unwrap().stdout, "0123456789");
    // And the default limit is 1 MiB.
    let script = "head -c 1100000 /dev/zero | tr '\\0' b";
    let (task, _canceller) = spawn_process(shell(script, &[]), RunOptions::new(GRACE));
    let stdout = task.await.unwrap().unwrap().stdout;
    assert!(
        stdout.ends_with("\n[... output truncated after 1048576 bytes]"),
        "{}",
        &stdout[stdout.len() - 60..]
    );
}

/// Removing a call's directory (here 20,000 files, on tmpfs so that creating them is quick)
/// happens off the runtime's thread: a single-threaded runtime keeps running its other tasks
/// meanwhile.
#[test]
fn the_directory_is_removed_off_the_runtime_thread() {
    const FILES: usize = 20_000;
    let root = tempfile::tempdir_in("/dev/shm").expect("a tmpfs at /dev/shm");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (output, longest_gap) = runtime.block_on(async {
        let ticks = Arc::new(Mutex::new(Vec::new()));
        let ticker = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    ticks.lock().unwrap().push(Instant::now());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
        let script = format!("mkdir many && cd many && seq 1 {FILES} | xargs touch && pwd");
        let options = RunOptions::new(GRACE).temp_root(root.path());
        let output = process::run_with(shell(&script, &[]), options)
            .await
            .unwrap();
        // One more tick, after the end of the call: it measures a stall at the very end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        ticker.abort();
        let ticks = ticks.lock().unwrap().clone();
        let longest_gap = ticks.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        (output, longest_gap)
    });
    let dir = output.stdout.trim();
    assert!(dir.ends_with("/many"), "{dir}");
    assert!(!Path::new(dir).exists());

    // What removing such a tree costs on this machine, on this thread.
    let tree = tempfile::tempdir_in(root.path()).unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("seq 1 {FILES} | xargs touch"))
        .current_dir(tree.path())
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    tree.close().unwrap();
    let removal = started.elapsed();
    assert!(
        longest_gap < removal / 2,
        "the runtime stalled for {longest_gap:?}; removing the tree takes {removal:?}"
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
