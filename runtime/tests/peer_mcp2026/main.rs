//! MCP 2026-07-28 on the wire: no handshake (`server/discover`, per-request `_meta`, no
//! `initialize`, no `ping`), the era chosen per connection by a negotiated server, client-only
//! cancellation, a server's `notifications/cancelled` only to end `subscriptions/listen`, and
//! the tasks extension.

#[path = "../common/mod.rs"]
mod common;

mod cancels;
mod client;
mod handshake;
mod tasks;

use std::time::Duration;

use cancelkit::peer::{Context, McpRevision, Protocol, Router};
use cancelkit::{CancelReason, Cancelled, JsonRpcError};
use serde_json::{Value, json};

use crate::common::{Event, Served, serve_extended};

/// What a negotiating server speaks: every published revision, newest first.
const EVERY_REVISION: [&str; 5] = [
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

const NEGOTIATED: Protocol = Protocol::Mcp(McpRevision::Negotiated);
const SHORT: Duration = Duration::from_millis(300);

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

fn meta_with_tasks() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    })
}

fn sleep_call(label: &str, ms: u64, meta: Value) -> Value {
    json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "_meta": meta})
}

/// `server/discover`, and `subscriptions/listen` that ends its own stream after `ms` (as a
/// server does when it shuts a subscription down).
fn modern_routes(router: Router, events: common::Events) -> Router {
    router
        .request("server/discover", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"capabilities": {"tools": {}}}))
        })
        .request("tools/list", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"tools": []}))
        })
        .request("resources/read", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"contents": [], "ttlMs": 60_000, "cacheScope": "public"}))
        })
        .request("subscriptions/listen", move |p: Value, _cx: Context| {
            let events = events.clone();
            async move {
                let _ = events.0.send(Event::Started("listen".into()));
                let ms = p["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Err::<Value, JsonRpcError>(Cancelled::new(CancelReason::Shutdown).into())
            }
        })
}

fn serve_negotiated(
    configure: impl FnOnce(cancelkit::peer::PeerBuilder) -> cancelkit::peer::PeerBuilder,
) -> Served {
    serve_extended(NEGOTIATED, modern_routes, configure)
}

/// A `tasks/get` or `tasks/cancel` for `task_id`, with `meta`, and its answer.
async fn task_request(
    s: &mut Served,
    id: Value,
    method: &str,
    task_id: &str,
    meta: Value,
) -> Value {
    s.wire
        .call(id, method, json!({"taskId": task_id, "_meta": meta}))
        .await
}

async fn discover(s: &mut Served) -> Value {
    let answer = s
        .wire
        .call(json!("d"), "server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2026_07_28));
    answer
}
