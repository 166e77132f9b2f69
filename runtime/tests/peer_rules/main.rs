//! Each cancellation rule of PROTOCOLS.md §0–2, over an in-memory duplex.

#[path = "../common/mod.rs"]
mod common;

mod connection;
mod incoming;
mod outgoing;
mod peers;

use std::time::Duration;

use cancelkit::peer::{McpRevision, Protocol};
use serde_json::{Value, json};

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);
const SHORT: Duration = Duration::from_millis(150);

fn sleep_request(id: Value, label: &str, ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "sleep", "params": {"label": label, "ms": ms}})
}
