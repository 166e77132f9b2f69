//! A tool: its name, description, schemas, task support and handler.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde_json::{Value, json};

use super::extract::{Call, FromCall, Rejection};
use super::result::{IntoToolResult, ToolResult};
use crate::JsonRpcError;
use crate::peer::router::BoxFuture;

/// Whether a tool runs as a task when the client asks (MCP 2025-11-25 task-augmented
/// `tools/call`; at 2026-07-28 the `io.modelcontextprotocol/tasks` extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Never a task (listed without `execution`).
    #[default]
    Forbidden,
    /// A task when the client asks for one, an ordinary call otherwise (`taskSupport:
    /// "optional"`).
    Optional,
}

/// A tool handler: an async function whose parameters are all [`FromCall`] extractors (up to
/// six) and whose output is [`IntoToolResult`]. `T` is the tuple of its parameter types; it only
/// tells the implementations apart.
pub trait ToolHandler<T>: Clone + Send + Sync + 'static {
    /// Runs the handler on a call.
    fn call(&self, call: Call) -> BoxFuture<Result<ToolResult, JsonRpcError>>;

    /// The `inputSchema`: from the first extractor that reads the arguments, otherwise an
    /// object with no properties.
    fn input_schema() -> Value;

    /// The `outputSchema`, when the handler returns typed structured content.
    fn output_schema() -> Option<Value>;
}

/// The tool's answer when an extractor refused the call.
fn rejected(rejection: Rejection) -> Result<ToolResult, JsonRpcError> {
    match rejection {
        Rejection::Invalid(text) => Ok(ToolResult::error(text)),
        Rejection::Rpc(error) => Err(error),
    }
}

macro_rules! tool_handler {
    ($($ty:ident),*) => {
        impl<F, Fut, R, $($ty,)*> ToolHandler<($($ty,)*)> for F
        where
            F: Fn($($ty),*) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future<Output = R> + Send + 'static,
            R: IntoToolResult,
            $($ty: FromCall + Send + 'static,)*
        {
            #[allow(non_snake_case, unused_variables)]
            fn call(&self, call: Call) -> BoxFuture<Result<ToolResult, JsonRpcError>> {
                $(
                    let $ty = match $ty::from_call(&call) {
                        Ok(value) => value,
                        Err(rejection) => return Box::pin(std::future::ready(rejected(rejection))),
                    };
                )*
                let future = (self)($($ty),*);
                Box::pin(async move { future.await.into_tool_result() })
            }

            fn input_schema() -> Value {
                None$(.or_else($ty::input_schema))*
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}))
            }

            fn output_schema() -> Option<Value> {
                R::output_schema()
            }
        }
    };
}

tool_handler!();
tool_handler!(T1);
tool_handler!(T1, T2);
tool_handler!(T1, T2, T3);
tool_handler!(T1, T2, T3, T4);
tool_handler!(T1, T2, T3, T4, T5);
tool_handler!(T1, T2, T3, T4, T5, T6);

trait ErasedTool: Send + Sync {
    fn call(&self, call: Call) -> BoxFuture<Result<ToolResult, JsonRpcError>>;
}

struct Erased<H, T> {
    handler: H,
    _args: PhantomData<fn() -> T>,
}

impl<H: ToolHandler<T>, T: 'static> ErasedTool for Erased<H, T> {
    fn call(&self, call: Call) -> BoxFuture<Result<ToolResult, JsonRpcError>> {
        self.handler.call(call)
    }
}

/// A tool of an [`McpServer`](super::McpServer).
#[derive(Clone)]
pub struct Tool {
    name: String,
    listed: Value,
    unlisted: bool,
    task_support: TaskSupport,
    handler: Arc<dyn ErasedTool>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("listed", &self.listed)
            .field("task_support", &self.task_support)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool named `name` that `handler` serves; its input schema comes from the handler's
    /// [`Args`](super::Args) type, its output schema from a [`Json`](super::Json) result.
    ///
    /// # Panics
    ///
    /// When the arguments' schema, or the schema of a [`Json`](super::Json) result, is not an
    /// object schema (MCP arguments and structured content are objects; use a struct).
    pub fn new<H: ToolHandler<T>, T: 'static>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: H,
    ) -> Self {
        let name = name.into();
        let input = H::input_schema();
        assert!(
            input.get("type") == Some(&json!("object")),
            "tool `{name}`: its arguments must be an object (a struct), not {input}"
        );
        let mut listed = json!({
            "name": name,
            "description": description.into(),
            "inputSchema": input,
        });
        if let Some(output) = H::output_schema() {
            assert!(
                output.get("type") == Some(&json!("object")),
                "tool `{name}`: its structured result must be an object (a struct), not {output}"
            );
            listed["outputSchema"] = output;
        }
        Self {
            name,
            listed,
            unlisted: false,
            task_support: TaskSupport::Forbidden,
            handler: Arc::new(Erased {
                handler,
                _args: PhantomData,
            }),
        }
    }

    /// A display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.listed["title"] = Value::String(title.into());
        self
    }

    /// Whether the tool runs as a task when the client asks; default
    /// [`TaskSupport::Forbidden`].
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// Tool annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`).
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.listed["annotations"] = annotations;
        self
    }

    /// Serves the tool without listing it in `tools/list`: a tool reached by name only (a
    /// gateway that must refuse tools its upstream never listed is tested against one).
    pub fn unlisted(mut self) -> Self {
        self.unlisted = true;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn support(&self) -> TaskSupport {
        self.task_support
    }

    /// The tool as `tools/list` gives it to a client of `legacy_2024` (no `outputSchema`,
    /// `title` or `execution` before 2025).
    pub(crate) fn listed(&self, legacy_2024: bool) -> Option<Value> {
        if self.unlisted {
            return None;
        }
        let mut listed = self.listed.clone();
        if legacy_2024 {
            if let Some(fields) = listed.as_object_mut() {
                fields.remove("outputSchema");
                fields.remove("title");
            }
        } else if self.task_support == TaskSupport::Optional {
            listed["execution"] = json!({"taskSupport": "optional"});
        }
        Some(listed)
    }

    pub(crate) fn call(&self, call: Call) -> BoxFuture<Result<ToolResult, JsonRpcError>> {
        self.handler.call(call)
    }
}
