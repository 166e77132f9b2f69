//! Our server: the `mcp_server` example's shape, in-process, on `cancelkit::mcp`.

use std::time::Duration;

use cancelkit::mcp::schemars::JsonSchema;
use cancelkit::mcp::{Args, McpServer, TaskSupport, Tool};
use cancelkit::peer::{Context, McpRevision, Peer};
use cancelkit::{JsonRpcError, cancellable};
use rmcp::schemars;
use serde::Deserialize;
use serde_json::json;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

use crate::harness::{DropGuard, Events};

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
pub(crate) async fn slow(
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
pub(crate) fn our_server(
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
