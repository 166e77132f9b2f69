//! [`JsonRpcError`]: an error a handler returns and the peer receives.

use cancelkit_protocol::jsonrpc::{CancelledErrorData, ErrorCode, ErrorObject};
use serde_json::Value;

use crate::Cancelled;

/// A JSON-RPC error: code, message and optional data, ready to send as a response's `error`.
///
/// `From<Cancelled>` gives -32800 "Request cancelled" with `data.reason`, so a
/// `#[cancellable]` handler can return `Result<T, JsonRpcError>` directly.
///
/// ```
/// use cancelkit::{CancelReason, Cancelled, JsonRpcError};
/// use cancelkit::protocol::jsonrpc::ErrorCode;
///
/// let error = JsonRpcError::from(Cancelled::new(CancelReason::Timeout(std::time::Duration::from_secs(30))));
/// assert_eq!(error.code, ErrorCode::RequestCancelled);
/// assert_eq!(error.message, "Request cancelled");
/// assert_eq!(error.data.unwrap()["reason"], "timed out after 30s");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({})", code.code())]
pub struct JsonRpcError {
    /// The error code.
    pub code: ErrorCode,
    /// A short description.
    pub message: String,
    /// Extra detail for the peer.
    pub data: Option<Value>,
}

impl JsonRpcError {
    /// An error with `code` and `message` and no data.
    pub fn new(code: impl Into<ErrorCode>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }

    /// An error with `code` and its standard message.
    pub fn from_code(code: ErrorCode) -> Self {
        Self::new(code, code.message())
    }

    /// Replaces the error's data.
    pub fn with_data(mut self, data: impl Into<Value>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// -32602 Invalid params, with `message`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }

    /// -32601 Method not found.
    pub fn method_not_found() -> Self {
        Self::from_code(ErrorCode::MethodNotFound)
    }

    /// -32603 Internal error, with `message`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }

    /// Whether this is a -32800 cancellation error.
    pub fn is_cancelled(&self) -> bool {
        self.code == ErrorCode::RequestCancelled
    }
}

impl From<Cancelled> for JsonRpcError {
    fn from(cancelled: Cancelled) -> Self {
        let data = CancelledErrorData {
            reason: Some(cancelled.reason.to_string()),
            request_id: None,
            partial: None,
            extra: Default::default(),
        };
        Self::from_code(ErrorCode::RequestCancelled)
            .with_data(serde_json::to_value(data).unwrap_or(Value::Null))
    }
}

impl From<ErrorObject> for JsonRpcError {
    fn from(error: ErrorObject) -> Self {
        Self {
            code: error.code,
            message: error.message,
            data: error.data,
        }
    }
}

impl From<JsonRpcError> for ErrorObject {
    fn from(error: JsonRpcError) -> Self {
        Self {
            code: error.code,
            message: error.message,
            data: error.data,
        }
    }
}

#[cfg(feature = "rmcp")]
impl From<Cancelled> for rmcp::model::ErrorData {
    /// -32800 "Request cancelled" with `data.reason`, so an rmcp tool returning
    /// `Result<_, ErrorData>` can be `#[cancellable(token = ct)]`.
    fn from(cancelled: Cancelled) -> Self {
        let error = JsonRpcError::from(cancelled);
        rmcp::model::ErrorData::new(
            rmcp::model::ErrorCode(error.code.code() as i32),
            error.message,
            error.data,
        )
    }
}

#[cfg(feature = "acp")]
impl From<Cancelled> for agent_client_protocol::Error {
    /// -32800 "Request cancelled" with `data.reason`, so an ACP SDK handler returning
    /// `Result<_, agent_client_protocol::Error>` can be `#[cancellable(token = cancellation)]`.
    fn from(cancelled: Cancelled) -> Self {
        let error = JsonRpcError::from(cancelled);
        agent_client_protocol::Error::new(
            agent_client_protocol::ErrorCode::REQUEST_CANCELLED,
            error.message,
        )
        .data(error.data)
    }
}
