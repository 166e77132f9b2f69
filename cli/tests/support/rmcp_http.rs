//! rmcp 3.11's Streamable HTTP MCP server, in-process on 127.0.0.1 (an OS-chosen port), for
//! `cancelkit check mcp --url`. Tools: `sleep {seconds}` (stops when rmcp cancels it: a
//! `notifications/cancelled` at the legacy revisions, a closed response stream at 2026-07-28)
//! and `echo {text}`. rmcp serves every revision it knows on one endpoint: 2026-07-28
//! statelessly, `initialize` opens a legacy session; [`Server::legacy`] speaks only up to
//! 2025-11-25, as a server from before 2026-07-28. The log says which sleeps were cancelled.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorData, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

/// The running server: its endpoint and what its tools did.
pub struct Server {
    /// The MCP endpoint.
    pub url: String,
    /// One entry per sleep that started, finished or was cancelled.
    pub log: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    /// Starts the server on `runtime`, speaking every revision rmcp knows.
    pub fn start(runtime: &tokio::runtime::Runtime) -> Server {
        Server::serve(runtime, false)
    }

    /// Starts a server speaking only the revisions up to 2025-11-25.
    pub fn legacy(runtime: &tokio::runtime::Runtime) -> Server {
        Server::serve(runtime, true)
    }

    fn serve(runtime: &tokio::runtime::Runtime, legacy: bool) -> Server {
        let log = Arc::new(Mutex::new(Vec::new()));
        let tools = Tools {
            legacy,
            log: Arc::clone(&log),
            router: Tools::tool_router(),
        };
        let config = StreamableHttpServerConfig::default()
            // hyper notices a closed SSE stream on its next write
            .with_sse_keep_alive(Some(Duration::from_millis(100)));
        let service: StreamableHttpService<Tools, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(tools.clone()), Arc::default(), config);
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        Server {
            url: format!("http://{addr}/mcp"),
            log,
        }
    }

    /// How many sleeps logged `event`.
    pub fn count(&self, event: &str) -> usize {
        let log = self.log.lock().unwrap();
        log.iter().filter(|e| e["event"] == event).count()
    }
}

#[derive(Clone)]
struct Tools {
    legacy: bool,
    log: Arc<Mutex<Vec<Value>>>,
    router: ToolRouter<Tools>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    seconds: f64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[tool_router]
impl Tools {
    #[tool(description = "Sleeps for `seconds`, unless cancelled")]
    async fn sleep(
        &self,
        Parameters(args): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let id = serde_json::to_value(&context.id).unwrap();
        let seconds = args.seconds.clamp(0.0, 60.0);
        self.log
            .lock()
            .unwrap()
            .push(json!({"event": "started", "id": id}));
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                self.log.lock().unwrap().push(json!({"event": "finished", "id": id}));
                Ok(CallToolResult::success(vec![ContentBlock::text("slept")]))
            }
            () = context.ct.cancelled() => {
                self.log.lock().unwrap().push(json!({"event": "cancelled", "id": id}));
                Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]))
            }
        }
    }

    #[tool(description = "Answers with its text at once")]
    async fn echo(
        &self,
        Parameters(args): Parameters<EchoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]))
    }
}

#[tool_handler(router = self.router)]
impl ServerHandler for Tools {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }
}
