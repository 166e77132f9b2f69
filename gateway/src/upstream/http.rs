//! An upstream MCP server over Streamable HTTP (being written).
//!
//! INTERFACE: `HttpUpstream::new(name, url)`, `name()`, `list_tools()`, `call(ToolCall)`
//! (dropping the future unanswered cancels upstream: `notifications/cancelled` with the
//! upstream's own id on a 2025-11-25 session, the response stream closed at 2026-07-28),
//! `shutdown()` (ends a 2025-11-25 session with DELETE).

use serde_json::Value;

use super::{CallError, ToolCall};

/// A Streamable HTTP upstream.
#[derive(Debug)]
pub struct HttpUpstream {
    name: String,
    url: String,
}

impl HttpUpstream {
    /// A connector for the MCP endpoint `url` (nothing is sent until the first use).
    pub fn new(name: &str, url: &str) -> HttpUpstream {
        HttpUpstream {
            name: name.to_owned(),
            url: url.to_owned(),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tools.
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        Err(CallError::Unavailable(format!("{}: not written yet", self.url)))
    }

    /// Calls a tool; dropping the future cancels it upstream.
    pub async fn call(&self, call: ToolCall) -> Result<Value, CallError> {
        let _ = call;
        Err(CallError::Unavailable(format!("{}: not written yet", self.url)))
    }

    /// Ends the session, if one is open.
    pub async fn shutdown(&self) {}
}
