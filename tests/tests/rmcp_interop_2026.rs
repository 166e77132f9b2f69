//! cancelkit against rmcp 3.9 at MCP 2026-07-28 (no handshake, per-request `_meta`), both
//! directions, over in-memory duplex pipes with a tap that records every line on the wire.
//!
//! - An rmcp client (`ClientLifecycleMode::Discover`, and `Auto`) against a cancelkit server
//!   speaking `McpRevision::Negotiated`: no `initialize`; every request stamped; a cancelled
//!   `#[cancellable]` tool is dropped and gets no response; our server never sends
//!   `notifications/cancelled`.
//! - The tasks extension with rmcp as the client: `call_tool_once` → a task handle,
//!   `cancel_task` → acknowledged, `get_task` → `cancelled`, our handler dropped.
//! - Our negotiated client against an rmcp server: `discover_or_initialize` picks 2026-07-28,
//!   our requests are stamped, and dropping an `OutgoingRequest` cancels the rmcp tool's token.
//! - Fallbacks: our client against an rmcp server pinned to 2025-11-25, and an rmcp `Auto`
//!   client against a cancelkit server fixed at 2025-11-25 without a `server/discover` route.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::mcp::schemars::JsonSchema;
use cancelkit::mcp::{Args, McpServer, TaskSupport, Tool};
use cancelkit::peer::{Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol};
use cancelkit::{CancellationToken, JsonRpcError, cancellable};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ClientCapabilities, ClientConfig, ClientRequest, ContentBlock, CreateTaskResult, ErrorData,
    GetTaskParams, GetTaskResult, Implementation, ProtocolVersion, TASKS_EXTENSION_ID,
    TaskAckResult, TaskPayload, TaskStatus,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::{
    ClientLifecycleMode, ClientServiceExt, RoleClient, ServerHandler, ServiceExt, schemars, tool,
    tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

const V2026: &str = "2026-07-28";
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

// ---------------------------------------------------------------------------------------------
// The wire tap.

/// Every JSON-RPC line that crossed the pipe, per direction.
#[derive(Clone, Default)]
struct Tap {
    to_server: Arc<Mutex<Vec<Value>>>,
    to_client: Arc<Mutex<Vec<Value>>>,
}

impl Tap {
    fn to_server(&self) -> Vec<Value> {
        self.to_server.lock().unwrap().clone()
    }

    fn to_client(&self) -> Vec<Value> {
        self.to_client.lock().unwrap().clone()
    }

    /// The requests the client sent (messages with both `method` and `id`).
    fn requests(&self) -> Vec<Value> {
        self.to_server()
            .into_iter()
            .filter(|m| m.get("method").is_some() && m.get("id").is_some())
            .collect()
    }

    /// The methods the client sent, requests and notifications, in order.
    fn client_methods(&self) -> Vec<String> {
        self.to_server()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_owned))
            .collect()
    }

    /// The first `n` methods the client sent, once it has sent that many (the tap forwards
    /// asynchronously, so a line just written may not be recorded yet).
    async fn first_methods(&self, n: usize) -> Vec<String> {
        for _ in 0..500 {
            let methods = self.client_methods();
            if methods.len() >= n {
                return methods[..n].to_vec();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "fewer than {n} methods on the wire: {:?}",
            self.client_methods()
        );
    }

    /// The server's responses to request `id`.
    fn responses_for(&self, id: &Value) -> Vec<Value> {
        self.to_client()
            .into_iter()
            .filter(|m| m.get("method").is_none() && &m["id"] == id)
            .collect()
    }

    /// The one response to the client's only request of `method` (or the last one).
    fn response_to(&self, method: &str) -> Value {
        let request = self
            .requests()
            .into_iter()
            .rfind(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("no {method} on the wire"));
        let responses = self.responses_for(&request["id"]);
        assert_eq!(
            responses.len(),
            1,
            "one response to {method}: {responses:?}"
        );
        responses.into_iter().next().unwrap()
    }

    /// The `notifications/cancelled` the server sent the client.
    fn cancels_to_client(&self) -> Vec<Value> {
        self.to_client()
            .into_iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .collect()
    }

    /// Every request the client sent carries 2026-07-28 `_meta`.
    fn assert_every_request_stamped(&self) {
        let requests = self.requests();
        assert!(!requests.is_empty());
        for request in &requests {
            let meta = &request["params"]["_meta"];
            assert_eq!(meta[VERSION_KEY], V2026, "not stamped: {request}");
            assert!(
                meta[CAPABILITIES_KEY].is_object(),
                "no capabilities: {request}"
            );
        }
    }

    /// No request the client sent after the legacy handshake carries a 2026-07-28 version.
    fn assert_no_request_stamped_after_initialize(&self) {
        let requests = self.requests();
        let start = requests
            .iter()
            .position(|m| m["method"] == "initialize")
            .expect("an initialize");
        for request in &requests[start..] {
            assert!(
                request["params"]["_meta"].get(VERSION_KEY).is_none(),
                "a legacy-era request stamped with 2026-07-28: {request}"
            );
        }
    }

    /// Waits until the client has sent a request matching `pick`; returns its id.
    async fn wait_for_request(&self, pick: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..500 {
            if let Some(request) = self.requests().into_iter().find(|m| pick(m)) {
                return request["id"].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no such request on the wire: {:?}", self.to_server());
    }
}

/// A pipe with a tap in the middle: (client end, server end, tap).
fn tapped_pipe() -> (DuplexStream, DuplexStream, Tap) {
    let (client, client_inner) = tokio::io::duplex(1 << 16);
    let (server_inner, server) = tokio::io::duplex(1 << 16);
    let tap = Tap::default();
    let (client_read, client_write) = tokio::io::split(client_inner);
    let (server_read, server_write) = tokio::io::split(server_inner);
    tokio::spawn(forward(
        client_read,
        server_write,
        Arc::clone(&tap.to_server),
    ));
    tokio::spawn(forward(
        server_read,
        client_write,
        Arc::clone(&tap.to_client),
    ));
    (client, server, tap)
}

async fn forward(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    seen: Arc<Mutex<Vec<Value>>>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON line on the wire ({e}): {line}"));
        seen.lock().unwrap().push(message);
        if to.write_all(format!("{line}\n").as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Prints the wire when the test fails, to show what actually crossed it.
struct DumpOnPanic(Tap);

impl Drop for DumpOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for message in self.0.to_server() {
                eprintln!("client → server: {message}");
            }
            for message in self.0.to_client() {
                eprintln!("server → client: {message}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events from tools (both sides): started / stopped (dropped unfinished) / finished.

type Events = mpsc::UnboundedSender<&'static str>;

struct DropGuard {
    events: Events,
    finished: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self
            .events
            .send(if self.finished { "finished" } else { "stopped" });
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a tool event within 5 s")
        .expect("the event channel is open")
}

// ---------------------------------------------------------------------------------------------
// Our server: the `mcp_server` example's shape, in-process, on `cancelkit::mcp`.

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    text: String,
}

async fn echo_tool(Args(EchoArgs { text }): Args<EchoArgs>) -> String {
    text
}

/// Tries to send the client `notifications/cancelled` (for a request the client never
/// received); says whether the runtime sent it.
async fn cancel_client_tool(cx: Context) -> String {
    let sent = cx
        .peer()
        .notify("notifications/cancelled", json!({"requestId": 99}))
        .await;
    match sent {
        Ok(()) => "sent".to_owned(),
        Err(refused) => format!("refused: {refused}"),
    }
}

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    #[serde(default = "thirty")]
    seconds: f64,
}

fn thirty() -> f64 {
    30.0
}

#[cancellable]
async fn slow(
    Args(SlowArgs { seconds }): Args<SlowArgs>,
    events: Events,
) -> Result<String, JsonRpcError> {
    let _ = events.send("started");
    let mut guard = DropGuard {
        events,
        finished: false,
    };
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    guard.finished = true;
    Ok("slept".into())
}

/// A cancelkit MCP server on `stream`; `slow` runs as a task for clients that declare the
/// tasks extension. Without `discover_route` the router has no `server/discover` route (the
/// runtime's own answer is under test). `cancel_client` is served but not listed.
fn our_server(
    revision: McpRevision,
    discover_route: bool,
    stream: DuplexStream,
) -> (Peer, mpsc::UnboundedReceiver<&'static str>) {
    let (events, rx) = mpsc::unbounded_channel();
    let server = McpServer::new("cancelkit-test-server", "0")
        .tool(Tool::new("echo", "Returns its text.", echo_tool))
        .tool(
            Tool::new(
                "slow",
                "Sleeps for the given number of seconds; cancellable.",
                move |args: Args<SlowArgs>| slow(args, events.clone()),
            )
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new(
                "cancel_client",
                "Tries to cancel a request of the client.",
                cancel_client_tool,
            )
            .unlisted(),
        );
    let mut builder = server.builder_for(revision);
    if !discover_route {
        builder = builder.router(server.router().remove("server/discover"));
    }
    let (read, write) = tokio::io::split(stream);
    (builder.connect(read, write), rx)
}

// ---------------------------------------------------------------------------------------------
// rmcp client → our server.

type RmcpClient<S> = RunningService<RoleClient, S>;

fn discover_mode() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn auto_mode() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap())
}

async fn echo<S: rmcp::Service<RoleClient>>(client: &RmcpClient<S>, text: &str) {
    let answer = client
        .call_tool(call("echo", json!({"text": text})))
        .await
        .expect("echo is answered");
    assert_eq!(answer.content[0].as_text().unwrap().text, text);
}

/// How the rmcp client gives up on a call.
#[derive(Clone, Copy)]
enum RmcpCancel {
    /// `RequestHandle::cancel(reason)`.
    Handle,
    /// Dropping the `call_tool` future (rmcp sends `notifications/cancelled` on drop).
    Drop,
}

/// Starts `slow` through rmcp, cancels it the given way once our handler runs; returns the
/// request id rmcp used.
async fn start_and_cancel_slow<S: rmcp::Service<RoleClient>>(
    client: &RmcpClient<S>,
    tap: &Tap,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    how: RmcpCancel,
) -> Value {
    match how {
        RmcpCancel::Handle => {
            let handle = client
                .peer()
                .send_request_with_option(
                    ClientRequest::CallToolRequest(CallToolRequest::new(call(
                        "slow",
                        json!({"seconds": 30}),
                    ))),
                    PeerRequestOptions::no_options(),
                )
                .await
                .expect("rmcp sends the call");
            assert_eq!(next(events).await, "started");
            let id = serde_json::to_value(&handle.id).unwrap();
            handle
                .cancel(Some("the user pressed stop".into()))
                .await
                .expect("rmcp sends the cancel");
            id
        }
        RmcpCancel::Drop => {
            let pending = client.call_tool(call("slow", json!({"seconds": 30})));
            tokio::select! {
                outcome = pending => panic!("the slow call finished: {outcome:?}"),
                event = next(events) => assert_eq!(event, "started"),
            }
            tap.wait_for_request(|m| m["params"]["arguments"]["seconds"] == 30)
                .await
        }
    }
}

/// Our handler for `id` was dropped, the cancel is on the wire, nothing answers `id`, the
/// connection still serves, and our server never sent `notifications/cancelled`.
async fn assert_cancelled_without_response<S: rmcp::Service<RoleClient>>(
    client: &RmcpClient<S>,
    tap: &Tap,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    id: &Value,
) {
    assert_eq!(next(events).await, "stopped", "our handler was dropped");
    assert!(
        tap.to_server()
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && &m["params"]["requestId"] == id),
        "rmcp sent notifications/cancelled for {id}"
    );
    echo(client, "after the cancel").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        tap.responses_for(id),
        Vec::<Value>::new(),
        "no response for the cancelled call"
    );
    assert_eq!(
        tap.cancels_to_client(),
        Vec::<Value>::new(),
        "a server sends no notifications/cancelled"
    );
}

async fn rmcp_modern_client_against_us(lifecycle: ClientLifecycleMode, how: RmcpCancel) {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::Negotiated, true, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), lifecycle)
            .await
            .expect("rmcp starts against our server");
    let info = client.peer_info().expect("rmcp knows the server");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("cancelkit-test-server")
    );

    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 2);
    echo(&client, "hello").await;
    // A 2026-07-28 server sends `notifications/cancelled` only to end `subscriptions/listen`:
    // our runtime refuses it to a handler rather than sending it.
    let refused = client
        .call_tool(call("cancel_client", json!({})))
        .await
        .expect("cancel_client is answered");
    let refused = &refused.content[0].as_text().unwrap().text;
    assert!(refused.starts_with("refused"), "{refused}");
    // `slow` is a task tool, but this client did not declare the tasks extension: a plain
    // result.
    let plain = client
        .call_tool(call("slow", json!({"seconds": 0})))
        .await
        .expect("slow without the tasks extension is answered as usual");
    assert_eq!(plain.content[0].as_text().unwrap().text, "slept");
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "finished");
    for method in ["server/discover", "tools/list", "tools/call"] {
        let answer = tap.response_to(method);
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    }

    let id = start_and_cancel_slow(&client, &tap, &mut events, how).await;
    assert_cancelled_without_response(&client, &tap, &mut events, &id).await;

    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "initialize" || m == "notifications/initialized" || m == "ping"),
        "no handshake at 2026-07-28: {:?}",
        tap.client_methods()
    );
    assert_eq!(tap.client_methods()[0], "server/discover");
    tap.assert_every_request_stamped();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_discover_client_cancelling_with_its_handle_drops_our_handler_unanswered() {
    rmcp_modern_client_against_us(discover_mode(), RmcpCancel::Handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_dropping_a_call_drops_our_handler_unanswered() {
    rmcp_modern_client_against_us(auto_mode(), RmcpCancel::Drop).await;
}

// ---------------------------------------------------------------------------------------------
// The tasks extension, rmcp as the client.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_tasks_client_cancels_our_task_tool() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::Negotiated, true, server_end);
    let config = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("rmcp-tasks-client", "0"),
    );
    let client = config
        .serve_with_lifecycle(tokio::io::split(client_end), discover_mode())
        .await
        .expect("rmcp starts against our server");
    let info = client.peer_info().unwrap();
    assert!(
        info.capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION_ID)),
        "our discover declares the tasks extension: {info:?}"
    );

    let created = match client
        .call_tool_once(call("slow", json!({"seconds": 30})))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(created) => created,
        other => panic!("expected a task handle, got {other:?}"),
    };
    assert!(created.result_type.is_task());
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(next(&mut events).await, "started");
    let task_id = created.task.task_id.clone();

    client
        .cancel_task(CancelTaskParams::new(task_id.clone()))
        .await
        .expect("tasks/cancel is acknowledged");
    assert_eq!(
        next(&mut events).await,
        "stopped",
        "our handler was dropped"
    );
    let got = client
        .get_task(GetTaskParams::new(task_id.clone()))
        .await
        .expect("tasks/get");
    assert_eq!(got.task.status(), TaskStatus::Cancelled);
    assert_eq!(got.task.task.task_id, task_id);
    // Cancelling a task that already ended is acknowledged too (cooperative, eventually
    // consistent), not an error as in 2025-11-25.
    client
        .cancel_task(CancelTaskParams::new(task_id.clone()))
        .await
        .expect("a second tasks/cancel is acknowledged");

    // The same answers, read from the wire with rmcp's own types.
    let created_wire = tap.response_to("tools/call")["result"].clone();
    assert_eq!(created_wire["resultType"], "task");
    assert!(created_wire.get("ttlMs").is_some(), "{created_wire}");
    let parsed: CreateTaskResult = serde_json::from_value(created_wire).unwrap();
    assert_eq!(parsed.task.task_id, task_id);
    let ack_wire = tap.response_to("tasks/cancel")["result"].clone();
    assert_eq!(ack_wire["resultType"], "complete", "{ack_wire}");
    let _: TaskAckResult = serde_json::from_value(ack_wire).unwrap();
    let get_wire = tap.response_to("tasks/get")["result"].clone();
    assert_eq!(get_wire["resultType"], "complete");
    assert_eq!(get_wire["status"], "cancelled");
    let parsed: GetTaskResult = serde_json::from_value(get_wire).unwrap();
    assert_eq!(parsed.task.status(), TaskStatus::Cancelled);

    // A task that runs to its end: `tasks/get` carries the tool's result inline, which rmcp
    // reads as `TaskPayload::Completed`.
    let CallToolResponse::Task(quick) = client
        .call_tool_once(call("slow", json!({"seconds": 0})))
        .await
        .expect("tools/call")
    else {
        panic!("expected a task handle");
    };
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "finished");
    let mut polled = None;
    for _ in 0..100 {
        let got = client
            .get_task(GetTaskParams::new(quick.task.task_id.clone()))
            .await
            .expect("tasks/get");
        if got.task.status().is_terminal() {
            polled = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let polled = polled.expect("the quick task ends");
    match &polled.task.payload {
        TaskPayload::Completed { result } => {
            assert_eq!(result["content"][0]["text"], "slept", "{result:?}")
        }
        other => panic!("expected a completed task, got {other:?}"),
    }

    // Every request declared the extension in its own `_meta`; nobody sent a cancel
    // notification for the task (tasks are cancelled with `tasks/cancel`).
    tap.assert_every_request_stamped();
    for request in tap.requests() {
        assert!(
            request["params"]["_meta"][CAPABILITIES_KEY]["extensions"]
                .get(TASKS_EXTENSION_ID)
                .is_some(),
            "{request}"
        );
    }
    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "notifications/cancelled")
    );
    assert_eq!(tap.cancels_to_client(), Vec::<Value>::new());
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Our client → an rmcp server.

/// An rmcp server as an rmcp user writes it; `legacy` pins it to 2025-11-25 and older.
#[derive(Clone)]
struct RmcpServer {
    events: Events,
    legacy: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SlowParams {
    seconds: u64,
}

#[tool_router]
impl RmcpServer {
    #[tool(description = "Sleeps; stops as soon as the call is cancelled")]
    #[cancellable(token = ct)]
    async fn slow(
        &self,
        Parameters(params): Parameters<SlowParams>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let _ = self.events.send("started");
        let mut guard = DropGuard {
            events: self.events.clone(),
            finished: false,
        };
        tokio::time::sleep(Duration::from_secs(params.seconds)).await;
        guard.finished = true;
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}

#[tool_handler]
impl ServerHandler for RmcpServer {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }
}

/// Our negotiated client against an rmcp server on a tapped pipe.
fn our_client_against_rmcp(legacy: bool) -> (Peer, mpsc::UnboundedReceiver<&'static str>, Tap) {
    let (client_end, server_end, tap) = tapped_pipe();
    let (events, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let running = RmcpServer { events, legacy }
            .serve(tokio::io::split(server_end))
            .await
            .expect("rmcp serves");
        let _ = running.waiting().await;
    });
    let (read, write) = tokio::io::split(client_end);
    let peer = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .client_info(json!({"name": "cancelkit-test-client", "version": "0"}))
        .connect(read, write);
    (peer, rx, tap)
}

/// A fast call answered, then a slow one dropped: the rmcp tool's token is cancelled and the
/// tool stops within 5 s, nothing answers the dropped call, and the connection still serves.
async fn our_drop_cancels_the_rmcp_tool(
    peer: &Peer,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    tap: &Tap,
) {
    let done: Value = peer
        .handle()
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 0}}),
        )
        .await
        .expect("the fast call is answered");
    assert_eq!(done["content"][0]["text"], "done");
    assert_eq!(next(events).await, "started");
    assert_eq!(next(events).await, "finished");

    let pending = peer.handle().request::<_, Value>(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 30}}),
    );
    let id = serde_json::to_value(pending.id()).unwrap();
    assert_eq!(next(events).await, "started");
    drop(pending);
    assert_eq!(
        next(events).await,
        "stopped",
        "rmcp cancelled the tool's token and the tool stopped"
    );
    assert!(
        tap.to_server()
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id),
        "we sent notifications/cancelled for {id}"
    );
    let again: Value = peer
        .handle()
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 0}}),
        )
        .await
        .expect("the next call is answered");
    assert_eq!(again["content"][0]["text"], "done");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(tap.responses_for(&id), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_discovers_rmcp_and_dropping_a_call_cancels_the_rmcp_tool() {
    let (peer, mut events, tap) = our_client_against_rmcp(false);
    let _wire = DumpOnPanic(tap.clone());
    let negotiated = peer
        .handle()
        .discover_or_initialize(
            json!({"name": "cancelkit-test-client", "version": "0"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .expect("rmcp answers server/discover");
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(peer.handle().mcp_revision(), Some(McpRevision::V2026_07_28));
    assert!(
        negotiated.server["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V2026)),
        "{}",
        negotiated.server
    );

    our_drop_cancels_the_rmcp_tool(&peer, &mut events, &tap).await;

    assert_eq!(tap.client_methods()[0], "server/discover");
    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "initialize" || m == "notifications/initialized"),
        "{:?}",
        tap.client_methods()
    );
    tap.assert_every_request_stamped();
    for request in tap.requests() {
        assert_eq!(
            request["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
            "cancelkit-test-client"
        );
    }
    let answer = tap.response_to("tools/call");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(tap.cancels_to_client(), Vec::<Value>::new());
}

// ---------------------------------------------------------------------------------------------
// Fallback to the legacy handshake.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_falls_back_to_initialize_with_a_legacy_rmcp_server() {
    let (peer, mut events, tap) = our_client_against_rmcp(true);
    let _wire = DumpOnPanic(tap.clone());
    let negotiated = peer
        .handle()
        .discover_or_initialize(
            json!({"name": "cancelkit-test-client", "version": "0"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .expect("the legacy handshake follows");
    assert_eq!(negotiated.revision, McpRevision::V2025_11_25);
    assert_eq!(peer.handle().mcp_revision(), Some(McpRevision::V2025_11_25));
    assert_eq!(negotiated.server["protocolVersion"], "2025-11-25");

    let refused = tap.response_to("server/discover");
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(
        tap.first_methods(3).await,
        ["server/discover", "initialize", "notifications/initialized"]
    );
    let initialize = tap
        .requests()
        .into_iter()
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25");

    our_drop_cancels_the_rmcp_tool(&peer, &mut events, &tap).await;
    tap.assert_no_request_stamped_after_initialize();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_falls_back_to_initialize_with_our_legacy_server() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::V2025_11_25, false, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), auto_mode())
            .await
            .expect("rmcp falls back to initialize");
    let info = client.peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);

    let refused = tap.response_to("server/discover");
    assert!(refused.get("error").is_some(), "{refused}");
    assert_eq!(
        tap.first_methods(3).await,
        ["server/discover", "initialize", "notifications/initialized"]
    );

    echo(&client, "legacy").await;
    let id = start_and_cancel_slow(&client, &tap, &mut events, RmcpCancel::Handle).await;
    assert_cancelled_without_response(&client, &tap, &mut events, &id).await;
    tap.assert_no_request_stamped_after_initialize();
    client.cancel().await.unwrap();
}

/// A `Negotiated` server whose router has no `server/discover` route: the stamped probe has
/// decided the connection's era (2026-07-28), so answering it -32601 would send rmcp's `Auto`
/// client to an `initialize` that this era refuses, and it could not connect at all. The
/// runtime answers the probe itself (the supported versions, no capabilities) instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_connects_to_a_negotiated_server_without_a_discover_route() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, _events) = our_server(McpRevision::Negotiated, false, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), auto_mode())
            .await
            .expect("rmcp connects, in either era");
    echo(&client, "connected").await;
    client.cancel().await.unwrap();
}
