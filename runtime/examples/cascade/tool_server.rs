//! The RAP tool server: `run` is `sleep` in its own process group.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cancelkit::rap::{ToolCall, ToolError, ToolOutput, ToolServer, process};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::shared::{Error, TOOL_SECONDS, event};

/// Removes a file when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `run {seconds}`: `sleep` in its own process group (`process::run`), which reports its
/// process group id through a file for the client to watch. No cancellation code:
/// `/cancel_tool_call` cancels the call's scope, and `process::run` stops the group.
async fn run_tool(args: Value, call: ToolCall) -> Result<ToolOutput, ToolError> {
    let seconds = args["seconds"].as_u64().unwrap_or(TOOL_SECONDS).min(3600);
    let marker = RemoveOnDrop(std::env::temp_dir().join(format!(
        "cancelkit-cascade-{}-{}.pgid",
        std::process::id(),
        call.tool_call_id
    )));
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(r#"echo $$ > "$1"; exec sleep "$2""#)
        .arg("sh")
        .arg(&marker.0)
        .arg(seconds.to_string());
    let report = async {
        for _ in 0..1000 {
            if let Ok(text) = std::fs::read_to_string(&marker.0)
                && let Ok(pgid) = text.trim().parse::<i32>()
            {
                event(
                    "process_started",
                    json!({"pgid": pgid, "thread_id": call.thread_id, "tool_call_id": call.tool_call_id}),
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let (output, ()) = tokio::join!(process::run(command, Duration::from_secs(2)), report);
    let output = output?;
    Ok(ToolOutput::Text(format!(
        "slept {seconds} s{}",
        output.stdout
    )))
}

/// Reports every `/cancel_tool_call` when its body has been read, then passes it on.
async fn observe(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.uri().path() != "/cancel_tool_call" {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    event(
        "rap_got_cancel",
        json!({"thread_id": body["thread_id"], "tool_call_id": body["tool_call_id"]}),
    );
    let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    next.run(request).await
}

pub async fn tool_server(args: &[String]) -> Result<ExitCode, Error> {
    super::log::init();
    let origin = args.first().ok_or("tool-server ORIGIN TOKEN")?;
    let token = args.get(1).ok_or("tool-server ORIGIN TOKEN")?;
    let server = ToolServer::builder("cancelkit-cascade-tools")
        .bearer_token(token.as_str())
        .allow_callback_origin(origin)?
        .operation(
            "run",
            "Sleeps in its own process group; cancellable.",
            json!({"type": "object", "properties": {"seconds": {"type": "integer"}}}),
            run_tool,
        )
        .build();
    let router = server.router().layer(axum::middleware::from_fn(observe));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    println!("listening on {url}");
    event("tool_server_ready", json!({"url": url}));
    // Until our stdin closes: the MCP server closes it, or is gone.
    let parent_gone = async {
        let mut sink = Vec::new();
        let _ = tokio::io::stdin()
            .take(1 << 20)
            .read_to_end(&mut sink)
            .await;
    };
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(parent_gone)
    .await?;
    Ok(ExitCode::SUCCESS)
}
