//! An MCP server over stdio with two tools, `echo {text}` and `sleep {seconds}`, that honours
//! cancellation: a `notifications/cancelled` for a running `sleep` stops it at once, sends no
//! response (as MCP wants), and is logged to stderr with the request id and the reason.
//!
//! Speaks both MCP revisions: it answers `initialize` with the client's revision when it is
//! 2024-11-05 or 2025-11-25 (task-augmented `tools/call` and `tasks/cancel` work with the latter).
//!
//! ```text
//! cargo run -p cancelkit --example mcp_server
//! ```

use std::time::{Duration, Instant};

use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
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
    let version = match params.protocol_version.as_str() {
        "2024-11-05" => "2024-11-05",
        _ => "2025-11-25",
    };
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "cancelkit-example-mcp-server", "version": env!("CARGO_PKG_VERSION")}
    }))
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
        .request("ping", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("tools/list", list_tools)
        .request("tools/call", call_tool)
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        );
    let peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
        .router(router)
        .connect(tokio::io::stdin(), tokio::io::stdout());
    tracing::info!("mcp_server ready on stdio");
    peer.closed().await;
}
