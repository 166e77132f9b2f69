//! The guide's small MCP server with rmcp's `#[tool]` (and `#[cancellable(token = ct)]`):
//! `echo {text}` and a cancellable `sleep {seconds}`, on stdio. Its twin on cancelkit's own
//! server is `side_by_side_cancelkit.rs`; `tests/side_by_side.rs` runs both the same way.
use std::time::Duration;

use cancelkit::{CancellationToken, cancellable};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    /// The text to return.
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sleep {
    /// How long, in seconds.
    seconds: f64,
}

#[derive(Clone)]
struct Demo;

#[tool_router]
impl Demo {
    #[tool(description = "Returns its text.")]
    async fn echo(&self, Parameters(Echo { text }): Parameters<Echo>) -> String {
        text
    }

    #[tool(description = "Sleeps; cancellable.")]
    #[cancellable(token = ct)]
    async fn sleep(
        &self,
        Parameters(Sleep { seconds }): Parameters<Sleep>,
        ct: CancellationToken,
    ) -> Result<String, ErrorData> {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        Ok(format!("slept {seconds}s"))
    }
}

#[tool_handler(name = "demo", version = "1.0.0")]
impl ServerHandler for Demo {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    Demo.serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}
