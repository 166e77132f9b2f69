//! An MCP server on rmcp 3.11 over stdio, the rmcp peer of `tests/check_peers.rs`: a slow tool
//! `sleep {seconds}` and a fast tool `echo {text}`, written as an rmcp user would.
//!
//! * `sleep` awaits its timer and does not watch its cancellation token (most tools do not):
//!   what a `notifications/cancelled` does to it is rmcp's own behaviour.
//! * For a client that declares the tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28)
//!   `sleep` runs as a task of rmcp's `TaskManager`, which stops it on `tasks/cancel` (the
//!   operation selects on the task's cancellation, as rmcp's own task example does).
//! * `subscriptions/listen` is offered (every requested filter accepted; rmcp's default
//!   `listen`, which lasts until the stream is cancelled or the connection closes).
//!
//! ```text
//! cargo run -p cancelkit-cli --example rmcp_server
//! ```

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, ServerCapabilities,
    ServerConfig, SubscriptionFilter,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

#[derive(Clone)]
struct Peer {
    tool_router: ToolRouter<Peer>,
    tasks: TaskManager,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    /// How long to sleep, in seconds.
    seconds: f64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to return.
    text: String,
}

/// `seconds` as a duration, if it is one (0 to 3600).
fn duration(seconds: f64) -> Result<Duration, ErrorData> {
    if (0.0..=3600.0).contains(&seconds) {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(ErrorData::invalid_params(
            "`seconds` must be between 0 and 3600",
            None,
        ))
    }
}

fn slept(seconds: f64) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!("slept {seconds}s"))])
}

#[tool_router]
impl Peer {
    #[tool(description = "Sleeps for the given number of seconds")]
    async fn sleep(
        &self,
        Parameters(args): Parameters<SleepArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        tokio::time::sleep(duration(args.seconds)?).await;
        Ok(slept(args.seconds))
    }

    #[tool(description = "Returns its text")]
    async fn echo(
        &self,
        Parameters(args): Parameters<EchoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]))
    }
}

impl Peer {
    /// `sleep` as a task: stops with `cancelled` when `tasks/cancel` arrives.
    fn sleep_task(&self, request: &CallToolRequestParams) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let args: SleepArgs = serde_json::from_value(arguments)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let wait = duration(args.seconds)?;
        let task = self.tasks.spawn(TaskOptions::new(), move |cx| {
            Box::pin(async move {
                tokio::select! {
                    () = cx.cancelled() => Err(TaskExit::Cancelled),
                    () = tokio::time::sleep(wait) => Ok(slept(args.seconds)),
                }
            })
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
}

#[tool_handler]
impl ServerHandler for Peer {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if request.name == "sleep" && tasks {
            return self.sleep_task(&request);
        }
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "cancelkit-check-rmcp-peer",
            env!("CARGO_PKG_VERSION"),
        ))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let peer = Peer {
        tool_router: Peer::tool_router(),
        tasks: TaskManager::new(),
    };
    let running = peer.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
