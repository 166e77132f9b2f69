//! What no SDK offers yet: the cause of a cancellation as the handler sees it and the reason
//! text that leaves the process, `tasks/cancel` across the task boundary, the disconnect
//! policy, and timeouts that restart on progress. Real peers over an in-memory duplex.

#[path = "../common/mod.rs"]
mod common;

mod causes;
mod disconnect;
mod progress;
mod reasons;
mod tasks;

use std::time::Duration;

use cancelkit::peer::{McpRevision, Protocol};
use serde_json::{Value, json};

use crate::common::Served;

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);
const SHORT: Duration = Duration::from_millis(150);

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Waits until the server has registered `n` requests in flight.
async fn wait_in_flight(s: &Served, n: usize) {
    for _ in 0..500 {
        if s.peer.in_flight() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} requests in flight, expected {n}", s.peer.in_flight());
}
