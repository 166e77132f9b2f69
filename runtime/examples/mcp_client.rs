//! Starts the `mcp_server` example as a child process, calls its `sleep` tool for 10 s, gives up
//! after 1 s (the dropped call sends `notifications/cancelled`), and shows the server is still
//! serving.
//!
//! ```text
//! cargo run -p cancelkit --example mcp_client
//! ```

use std::process::Stdio;
use std::time::{Duration, Instant};

use cancelkit::peer::{McpRevision, Peer, Protocol, RequestError};
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
    let peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25)).connect(stdout, stdin);
    let mcp = peer.handle();

    let init: Value = mcp
        .request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp_client", "version": "0"}}))
        .await?;
    println!("initialized: server speaks {}", init["protocolVersion"]);
    mcp.notify("notifications/initialized", json!({})).await?;

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
