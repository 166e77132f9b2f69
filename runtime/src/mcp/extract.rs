//! What a tool handler can take: the typed arguments, the progress reporter, the request's
//! `_meta`, the negotiated revision, the context.

use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::McpRevision;
use crate::JsonRpcError;
use crate::peer::Context;

/// A `tools/call` as its handler's extractors see it.
#[derive(Debug)]
pub struct Call {
    pub(crate) name: String,
    pub(crate) arguments: Value,
    pub(crate) meta: Map<String, Value>,
    pub(crate) cx: Context,
}

impl Call {
    /// The tool called.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The call's `arguments` (an empty object when the client sent none).
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The call's `_meta` (empty when the client sent none).
    pub fn meta(&self) -> &Map<String, Value> {
        &self.meta
    }

    /// The request's context: the connection, the request id, what the transport knows.
    pub fn context(&self) -> &Context {
        &self.cx
    }
}

/// Why an extractor refused a call.
#[derive(Debug)]
pub enum Rejection {
    /// The arguments do not fit the tool: answered as a tool error (`isError: true`, as MCP
    /// 2025-11-25 wants for input validation, so the model can correct itself).
    Invalid(String),
    /// Answered with this JSON-RPC error.
    Rpc(JsonRpcError),
}

/// Something a tool handler takes as a parameter, made from the [`Call`].
pub trait FromCall: Sized {
    /// Makes the value, or refuses the call.
    ///
    /// # Errors
    ///
    /// The [`Rejection`] the client gets instead of running the handler.
    fn from_call(call: &Call) -> Result<Self, Rejection>;

    /// The JSON Schema of the tool's arguments, if this extractor reads them (the tool's
    /// `inputSchema` comes from the first extractor that gives one).
    fn input_schema() -> Option<Value> {
        None
    }
}

/// The tool's arguments, deserialized into `T`; the tool's `inputSchema` is `T`'s JSON Schema
/// (derive `serde::Deserialize` and [`JsonSchema`](super::schemars::JsonSchema); doc comments
/// on the fields become their descriptions). `T` must be a struct or a map: MCP arguments are an
/// object.
///
/// The derive needs a `schemars` in scope: a dependency on `schemars` 1, or
/// `use cancelkit::mcp::schemars::{self, JsonSchema};`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Args<T>(pub T);

impl<T: DeserializeOwned + schemars_1::JsonSchema> FromCall for Args<T> {
    fn from_call(call: &Call) -> Result<Self, Rejection> {
        T::deserialize(&call.arguments)
            .map(Args)
            .map_err(|e| Rejection::Invalid(format!("invalid arguments for `{}`: {e}", call.name)))
    }

    fn input_schema() -> Option<Value> {
        Some(schema_of::<T>())
    }
}

/// The JSON Schema of `T`, as a tool's `inputSchema` or `outputSchema` (draft 2020-12, the
/// MCP default, without a `$schema` key).
pub(crate) fn schema_of<T: schemars_1::JsonSchema>() -> Value {
    let generator = schemars_1::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.meta_schema = None)
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The request's `_meta` (an empty map when the client sent none).
#[derive(Debug, Clone, Default)]
pub struct Meta(pub Map<String, Value>);

impl FromCall for Meta {
    fn from_call(call: &Call) -> Result<Self, Rejection> {
        Ok(Meta(call.meta.clone()))
    }
}

impl FromCall for Context {
    fn from_call(call: &Call) -> Result<Self, Rejection> {
        Ok(call.cx.clone())
    }
}

/// The revision the connection speaks.
impl FromCall for McpRevision {
    fn from_call(call: &Call) -> Result<Self, Rejection> {
        call.cx.peer().mcp_revision().ok_or_else(|| {
            Rejection::Rpc(JsonRpcError::internal(
                "the connection's MCP revision is not known yet",
            ))
        })
    }
}

/// Reports the call's progress to the client (`notifications/progress`), when the client asked
/// for it with a `progressToken` in the call's `_meta`; otherwise reports go nowhere.
#[derive(Debug)]
pub struct Progress {
    token: Option<Value>,
    cx: Context,
    last: Mutex<Option<f64>>,
}

impl Progress {
    /// Whether the client asked for progress.
    pub fn wanted(&self) -> bool {
        self.token.is_some()
    }

    /// Sends `progress` (of `total`, if known) with an optional message. MCP wants each report
    /// to be further along than the last: a report that is not (or is not a finite number) is
    /// not sent. Returns whether it was sent.
    pub async fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        {
            let mut last = crate::sync::lock(&self.last);
            if !progress.is_finite() || last.is_some_and(|last| progress <= last) {
                tracing::debug!(
                    progress,
                    "a progress report not beyond the last was not sent"
                );
                return false;
            }
            *last = Some(progress);
        }
        let mut params = json!({"progressToken": token, "progress": progress});
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        self.cx
            .peer()
            .notify("notifications/progress", params)
            .await
            .is_ok()
    }
}

impl FromCall for Progress {
    fn from_call(call: &Call) -> Result<Self, Rejection> {
        Ok(Progress {
            token: call.meta.get("progressToken").cloned(),
            cx: call.cx.clone(),
            last: Mutex::new(None),
        })
    }
}
