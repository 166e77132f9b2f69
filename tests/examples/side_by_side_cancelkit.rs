//! The guide's small MCP server on cancelkit's own server (`cancelkit::mcp`): `echo {text}`
//! and a cancellable `sleep {seconds}`, on stdio. Its twin with rmcp's `#[tool]` is
//! `side_by_side_rmcp.rs`; `tests/side_by_side.rs` runs both the same way.
use std::time::Duration;

use cancelkit::mcp::schemars::{self, JsonSchema};
use cancelkit::mcp::{Args, McpServer, Tool};
use cancelkit::{JsonRpcError, cancellable};

#[derive(serde::Deserialize, JsonSchema)]
struct Echo {
    /// The text to return.
    text: String,
}

#[derive(serde::Deserialize, JsonSchema)]
struct Sleep {
    /// How long, in seconds.
    seconds: f64,
}

async fn echo(Args(Echo { text }): Args<Echo>) -> String {
    text
}

#[cancellable]
async fn sleep(Args(Sleep { seconds }): Args<Sleep>) -> Result<String, JsonRpcError> {
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    Ok(format!("slept {seconds}s"))
}

#[tokio::main]
async fn main() {
    McpServer::new("demo", "1.0.0")
        .tool(Tool::new("echo", "Returns its text.", echo))
        .tool(Tool::new("sleep", "Sleeps; cancellable.", sleep))
        .serve_stdio()
        .await;
}
