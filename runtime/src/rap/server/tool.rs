//! What a tool handler is given ([`ToolCall`]) and what it returns ([`ToolOutput`],
//! [`ToolError`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::Cancelled;

/// The context a tool handler runs in.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The invocation's `group_id`: the conversation thread.
    pub thread_id: String,
    /// The invocation's `id`: the tool call.
    pub tool_call_id: String,
    /// The user on whose behalf the call runs, if the runtime said.
    pub user_id: Option<String>,
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// Structured content blocks.
    Content(Vec<Value>),
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::Text(text.to_owned())
    }
}

/// A tool's failure, reported to the runtime as an `is_error` result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<Cancelled> for ToolError {
    fn from(cancelled: Cancelled) -> Self {
        ToolError(cancelled.to_string())
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError(message.to_owned())
    }
}

impl From<crate::rap::process::ProcessError> for ToolError {
    fn from(error: crate::rap::process::ProcessError) -> Self {
        ToolError(error.to_string())
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A tool's handler, type-erased.
pub(super) type Handler =
    Arc<dyn Fn(Value, ToolCall) -> BoxFuture<Result<ToolOutput, ToolError>> + Send + Sync>;

/// One operation (tool) of a server.
pub(super) struct Operation {
    pub(super) description: String,
    pub(super) input_schema: Value,
    pub(super) handler: Handler,
}
