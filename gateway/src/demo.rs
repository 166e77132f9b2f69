//! The demo upstream bundled with the gateway (hidden subcommand `demo-upstream`): an MCP
//! server on stdio with tools `echo {text}` and `sleep {seconds}`, speaking 2024-11-05,
//! 2025-11-25 and 2026-07-28 (chosen by the client's first message).
//!
//! `sleep` reports progress every 100 ms when the caller gave a `progressToken`, and a `sleep`
//! that is cancelled logs one line on stderr, so a cancel's arrival is visible from outside:
//!
//! ```text
//! demo-upstream: cancelled tools/call sleep (request id 3) after 1.2s: cancelled by the peer: cancelled through the API [unix_us=1795456594140312]
//! ```
//!
//! (`unix_us`: the wall-clock time of the stop, which `cargo xtask bench gateway` reads.)
//!
//! It also answers a tool it does not list, `env`: the names (not the values) of its
//! environment variables, one a line, so a test can see what a stdio upstream inherits. Each
//! call logs `demo-upstream: tools/call env` on stderr, so a test can also see that a call
//! for a tool the upstream never listed did not reach it (the gateway refuses unlisted tools
//! unless the upstream has `allow_unlisted_tools`).

use std::time::{Duration, Instant};

use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::meta::SERVER_INFO;
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::{Value, json};

/// The prefix of every line the demo upstream writes on stderr.
pub const LOG_PREFIX: &str = "demo-upstream:";

fn server_info() -> Value {
    json!({"name": "cancelkit-gateway-demo-upstream", "version": env!("CARGO_PKG_VERSION")})
}

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

async fn discover(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({
        "capabilities": {"tools": {}},
        "_meta": {SERVER_INFO: server_info()}
    }))
}

/// The demo's tools, as `tools/list` gives them (`env` is answered but not listed).
pub fn tools() -> Value {
    json!([
        {
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        },
        {
            "name": "sleep",
            "description": "Sleeps for the given number of seconds (reporting progress every 100 ms when asked); cancellable.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
        }
    ])
}

#[derive(Deserialize)]
struct CallTool {
    name: String,
    #[serde(default)]
    arguments: Value,
    #[serde(default, rename = "_meta")]
    meta: Option<Value>,
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": false})
}

async fn call_tool(params: CallTool, cx: Context) -> Result<Value, JsonRpcError> {
    match params.name.as_str() {
        "echo" => match params.arguments.get("text").and_then(Value::as_str) {
            Some(t) => Ok(text(t)),
            None => Err(JsonRpcError::invalid_params("echo needs a string `text`")),
        },
        "sleep" => match params.arguments.get("seconds").and_then(Value::as_f64) {
            Some(seconds) if (0.0..=3600.0).contains(&seconds) => {
                let token = params
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("progressToken"))
                    .cloned();
                sleep(Duration::from_secs_f64(seconds), token, cx).await
            }
            _ => Err(JsonRpcError::invalid_params(
                "sleep needs `seconds` between 0 and 3600",
            )),
        },
        "env" => {
            log_line(&format!("{LOG_PREFIX} tools/call env"));
            let mut names: Vec<String> = std::env::vars_os()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect();
            names.sort();
            Ok(text(names.join("\n")))
        }
        other => Err(JsonRpcError::invalid_params(format!(
            "no tool named `{other}`"
        ))),
    }
}

/// Writes `line` and its newline to stderr in one write: the demo shares its stderr with the
/// gateway, whose log lines would otherwise land in the middle of a line written piece by piece
/// (as `eprintln!` does with its arguments), and readers of the log match whole lines.
fn log_line(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Writes the stderr line when a sleep ends early.
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
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0);
            log_line(&format!(
                "{LOG_PREFIX} cancelled tools/call sleep (request id {}) after {:.1?}: {reason} [unix_us={now_us}]",
                self.id,
                self.started.elapsed()
            ));
        }
    }
}

#[cancellable]
async fn sleep(
    duration: Duration,
    token: Option<Value>,
    cx: Context,
) -> Result<Value, JsonRpcError> {
    let id = cx.request_id().map(|id| id.to_string()).unwrap_or_default();
    log_line(&format!(
        "{LOG_PREFIX} started tools/call sleep (request id {id}) for {duration:?}"
    ));
    let mut log = StopLog {
        id,
        started: Instant::now(),
        done: false,
    };
    let deadline = tokio::time::Instant::now() + duration;
    if let Some(token) = token {
        let step = Duration::from_millis(100);
        let total = duration.as_secs_f64();
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + step, step);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = ticks.tick() => {
                    let progress = log.started.elapsed().as_secs_f64().min(total);
                    let _ = cx.peer().notify("notifications/progress", json!({
                        "progressToken": token, "progress": progress, "total": total,
                        "message": format!("slept {progress:.1}s of {total}s")
                    })).await;
                }
            }
        }
    } else {
        tokio::time::sleep_until(deadline).await;
    }
    log.done = true;
    Ok(text(format!("slept {duration:?}")))
}

/// Serves the demo upstream on stdin/stdout until the client hangs up.
pub async fn serve() {
    let router = Router::new()
        .request("initialize", initialize)
        .request("server/discover", discover)
        .request("ping", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("tools/list", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"tools": tools()}))
        })
        .request("tools/call", call_tool)
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        );
    let peer = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router)
        .connect(tokio::io::stdin(), tokio::io::stdout());
    peer.closed().await;
}
