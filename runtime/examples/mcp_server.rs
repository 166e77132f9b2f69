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

use std::time::{Duration, Instant};

use std::io::Write;

use cancelkit::http::server::McpHttpServer;
use cancelkit::peer::{Context, McpRevision, Peer, PeerBuilder, Protocol, Router};
use cancelkit::wire::meta::SERVER_INFO;
use cancelkit::wire::origin::OriginPolicy;
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::{Value, json};

#[path = "support/log.rs"]
mod log;

#[derive(Deserialize)]
struct Initialize {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

async fn initialize(params: Initialize, _cx: Context) -> Result<Value, JsonRpcError> {
    // Every legacy revision is answered as itself; one we do not know gets the newest.
    let version = McpRevision::answer_initialize(&params.protocol_version);
    Ok(json!({
        "protocolVersion": version.to_string(),
        "capabilities": {"tools": {}},
        "serverInfo": server_info()
    }))
}

/// `server/discover` (2026-07-28): the runtime adds `supportedVersions`, the cache fields, the
/// tasks extension and `resultType`.
async fn discover(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({
        "capabilities": {"tools": {}},
        "_meta": {SERVER_INFO: server_info()}
    }))
}

fn server_info() -> Value {
    json!({"name": "cancelkit-example-mcp-server", "version": env!("CARGO_PKG_VERSION")})
}

async fn list_tools(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({"tools": [
        {
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        },
        {
            "name": "sleep",
            "description": "Sleeps for the given number of seconds; cancellable.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
            "execution": {"taskSupport": "optional"}
        },
        {
            "name": "ask_client",
            "description": "Asks the client to sample a message and gives up after timeout_ms.",
            "inputSchema": {"type": "object", "properties": {"timeout_ms": {"type": "integer"}}, "required": ["timeout_ms"]}
        }
    ]}))
}

#[derive(Deserialize)]
struct CallTool {
    name: String,
    #[serde(default)]
    arguments: Value,
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

async fn call_tool(params: CallTool, cx: Context) -> Result<Value, JsonRpcError> {
    match params.name.as_str() {
        "echo" => match params.arguments["text"].as_str() {
            Some(t) => Ok(text(t)),
            None => Err(JsonRpcError::invalid_params("echo needs a string `text`")),
        },
        "sleep" => match params.arguments["seconds"].as_f64() {
            Some(seconds) if (0.0..=3600.0).contains(&seconds) => {
                sleep(Duration::from_secs_f64(seconds), cx).await
            }
            _ => Err(JsonRpcError::invalid_params(
                "sleep needs `seconds` between 0 and 3600",
            )),
        },
        "ask_client" => match params.arguments["timeout_ms"].as_u64() {
            Some(ms) if ms <= 3_600_000 => ask_client(Duration::from_millis(ms), cx).await,
            _ => Err(JsonRpcError::invalid_params(
                "ask_client needs `timeout_ms` up to 3600000",
            )),
        },
        other => Err(JsonRpcError::invalid_params(format!(
            "no tool named `{other}`"
        ))),
    }
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
async fn ask_client(timeout: Duration, cx: Context) -> Result<Value, JsonRpcError> {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello."}}],
        "maxTokens": 16
    });
    let asked = cx
        .peer()
        .request::<_, Value>("sampling/createMessage", params)
        .timeout(timeout);
    match asked.await {
        Ok(answer) => Ok(text(format!("the client answered: {answer}"))),
        Err(cancelkit::peer::RequestError::Timeout(after)) => {
            tracing::info!(
                ?after,
                "gave up on sampling/createMessage; the client was told"
            );
            Ok(text(format!("gave up after {after:?}")))
        }
        Err(error) => Err(error.into()),
    }
}

#[cancellable]
async fn sleep(duration: Duration, cx: Context) -> Result<Value, JsonRpcError> {
    let id = cx.request_id().map(|id| id.to_string()).unwrap_or_default();
    let mut log = StopLog {
        id,
        started: Instant::now(),
        done: false,
    };
    tokio::time::sleep(duration).await;
    log.done = true;
    Ok(text(format!("slept {duration:?}")))
}

#[tokio::main]
async fn main() {
    log::init();
    let router = Router::new()
        .request("initialize", initialize)
        .request("server/discover", discover)
        .request("ping", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("tools/list", list_tools)
        .request("tools/call", call_tool)
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        );
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .task_tools(["sleep"])
        .router(router);
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
