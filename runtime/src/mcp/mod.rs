//! A typed MCP server on the [`Peer`] (feature `mcp-server`).
//!
//! Declare tools next to their handlers; the layer answers the lifecycle of every MCP revision
//! (`initialize` with the version pick for 2024-11-05 … 2025-11-25, `server/discover` for
//! 2026-07-28, `ping`, `notifications/initialized`), lists the tools with input schemas derived
//! from their argument types, and routes `tools/call` by name. A handler takes only what it
//! needs, as an axum handler does: [`Args`] (the typed arguments), [`Progress`], [`Meta`] (the
//! request's `_meta`), the negotiated [`McpRevision`], the [`Context`](crate::peer::Context).
//! Cancellation is what `#[cancellable]` on the handler says it is.
//!
//! ```no_run
//! use cancelkit::mcp::{Args, McpServer, Progress, TaskSupport, Tool};
//! use cancelkit::{JsonRpcError, cancellable};
//! use cancelkit::mcp::schemars::{self, JsonSchema};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Echo {
//!     /// The text to return.
//!     text: String,
//! }
//!
//! async fn echo(Args(Echo { text }): Args<Echo>) -> String {
//!     text
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Sleep {
//!     /// How long, in seconds.
//!     seconds: f64,
//! }
//!
//! #[cancellable]
//! async fn sleep(Args(Sleep { seconds }): Args<Sleep>, progress: Progress) -> Result<String, JsonRpcError> {
//!     progress.report(0.0, Some(seconds), None).await;
//!     tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
//!     Ok(format!("slept {seconds}s"))
//! }
//!
//! # async fn run() {
//! McpServer::new("demo", "1.0.0")
//!     .tool(Tool::new("echo", "Returns its text.", echo))
//!     .tool(Tool::new("sleep", "Sleeps; cancellable.", sleep).task_support(TaskSupport::Optional))
//!     .serve_stdio()
//!     .await;
//! # }
//! ```

mod extract;
mod lifecycle;
mod result;
mod tool;

pub use extract::{Args, Call, FromCall, Meta, Progress, Rejection};
pub use result::{IntoToolResult, Json, ToolResult};
pub use schemars_1 as schemars;
pub use tool::{TaskSupport, Tool, ToolHandler};

pub use crate::peer::McpRevision;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::peer::{Peer, PeerBuilder, Protocol, Router};

/// An MCP server: its name and version, its instructions and its tools.
///
/// [`router`](Self::router) gives the routes, to extend with methods of your own;
/// [`builder`](Self::builder) a [`PeerBuilder`] to connect (stdio, any byte stream) or to serve
/// over Streamable HTTP (`cancelkit::http::server::McpHttpServer`, feature `http`).
#[derive(Clone)]
pub struct McpServer {
    info: Value,
    instructions: Option<String>,
    tools: BTreeMap<String, Tool>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("info", &self.info)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server that tells clients its `name` and `version` (`serverInfo`) and has no tools yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            info: json!({"name": name.into(), "version": version.into()}),
            instructions: None,
            tools: BTreeMap::new(),
        }
    }

    /// A human-readable title for `serverInfo`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info["title"] = Value::String(title.into());
        self
    }

    /// What the server tells the model about using it (`instructions` of `initialize` and
    /// `server/discover`).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Adds a tool.
    ///
    /// # Panics
    ///
    /// When a tool of that name was added already: two handlers for one name is a mistake to
    /// see at startup, not a silent choice.
    pub fn tool(mut self, tool: Tool) -> Self {
        let name = tool.name().to_owned();
        assert!(
            !self.tools.contains_key(&name),
            "McpServer: a tool named `{name}` is added twice"
        );
        self.tools.insert(name, tool);
        self
    }

    /// The server's routes: the lifecycle of every revision, `tools/list` and `tools/call`.
    /// Add routes of your own to it (resources, prompts) before building the peer.
    pub fn router(&self) -> Router {
        lifecycle::router(Arc::new(self.clone()))
    }

    /// A [`PeerBuilder`] for a server of every revision (the client's first message chooses),
    /// with [`router`](Self::router) and the tools that run as tasks.
    pub fn builder(&self) -> PeerBuilder {
        self.builder_for(McpRevision::Negotiated)
    }

    /// As [`builder`](Self::builder), for one revision only.
    pub fn builder_for(&self, revision: McpRevision) -> PeerBuilder {
        let task_tools = self
            .tools
            .values()
            .filter(|tool| tool.support() != TaskSupport::Forbidden)
            .map(|tool| tool.name().to_owned());
        Peer::builder(Protocol::Mcp(revision))
            .task_tools(task_tools)
            .router(self.router())
    }

    /// Serves one client on stdin and stdout until it hangs up.
    pub async fn serve_stdio(self) {
        let peer = self
            .builder()
            .connect(tokio::io::stdin(), tokio::io::stdout());
        peer.closed().await;
    }

    pub(crate) fn info(&self) -> &Value {
        &self.info
    }

    pub(crate) fn instructions_text(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    pub(crate) fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    pub(crate) fn find(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }
}
