//! The MCP servers behind the gateway, and how a tool call reaches the one that owns it.
//!
//! A call is a future: awaiting it gives the upstream's result; **dropping it unanswered
//! cancels the upstream work through the upstream that owns the call**, with the upstream's own
//! request id — `notifications/cancelled` on stdio and on a 2025-11-25 HTTP session, a closed
//! response stream at 2026-07-28. No other upstream hears of it. When the future runs inside a
//! [`cancelkit::Scope`] that was cancelled with a cause, that cause's summary is the reason
//! sent upstream.

pub mod http;
mod peer;
pub mod stdio;

use std::sync::Arc;
use std::time::Duration;

use cancelkit::JsonRpcError;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::config::{self, Transport};

/// How many progress notifications may wait for a slow caller; beyond, progress (advisory
/// by nature) is dropped rather than held.
pub const PROGRESS_BUFFER: usize = 64;

/// Where an upstream's `notifications/progress` for one call go: their params without the
/// `progressToken` (the front end puts the caller's own token back).
pub type ProgressSink = mpsc::Sender<Value>;

/// One `tools/call` for an upstream, with the tool's own (unprefixed) name.
#[derive(Debug)]
pub struct ToolCall {
    /// The upstream's name for the tool.
    pub tool: String,
    /// The arguments, as the client sent them.
    pub arguments: Option<Value>,
    /// Where progress goes, when the client asked for it (it gave a `progressToken`).
    pub progress: Option<ProgressSink>,
}

/// Why a call gave no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The upstream answered with a JSON-RPC error (passed on as it is).
    #[error("upstream error {}: {}", .0.code.code(), .0.message)]
    Rpc(JsonRpcError),
    /// The upstream cannot be reached now (starting, restarting, refused the connection).
    #[error("upstream unavailable: {0}")]
    Unavailable(String),
    /// The upstream went away while the call was in flight (its process died, the connection
    /// broke); the call's outcome is unknown.
    #[error("upstream lost the call: {0}")]
    Lost(String),
}

impl CallError {
    /// The JSON-RPC error the caller gets.
    pub fn to_jsonrpc(&self, upstream: &str) -> JsonRpcError {
        match self {
            CallError::Rpc(e) => e.clone(),
            CallError::Unavailable(why) => {
                JsonRpcError::internal(format!("upstream `{upstream}` is unavailable: {why}"))
            }
            CallError::Lost(why) => JsonRpcError::internal(format!(
                "upstream `{upstream}` went away during the call: {why}"
            )),
        }
    }
}

/// One upstream server.
#[derive(Debug)]
pub enum Upstream {
    /// A child process on stdio.
    Stdio(stdio::StdioUpstream),
    /// A Streamable HTTP server.
    Http(Box<http::HttpUpstream>),
}

impl Upstream {
    /// Starts the connector for `config` (a stdio child is spawned and supervised in the
    /// background; an HTTP upstream connects on first use).
    pub fn start(config: &config::Upstream) -> Upstream {
        match &config.transport {
            Transport::Stdio { command, args, env } => {
                Upstream::Stdio(stdio::StdioUpstream::start(
                    &config.name,
                    config::Config::program(command),
                    args.clone(),
                    env.clone(),
                ))
            }
            Transport::Http {
                url,
                trusted,
                headers,
            } => Upstream::Http(Box::new(http::HttpUpstream::with_trust(
                &config.name,
                url,
                headers,
                trusted.clone(),
            ))),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        match self {
            Upstream::Stdio(u) => u.name(),
            Upstream::Http(u) => u.name(),
        }
    }

    /// Its tools (as `tools/list` gives them, unprefixed).
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        match self {
            Upstream::Stdio(u) => u.list_tools().await,
            Upstream::Http(u) => u.list_tools().await,
        }
    }

    /// Calls a tool. Dropping the future unanswered cancels the call upstream.
    pub async fn call(&self, call: ToolCall) -> Result<Value, CallError> {
        match self {
            Upstream::Stdio(u) => u.call(call).await,
            Upstream::Http(u) => u.call(call).await,
        }
    }

    /// Stops it (a stdio child is closed and, after `grace`, killed).
    pub async fn shutdown(&self, grace: Duration) {
        match self {
            Upstream::Stdio(u) => u.shutdown(grace).await,
            Upstream::Http(u) => u.shutdown().await,
        }
    }
}

/// Every upstream, and the mapping between exposed and upstream tool names.
#[derive(Debug)]
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    separator: String,
}

impl Upstreams {
    /// Starts every configured upstream.
    pub fn start(config: &config::Config) -> Upstreams {
        Upstreams {
            list: config
                .upstreams
                .iter()
                .map(|u| Arc::new(Upstream::start(u)))
                .collect(),
            separator: config.tool_separator.clone(),
        }
    }

    /// The upstream owning the exposed tool `name`, and the tool's name there.
    pub fn resolve<'a>(&self, name: &'a str) -> Option<(Arc<Upstream>, &'a str)> {
        self.list.iter().find_map(|up| {
            let tool = name
                .strip_prefix(up.name())?
                .strip_prefix(self.separator.as_str())?;
            (!tool.is_empty()).then(|| (Arc::clone(up), tool))
        })
    }

    /// Every upstream's tools with exposed names (`<upstream><separator><tool>`). An upstream
    /// that cannot answer now is left out (and logged), so one bad upstream does not hide the
    /// others.
    pub async fn list_tools(&self) -> Vec<Value> {
        let lists = futures_util::future::join_all(self.list.iter().map(|up| async move {
            match tokio::time::timeout(Duration::from_secs(10), up.list_tools()).await {
                Ok(Ok(tools)) => tools
                    .into_iter()
                    .filter_map(|mut tool| {
                        let name = tool.get("name")?.as_str()?.to_owned();
                        tool["name"] = json!(format!("{}{}{name}", up.name(), self.separator));
                        Some(tool)
                    })
                    .collect(),
                Ok(Err(e)) => {
                    tracing::warn!(upstream = up.name(), "tools/list failed: {e}");
                    Vec::new()
                }
                Err(_) => {
                    tracing::warn!(upstream = up.name(), "tools/list took over 10 s");
                    Vec::new()
                }
            }
        }))
        .await;
        lists.into_iter().flatten().collect()
    }

    /// Every upstream.
    pub fn all(&self) -> &[Arc<Upstream>] {
        &self.list
    }
}
