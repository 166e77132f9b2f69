//! Starts the `mcp_server` example as a child process, starts MCP the 2026-07-28 way
//! (`server/discover`, falling back to `initialize` for a legacy server; with `--legacy` it asks
//! for 2025-11-25 with `initialize` only), calls its `sleep` tool for 10 s, gives up after 1 s
//! (the dropped call sends `notifications/cancelled`), and shows the server is still serving.
//!
//! ```text
//! cargo run -p cancelkit --example mcp_client [-- --legacy]
//! ```

use std::process::Stdio;
use std::time::{Duration, Instant};

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol, RequestError};
use serde_json::{Value, json};

#[path = "support/child.rs"]
mod child;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = child::example_command("mcp_server")?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let (stdin, stdout) = (server.stdin.take().unwrap(), server.stdout.take().unwrap());
    let revision = if std::env::args().any(|a| a == "--legacy") {
        McpRevision::V2025_11_25
    } else {
        McpRevision::Negotiated
    };
    let info = json!({"name": "mcp_client", "version": "0"});
    let peer = Peer::builder(Protocol::Mcp(revision))
        .client_info(info.clone())
        .connect(stdout, stdin);
    let mcp = peer.handle();

    let negotiated = mcp
        .discover_or_initialize(info, DEFAULT_DISCOVER_TIMEOUT)
        .await?;
    match negotiated.revision.as_str() {
        Some("2026-07-28") => println!(
            "discovered: server speaks {} (no handshake; every request carries _meta)",
            negotiated.server["supportedVersions"]
        ),
        _ => println!(
            "initialized: server speaks {}",
            negotiated.server["protocolVersion"]
        ),
    }

    let start = Instant::now();
    let call = mcp
        .request::<_, Value>(
            "tools/call",
            json!({"name": "sleep", "arguments": {"seconds": 10}}),
        )
        .timeout(Duration::from_secs(1));
    match call.await {
        Err(RequestError::Timeout(after)) => println!(
            "tools/call sleep(10s): gave up after {after:?}; notifications/cancelled sent ({:?} elapsed)",
            start.elapsed()
        ),
        other => println!("tools/call sleep(10s) ended unexpectedly: {other:?}"),
    }

    let start = Instant::now();
    let echo: Value = mcp
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "still serving"}}),
        )
        .await?;
    println!(
        "tools/call echo: {} in {:?}",
        echo["content"][0]["text"],
        start.elapsed()
    );

    mcp.close();
    peer.closed().await;
    let _ = server.wait().await;
    Ok(())
}
