//! The MCP servers behind the gateway, and how a tool call reaches the one that owns it.
//!
//! A call is a future: awaiting it gives the upstream's result; **dropping it unanswered
//! cancels the upstream work through the upstream that owns the call**, with the upstream's own
//! request id — `notifications/cancelled` on stdio and on a 2025-11-25 HTTP session, a closed
//! response stream at 2026-07-28. No other upstream hears of it. When the future runs inside a
//! [`cancelkit::Scope`] that was cancelled with a cause, that cause's summary is the reason
//! sent upstream.
//!
//! What reaches clients: a tool is called only if its upstream listed it ([`catalog`]; an
//! upstream with `allow_unlisted_tools` forwards any name), and when an upstream cannot be
//! reached or loses a call the client is told so by the upstream's name alone — the details
//! (which may hold the URL, its credentials, or what a server echoed back) go to the log
//! ([`CallError::to_jsonrpc`]). An upstream's own JSON-RPC error answer is passed on as it is.

pub mod catalog;
pub mod http;
mod peer;
pub mod redact;
pub mod stdio;

use std::sync::Arc;
use std::time::Duration;

use cancelkit::JsonRpcError;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::config::{self, Transport};
use catalog::{Catalog, MAX_TOOL_NAME_BYTES};

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
    /// The arguments (an object), as the client wrote them.
    pub arguments: Option<Box<RawValue>>,
    /// Where progress goes, when the client asked for it (it gave a `progressToken`).
    pub progress: Option<ProgressSink>,
}

/// Why a call gave no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The upstream answered with a JSON-RPC error (passed on as it is).
    #[error("upstream error {}: {}", .0.code.code(), .0.message)]
    Rpc(JsonRpcError),
    /// The upstream cannot be reached now (starting, restarting, refused the connection); the
    /// text is for the log.
    #[error("upstream unavailable: {0}")]
    Unavailable(String),
    /// The upstream went away while the call was in flight (its process died, the connection
    /// broke); the call's outcome is unknown. The text is for the log.
    #[error("upstream lost the call: {0}")]
    Lost(String),
}

impl CallError {
    /// The JSON-RPC error the caller gets: the upstream's own error as it is; for a failure to
    /// reach it, a fixed -32603 message naming the upstream `upstream` (and `data.upstream`),
    /// never the failure's text, which may hold the URL or what a server echoed back.
    pub fn to_jsonrpc(&self, upstream: &str) -> JsonRpcError {
        let message = match self {
            CallError::Rpc(e) => return e.clone(),
            CallError::Unavailable(_) => format!("upstream `{upstream}` is unavailable"),
            CallError::Lost(_) => {
                format!("upstream `{upstream}` went away during the call; its outcome is unknown")
            }
        };
        JsonRpcError::internal(message).with_data(json!({"upstream": upstream}))
    }
}

/// One upstream server.
#[derive(Debug)]
pub struct Upstream {
    name: String,
    connector: Connector,
    catalog: Catalog,
    allow_unlisted_tools: bool,
}

#[derive(Debug)]
enum Connector {
    /// A child process on stdio.
    Stdio(stdio::StdioUpstream),
    /// A Streamable HTTP server.
    Http(Box<http::HttpUpstream>),
}

impl Upstream {
    /// Starts the connector for `config` (a stdio child is spawned and supervised in the
    /// background, with the environment [`stdio::child_env`] makes; an HTTP upstream connects
    /// on first use).
    pub fn start(config: &config::Upstream) -> Upstream {
        let connector = match &config.transport {
            Transport::Stdio {
                command,
                args,
                inherit_env,
                env,
            } => Connector::Stdio(stdio::StdioUpstream::start(
                &config.name,
                config::Config::program(command),
                args.clone(),
                stdio::child_env(inherit_env, env, |name| std::env::var_os(name)),
            )),
            Transport::Http {
                url,
                trusted,
                headers,
            } => Connector::Http(Box::new(http::HttpUpstream::with_trust(
                &config.name,
                url,
                headers,
                trusted.clone(),
            ))),
        };
        Upstream {
            name: config.name.clone(),
            connector,
            catalog: Catalog::default(),
            allow_unlisted_tools: config.allow_unlisted_tools,
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn list_changes(&self) -> u64 {
        match &self.connector {
            Connector::Stdio(u) => u.list_changes(),
            Connector::Http(u) => u.list_changes(),
        }
    }

    /// Its tools (as `tools/list` gives them, unprefixed); the names are remembered for
    /// [`admit`](Self::admit).
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        let changes = self.list_changes();
        let outcome = match &self.connector {
            Connector::Stdio(u) => u.list_tools().await,
            Connector::Http(u) => u.list_tools().await,
        };
        self.catalog.record(&self.name, &outcome, changes);
        outcome
    }

    /// Whether a `tools/call` for its tool `tool` may be forwarded: `Ok(true)` when it listed
    /// the tool (or forwards any name), `Ok(false)` when it did not; an error when it could not
    /// be listed (see [`catalog`] for when it is listed again).
    pub async fn admit(&self, tool: &str) -> Result<bool, CallError> {
        if self.allow_unlisted_tools {
            return Ok(true);
        }
        self.catalog
            .admit(tool, || self.list_changes(), || self.list_tools())
            .await
    }

    /// Calls a tool. Dropping the future unanswered cancels the call upstream. A failure to
    /// reach the upstream is logged with its details.
    pub async fn call(&self, call: ToolCall) -> Result<Box<RawValue>, CallError> {
        let tool = call.tool.clone();
        let outcome = match &self.connector {
            Connector::Stdio(u) => u.call(call).await,
            Connector::Http(u) => u.call(call).await,
        };
        if let Err(error @ (CallError::Unavailable(_) | CallError::Lost(_))) = &outcome {
            tracing::warn!(upstream = %self.name, tool = %tool, "tools/call failed: {error}");
        }
        outcome
    }

    /// Stops it (a stdio child is closed and, after `grace`, killed).
    pub async fn shutdown(&self, grace: Duration) {
        match &self.connector {
            Connector::Stdio(u) => u.shutdown(grace).await,
            Connector::Http(u) => u.shutdown().await,
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

    /// The upstream owning the exposed tool `name`, and the tool's name there (listed or not).
    pub fn resolve<'a>(&self, name: &'a str) -> Option<(Arc<Upstream>, &'a str)> {
        self.list.iter().find_map(|up| {
            let tool = name
                .strip_prefix(up.name())?
                .strip_prefix(self.separator.as_str())?;
            (!tool.is_empty()).then(|| (Arc::clone(up), tool))
        })
    }

    /// The upstream a `tools/call` for the exposed name `name` goes to, and the tool's name
    /// there — if it may go: `name` is at most [`MAX_TOOL_NAME_BYTES`] long (else -32602
    /// naming the limit, before any lookup), some upstream owns it and listed the tool or
    /// takes unlisted ones (else -32602 `Unknown tool: <name>`, and the upstream is not
    /// asked). An upstream that cannot be listed gets the caller a -32603 naming it; the
    /// details are logged.
    pub async fn admit<'a>(&self, name: &'a str) -> Result<(Arc<Upstream>, &'a str), JsonRpcError> {
        if name.len() > MAX_TOOL_NAME_BYTES {
            return Err(JsonRpcError::invalid_params(format!(
                "Tool name too long: {} bytes (the limit is {MAX_TOOL_NAME_BYTES} bytes)",
                name.len()
            )));
        }
        let unknown = || JsonRpcError::invalid_params(format!("Unknown tool: {name}"));
        let (upstream, tool) = self.resolve(name).ok_or_else(unknown)?;
        match upstream.admit(tool).await {
            Ok(true) => Ok((upstream, tool)),
            Ok(false) => Err(unknown()),
            Err(error) => {
                tracing::warn!(upstream = upstream.name(), "cannot list its tools: {error}");
                Err(match error {
                    CallError::Unavailable(_) => error.to_jsonrpc(upstream.name()),
                    CallError::Rpc(_) | CallError::Lost(_) => JsonRpcError::internal(format!(
                        "upstream `{}` did not list its tools",
                        upstream.name()
                    ))
                    .with_data(json!({"upstream": upstream.name()})),
                })
            }
        }
    }

    /// Every upstream's tools with exposed names (`<upstream><separator><tool>`). An upstream
    /// that cannot answer now is left out (and logged), so one bad upstream does not hide the
    /// others; so is a tool whose exposed name is over [`MAX_TOOL_NAME_BYTES`], which could not
    /// be called.
    pub async fn list_tools(&self) -> Vec<Value> {
        let lists = futures_util::future::join_all(self.list.iter().map(|up| async move {
            match tokio::time::timeout(Duration::from_secs(10), up.list_tools()).await {
                Ok(Ok(tools)) => tools
                    .into_iter()
                    .filter_map(|mut tool| {
                        let name = tool.get("name")?.as_str()?.to_owned();
                        let exposed = format!("{}{}{name}", up.name(), self.separator);
                        if exposed.len() > MAX_TOOL_NAME_BYTES {
                            tracing::warn!(
                                upstream = up.name(),
                                "a tool's name is over {MAX_TOOL_NAME_BYTES} bytes; left out"
                            );
                            return None;
                        }
                        tool["name"] = json!(exposed);
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
