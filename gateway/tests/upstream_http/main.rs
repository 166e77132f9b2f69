//! The Streamable HTTP upstream connector against a real third-party MCP server: rmcp 3.11's
//! `StreamableHttpService`, in-process on 127.0.0.1, behind a tap that records every HTTP
//! request it receives and counts the TCP connections it closes.
//!
//! rmcp serves both eras on one endpoint: a request stamped with 2026-07-28 `_meta` (or
//! `server/discover`) is served statelessly, `initialize` opens a 2025-11-25 session. The
//! legacy tests pin the server to versions up to 2025-11-25 (as a server that does not speak
//! 2026-07-28), so the connector falls back to `initialize`.

#[path = "../support/mod.rs"]
mod support;

mod calls;
mod cancels;
mod lifecycle;

use cancelkit_gateway::upstream::ToolCall;
use serde_json::Value;
use serde_json::value::RawValue;

fn call(tool: &str, arguments: Value) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        arguments: Some(raw(&arguments)),
        progress: None,
    }
}

/// Arguments as a client writes them.
fn raw(arguments: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(arguments).expect("a value serializes")
}

/// The text of a `CallToolResult`'s first content block.
fn text(result: &RawValue) -> String {
    let result: Value = serde_json::from_str(result.get()).expect("a result is JSON");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
