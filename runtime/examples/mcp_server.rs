//! An MCP server over stdio with two tools, `echo {text}` and `sleep {seconds}`, that honours
//! cancellation: a `notifications/cancelled` for a running `sleep` stops it at once, sends no
//! response (as MCP wants), and is logged to stderr with the request id and the reason.
//!
//! Speaks three MCP revisions, chosen per connection by the client's first message:
//! `initialize` for 2024-11-05 or 2025-11-25 (task-augmented `tools/call` and `tasks/cancel` work
//! with the latter), and `server/discover` or any request stamped with 2026-07-28 `_meta` for
//! 2026-07-28 (no handshake; `sleep` runs as a task of the `io.modelcontextprotocol/tasks`
//! extension for clients that declare it).
//!
//! A third tool, `ask_client {timeout_ms}` (legacy eras: 2026-07-28 servers send no requests),
//! asks the client for a `sampling/createMessage` and gives up after `timeout_ms`: the runtime
//! then sends the client `notifications/cancelled` for it.
//!
//! With `--http ADDR` it serves the same router over Streamable HTTP at `http://ADDR/mcp`
//! instead ([`McpHttpServer`]: sessions for `initialize`, 2026-07-28 requests without one,
//! keep-alive comments, resumable streams, loopback-only origins and hosts) and prints
//! `listening on http://ADDR/mcp` (the address bound) on stdout.
//!
//! ```text
//! cargo run -p cancelkit --features http --example mcp_server
//! cargo run -p cancelkit --features http --example mcp_server -- --http 127.0.0.1:8080
//! ```

use std::io::Write;
use std::time::{Duration, Instant};

use cancelkit::http::server::McpHttpServer;
use cancelkit::mcp::schemars::{self, JsonSchema};
use cancelkit::mcp::{Args, McpServer, TaskSupport, Tool};
use cancelkit::peer::{Context, PeerBuilder};
use cancelkit::wire::origin::OriginPolicy;
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;

#[path = "support/log.rs"]
mod log;

#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// The text to return.
    text: String,
}

async fn echo(Args(Echo { text }): Args<Echo>) -> String {
    text
}

#[derive(Deserialize, JsonSchema)]
struct Sleep {
    /// How long to sleep, in seconds (0 to 3600).
    #[schemars(range(min = 0.0, max = 3600.0))]
    seconds: f64,
}

#[derive(Deserialize, JsonSchema)]
struct AskClient {
    /// How long to wait for the client's answer, in milliseconds (up to 3600000).
    #[schemars(range(max = 3_600_000))]
    timeout_ms: u64,
}

/// Logs when a sleep ends early, with the id of the request it served.
struct StopLog {
    id: String,
    started: Instant,
    done: bool,
}

impl Drop for StopLog {
    fn drop(&mut self) {
        if !self.done {
            let reason = cancelkit::cancel_reason()
                .map(|r| r.to_string())
                .unwrap_or_else(|| "cancelled".into());
            tracing::info!(request_id = %self.id, after = ?self.started.elapsed(), %reason, "sleep tool stopped");
        }
    }
}

/// Asks the client for a sampling; on timeout the runtime cancels the request at the client
/// (`notifications/cancelled`) and the tool says so.
#[cancellable]
async fn ask_client(
    Args(AskClient { timeout_ms }): Args<AskClient>,
    cx: Context,
) -> Result<String, JsonRpcError> {
    if timeout_ms > 3_600_000 {
        return Err(JsonRpcError::invalid_params(
            "`timeout_ms` is at most 3600000",
        ));
    }
    let params = serde_json::json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello."}}],
        "maxTokens": 16
    });
    let asked = cx
        .peer()
        .request::<_, serde_json::Value>("sampling/createMessage", params)
        .timeout(Duration::from_millis(timeout_ms));
    match asked.await {
        Ok(answer) => Ok(format!("the client answered: {answer}")),
        Err(cancelkit::peer::RequestError::Timeout(after)) => {
            tracing::info!(
                ?after,
                "gave up on sampling/createMessage; the client was told"
            );
            Ok(format!("gave up after {after:?}"))
        }
        Err(error) => Err(error.into()),
    }
}

#[cancellable]
async fn sleep(Args(Sleep { seconds }): Args<Sleep>, cx: Context) -> Result<String, JsonRpcError> {
    if !(0.0..=3600.0).contains(&seconds) {
        return Err(JsonRpcError::invalid_params(
            "`seconds` is between 0 and 3600",
        ));
    }
    let duration = Duration::from_secs_f64(seconds);
    let id = cx
        .request_id()
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    let mut log = StopLog {
        id,
        started: Instant::now(),
        done: false,
    };
    tokio::time::sleep(duration).await;
    log.done = true;
    Ok(format!("slept {duration:?}"))
}

#[tokio::main]
async fn main() {
    log::init();
    let server = McpServer::new("cancelkit-example-mcp-server", env!("CARGO_PKG_VERSION"))
        .tool(Tool::new("echo", "Returns its text.", echo))
        .tool(
            Tool::new(
                "sleep",
                "Sleeps for the given number of seconds; cancellable.",
                sleep,
            )
            .task_support(TaskSupport::Optional),
        )
        .tool(Tool::new(
            "ask_client",
            "Asks the client to sample a message and gives up after timeout_ms.",
            ask_client,
        ));
    let builder = server.builder();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            let peer = builder.connect(tokio::io::stdin(), tokio::io::stdout());
            tracing::info!("mcp_server ready on stdio");
            peer.closed().await;
        }
        [flag, addr] if flag == "--http" => {
            if let Err(error) = serve_http(builder, addr).await {
                eprintln!("mcp_server: {error}");
                std::process::exit(1);
            }
        }
        _ => {
            eprintln!("usage: mcp_server [--http ADDR]");
            std::process::exit(2);
        }
    }
}

/// Serves the router over Streamable HTTP at `http://ADDR/mcp` until killed.
async fn serve_http(builder: PeerBuilder, addr: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let mut policy = OriginPolicy::new();
    if bound.ip().is_loopback() {
        // DNS rebinding: a page served elsewhere must not reach a loopback server by name.
        policy = policy.loopback_hosts();
    }
    let app = McpHttpServer::new(builder)
        .origin_policy(policy)
        .into_router();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{bound}/mcp")?;
    stdout.flush()?;
    tracing::info!(%bound, "mcp_server ready on Streamable HTTP");
    axum::serve(listener, app).await
}
