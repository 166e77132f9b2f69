//! What a tool handler returns, and how it becomes a `CallToolResult`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::JsonRpcError;

/// A `CallToolResult`: content blocks, optional structured content, and whether the tool
/// failed (a tool error the model sees, as opposed to a JSON-RPC error).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolResult {
    content: Vec<Value>,
    structured: Option<Value>,
    is_error: bool,
}

impl ToolResult {
    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::default().with_content(json!({"type": "text", "text": text.into()}))
    }

    /// A tool error of one text block (`isError: true`).
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(text)
        }
    }

    /// Adds a content block (`{"type": "image", ..}`, `{"type": "resource_link", ..}`, ...).
    pub fn with_content(mut self, block: Value) -> Self {
        self.content.push(block);
        self
    }

    /// Sets the structured content (`structuredContent`, an object).
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
        self
    }

    /// Whether it is a tool error.
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The result as it goes on the wire.
    pub fn to_value(&self) -> Value {
        let mut value = json!({"content": self.content, "isError": self.is_error});
        if let Some(structured) = &self.structured {
            value["structuredContent"] = structured.clone();
        }
        value
    }
}

/// Structured content: serialized as the result's `structuredContent` and, for clients that do
/// not read it, as a text block of the same JSON; the tool's `outputSchema` is `T`'s schema.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

/// What a tool handler may return.
pub trait IntoToolResult {
    /// The `CallToolResult`, or the JSON-RPC error to answer with (cancellation: -32800).
    ///
    /// # Errors
    ///
    /// The handler's error, or structured content that does not serialize.
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError>;

    /// The tool's `outputSchema`, when the result is typed structured content.
    fn output_schema() -> Option<Value> {
        None
    }
}

impl IntoToolResult for ToolResult {
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError> {
        Ok(self)
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError> {
        Ok(ToolResult::text(self))
    }
}

impl IntoToolResult for &'static str {
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError> {
        Ok(ToolResult::text(self))
    }
}

impl<T: Serialize + schemars_1::JsonSchema> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError> {
        let value = serde_json::to_value(&self.0).map_err(|e| {
            JsonRpcError::internal(format!("the tool's result does not serialize: {e}"))
        })?;
        Ok(ToolResult::text(value.to_string()).with_structured(value))
    }

    fn output_schema() -> Option<Value> {
        Some(super::extract::schema_of::<T>())
    }
}

impl<T: IntoToolResult, E: Into<JsonRpcError>> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> Result<ToolResult, JsonRpcError> {
        self.map_err(Into::into)?.into_tool_result()
    }

    fn output_schema() -> Option<Value> {
        T::output_schema()
    }
}
