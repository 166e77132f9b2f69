//! cancelkit against rmcp 3.x, both directions, with both ways of cancelling (drop, timeout).
//!
//! - An rmcp client calls our `mcp_server` example (a real child process) and gives up on a
//!   `sleep` call: our handler stops, and no response for it ever appears on the wire.
//! - Our MCP client calls an rmcp server whose tool is `#[cancellable(token = ct)]`, as an rmcp
//!   user would write it, and gives up: rmcp cancels the tool's `ct` and the tool stops.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::peer::{McpRevision, Peer, Protocol, RequestError};
use cancelkit::{CancellationToken, cancellable};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, ErrorData};
use rmcp::service::PeerRequestOptions;
use rmcp::{ServiceExt, schemars, tool, tool_router};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);

/// Our `mcp_server` as a child process, with its stdout tapped (every line it writes is kept)
/// and its stderr log collected.
struct TappedServer {
    _child: tokio::process::Child,
    written: Arc<Mutex<Vec<Value>>>,
    log: Arc<Mutex<String>>,
}

impl TappedServer {
    fn start() -> (Self, tokio::io::DuplexStream, tokio::process::ChildStdin) {
        let mut child = tokio::process::Command::new(cancelkit_tests::example("mcp_server"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("mcp_server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (client_end, mut tap_end) = tokio::io::duplex(1 << 16);
        let written = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(String::new()));
        let seen = Arc::clone(&written);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).expect("the server writes JSON"));
                if tap_end
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        let collected = Arc::clone(&log);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = collected.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        (
            Self {
                _child: child,
                written,
                log,
            },
            client_end,
            stdin,
        )
    }

    /// Waits for a log line containing `needle`; returns the whole log.
    async fn wait_for_log(&self, needle: &str) -> String {
        for _ in 0..500 {
            let log = self.log.lock().unwrap().clone();
            if log.contains(needle) {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no log line with {needle:?}:\n{}", self.log.lock().unwrap());
    }

    /// Our server logged a cancel with `reason`, stopped the tool, sent no response for it, and
    /// still serves `client`.
    async fn assert_stopped_without_response(
        &self,
        reason: &str,
        client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    ) {
        let log = self.wait_for_log(&format!("reason=\"{reason}\"")).await;
        let id = logged_id(&log, "the peer cancelled a request");
        self.wait_for_log(&format!("sleep tool stopped request_id={id}"))
            .await;
        self.wait_for_log(&format!(
            "no response for a request the peer cancelled request_id={id}"
        ))
        .await;
        assert_still_serving(client).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            self.responses_for(&id),
            0,
            "no response for the cancelled call"
        );
    }

    fn responses_for(&self, id: &str) -> usize {
        let id: Value = serde_json::from_str(id).expect("a logged id is JSON");
        self.written
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.get("method").is_none() && m["id"] == id)
            .count()
    }
}

/// The id in a `request_id=N` log field.
fn logged_id(log: &str, prefix: &str) -> String {
    let line = log.lines().find(|l| l.contains(prefix)).unwrap();
    let start = line.find("request_id=").unwrap() + "request_id=".len();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

fn sleep_call(seconds: u64) -> CallToolRequestParams {
    CallToolRequestParams::new("sleep")
        .with_arguments(json!({"seconds": seconds}).as_object().cloned().unwrap())
}

async fn assert_still_serving(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) {
    let echo = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "alive"}).as_object().cloned().unwrap()),
        )
        .await
        .expect("echo works after the cancel");
    assert_eq!(echo.content[0].as_text().unwrap().text, "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_dropping_a_call_stops_our_handler_and_gets_no_response() {
    let (server, read, write) = TappedServer::start();
    let client = ().serve((read, write)).await.expect("rmcp initializes against our server");

    let call = client.call_tool(sleep_call(30));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    // Dropping the future made rmcp send notifications/cancelled; our server logged it,
    // stopped the tool, and sent nothing for it.
    server
        .assert_stopped_without_response("request abandoned by the caller", &client)
        .await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_timing_out_a_call_stops_our_handler_and_gets_no_response() {
    let (server, read, write) = TappedServer::start();
    let client = ().serve((read, write)).await.expect("rmcp initializes against our server");

    let handle = client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(sleep_call(30))),
            PeerRequestOptions::with_timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let outcome = handle.await_response().await;
    assert!(
        matches!(outcome, Err(rmcp::service::ServiceError::Timeout { .. })),
        "{outcome:?}"
    );
    server
        .assert_stopped_without_response("request timeout", &client)
        .await;
    client.cancel().await.unwrap();
}

/// An rmcp server, written as an rmcp user would, with `#[cancellable(token = ct)]` on a tool.
#[derive(Clone)]
struct RmcpServer {
    events: mpsc::UnboundedSender<&'static str>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SlowParams {
    seconds: u64,
}

struct Report(mpsc::UnboundedSender<&'static str>, &'static str);

impl Drop for Report {
    fn drop(&mut self) {
        let _ = self.0.send(self.1);
    }
}

#[tool_router(server_handler)]
impl RmcpServer {
    #[tool(description = "Sleeps; stops as soon as the call is cancelled")]
    #[cancellable(token = ct)]
    async fn slow(
        &self,
        Parameters(params): Parameters<SlowParams>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let _ = self.events.send("started");
        let _dropped = Report(self.events.clone(), "stopped");
        tokio::time::sleep(Duration::from_secs(params.seconds)).await;
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}

async fn our_client_against_rmcp() -> (Peer, mpsc::UnboundedReceiver<&'static str>) {
    let (events, rx) = mpsc::unbounded_channel();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(theirs);
    tokio::spawn(async move {
        let running = RmcpServer { events }
            .serve((read, write))
            .await
            .expect("rmcp serves");
        let _ = running.waiting().await;
    });
    let (read, write) = tokio::io::split(ours);
    let peer = Peer::builder(MCP).connect(read, write);
    let init: Value = peer
        .handle()
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cancelkit", "version": "0"}}),
        )
        .await
        .expect("rmcp answers our initialize");
    assert_eq!(init["protocolVersion"], "2025-11-25");
    peer.handle()
        .notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    (peer, rx)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_dropping_a_call_cancels_the_rmcp_tools_token() {
    let (peer, mut events) = our_client_against_rmcp().await;
    let call = peer.handle().request::<_, Value>(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 30}}),
    );
    assert_eq!(next(&mut events).await, "started");
    drop(call);
    assert_eq!(
        next(&mut events).await,
        "stopped",
        "rmcp cancelled ct and the tool stopped"
    );
    let done: Value = peer
        .handle()
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 0}}),
        )
        .await
        .unwrap();
    assert_eq!(done["content"][0]["text"], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_timing_out_a_call_cancels_the_rmcp_tools_token() {
    let (peer, mut events) = our_client_against_rmcp().await;
    let call = peer
        .handle()
        .request::<_, Value>(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 30}}),
        )
        .timeout(Duration::from_millis(300));
    let outcome = call.await;
    assert!(
        matches!(outcome, Err(RequestError::Timeout(_))),
        "{outcome:?}"
    );
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "stopped");
}
