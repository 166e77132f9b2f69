//! The MCP server: the RAP runtime of the tool server it starts.

use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::rap::{CallTracker, Invocation, Invoker, Notifier, ToolServerTarget};
use cancelkit::{JsonRpcError, cancellable};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::time::timeout;

use crate::shared::{Error, MAX_LINE, TOKEN, WAIT, event, me, now_us, write_event};

static TOOLS: OnceLock<(Invoker, ToolServerTarget)> = OnceLock::new();
static CALLS: AtomicU64 = AtomicU64::new(1);

async fn mcp_initialize(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "cancelkit-cascade-mcp-server", "version": env!("CARGO_PKG_VERSION")}
    }))
}

/// `tools/call run {seconds}`: invokes the RAP tool server's `run`. No cancellation code:
/// on `notifications/cancelled` the runtime drops this future, and with it the invocation,
/// which sends `/cancel_tool_call` (and the tracker records "interrupted").
#[cancellable]
async fn call_tool(params: Value, cx: Context) -> Result<Value, JsonRpcError> {
    let (invoker, target) = TOOLS
        .get()
        .ok_or_else(|| JsonRpcError::internal("no tool server"))?;
    let call = Invocation::new(
        "run",
        "mcp-thread",
        format!("call-{}", CALLS.fetch_add(1, Ordering::Relaxed)),
    )
    .arguments(params["arguments"].clone());
    event(
        "rap_invoked",
        json!({"thread_id": call.thread_id, "tool_call_id": call.tool_call_id,
               "mcp_request_id": cx.request_id()}),
    );
    let result = invoker.invoke(target, call).await?;
    Ok(json!({
        "content": [{"type": "text", "text": result.text.unwrap_or_default()}],
        "isError": result.is_error.unwrap_or(false)
    }))
}

/// Passes stdin on to `into` line by line, reporting each `notifications/cancelled` as it
/// is read. Lines longer than the peer's frame limit are passed on whole in pieces.
async fn tap(into: tokio::io::DuplexStream) {
    let mut into = into;
    let mut reader = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        if !matches!(read, Ok(n) if n > 0) {
            return;
        }
        let read_at = now_us();
        if let Ok(message) = serde_json::from_slice::<Value>(&line)
            && message["method"] == "notifications/cancelled"
        {
            let params = &message["params"];
            write_event(
                &json!({"event": "mcp_got_cancelled", "pid": std::process::id(),
                "at_us": read_at, "request_id": params["requestId"], "reason": params["reason"]}),
            );
        }
        if into.write_all(&line).await.is_err() {
            return;
        }
    }
}

pub async fn mcp_server() -> Result<ExitCode, Error> {
    super::log::init();
    // Our callback route first: the tool server only posts results to origins it allows.
    let callbacks = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", callbacks.local_addr()?);
    let mut tool_server = tokio::process::Command::new(me()?)
        .args(["tool-server", &origin, TOKEN])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(tool_server.stdout.take().ok_or("no stdout")?).lines();
    let first = timeout(WAIT, lines.next_line()).await??.unwrap_or_default();
    let base = first
        .strip_prefix("listening on ")
        .ok_or("the tool server did not report its address")?
        .to_owned();
    let target = ToolServerTarget::new(base).with_bearer_token(TOKEN);
    let notifier = Notifier::new([target.clone()], Duration::from_secs(2));
    let tracker = std::sync::Arc::new(CallTracker::new(Some(notifier)));
    let invoker = Invoker::new(tracker, format!("{origin}/tool_result"))?;
    let router = invoker.callback_router();
    tokio::spawn(async move {
        let _ = axum::serve(callbacks, router).await;
    });
    TOOLS.set((invoker, target)).map_err(|_| "set twice")?;

    let (tapped, peer_input) = tokio::io::duplex(64 * 1024);
    tokio::spawn(tap(tapped));
    let router = Router::new()
        .request("initialize", mcp_initialize)
        .request("tools/call", call_tool);
    let peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
        .router(router)
        .connect(peer_input, tokio::io::stdout());
    event("mcp_server_ready", json!({}));
    peer.closed().await;

    drop(tool_server.stdin.take()); // the tool server exits when its stdin closes
    if timeout(WAIT, tool_server.wait()).await.is_err() {
        let _ = tool_server.kill().await;
    }
    Ok(ExitCode::SUCCESS)
}
