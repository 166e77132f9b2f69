//! The child process of the HTTP benchmark: `cancelkit-bench serve-http STACK WORKERS` serves
//! MCP Streamable HTTP at `http://127.0.0.1:PORT/mcp` with one stack, on a multi-thread tokio
//! runtime of `WORKERS` threads, and prints `listening on http://ADDR/mcp` on stdout once bound.
//!
//! Both stacks serve the same two tools, deserializing the same typed params (rmcp's
//! `CallToolRequestParams`) and answering with the same typed result (rmcp's `CallToolResult`):
//!
//! - `echo {text}` answers with its text;
//! - `sleep {ms}` sleeps; it writes `http-bench: started ms=MS` on stderr when it starts and
//!   `http-bench: stopped ms=MS unix_ns=N` when it is stopped before its end (N: the wall
//!   clock, `CLOCK_REALTIME`, the bench process's clock too), one write per line. The bench
//!   gives every sleep a different `ms` (10 s and up), so a line names its sleep.
//!
//! cancelkit drops a cancelled handler's future, which the sleep notices by a drop guard; rmcp
//! never drops a handler, it cancels the request's token, which the sleep watches (as rmcp's
//! users write it). Each stack otherwise runs with its defaults: sessions and SSE answers to
//! `tools/call`, a keep-alive comment every 15 s, Host checked against loopback names; both
//! turn Nagle off on accepted connections.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use cancelkit::JsonRpcError;
use cancelkit::http::server::McpHttpServer;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::origin::OriginPolicy;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{Stack, unix_ns};

/// The tag of the child's signal lines on stderr.
pub const TAG: &str = "http-bench";

/// What a `tools/call` asks for, read the same way by both stacks.
enum Tool {
    Echo(String),
    Sleep(Duration),
}

fn tool(params: &CallToolRequestParams) -> Result<Tool, String> {
    let argument = |name: &str| params.arguments.as_ref().and_then(|a| a.get(name));
    match params.name.as_ref() {
        "echo" => match argument("text") {
            Some(Value::String(text)) => Ok(Tool::Echo(text.clone())),
            _ => Err("echo needs a string `text`".into()),
        },
        "sleep" => match argument("ms").and_then(Value::as_u64) {
            Some(ms) if ms <= 3_600_000 => Ok(Tool::Sleep(Duration::from_millis(ms))),
            _ => Err("sleep needs `ms` up to 3600000".into()),
        },
        other => Err(format!("no tool `{other}`")),
    }
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// One line on stderr in one write (the bench reads them on a thread of its own).
fn signal(line: &str) {
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Held by a running sleep: reports the moment it was stopped, unless it ran to its end.
struct Stop {
    ms: u128,
    armed: bool,
}

impl Stop {
    /// Reports the start; the stop is reported when this is fired or dropped armed.
    fn started(duration: Duration) -> Stop {
        let ms = duration.as_millis();
        signal(&format!("{TAG}: started ms={ms}\n"));
        Stop { ms, armed: true }
    }

    fn fire(&mut self) {
        if std::mem::take(&mut self.armed) {
            let at = unix_ns();
            signal(&format!("{TAG}: stopped ms={} unix_ns={at}\n", self.ms));
        }
    }

    fn finished(mut self) {
        self.armed = false;
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.fire();
    }
}

/// cancelkit's router: `initialize` (legacy eras), `notifications/initialized`, `tools/call`.
fn cancelkit_router() -> Router {
    Router::new()
        .request("initialize", |params: Value, _cx: Context| async move {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            Ok::<_, JsonRpcError>(json!({
                "protocolVersion": McpRevision::answer_initialize(asked).to_string(),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "cancelkit-http-bench", "version": "1"}
            }))
        })
        .request(
            "tools/call",
            |params: CallToolRequestParams, _cx: Context| async move {
                let work = tool(&params).map_err(JsonRpcError::invalid_params)?;
                drop(params);
                match work {
                    Tool::Echo(t) => Ok::<_, JsonRpcError>(text(t)),
                    Tool::Sleep(duration) => {
                        // Dropped here once cancelled: the guard reports the stop.
                        let stop = Stop::started(duration);
                        tokio::time::sleep(duration).await;
                        stop.finished();
                        Ok(text("slept"))
                    }
                }
            },
        )
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
}

/// rmcp's server: the same tools.
#[derive(Clone)]
struct RmcpTools;

impl ServerHandler for RmcpTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let work = tool(&params).map_err(|e| ErrorData::invalid_params(e, None))?;
        drop(params);
        match work {
            Tool::Echo(t) => Ok(text(t).into()),
            Tool::Sleep(duration) => {
                // rmcp cancels the request's token; the handler watches it (and a drop of its
                // future, should rmcp drop it, is reported by the guard just the same).
                let mut stop = Stop::started(duration);
                tokio::select! {
                    () = tokio::time::sleep(duration) => {
                        stop.finished();
                        Ok(text("slept").into())
                    }
                    () = context.ct.cancelled() => {
                        stop.fire();
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
        }
    }
}

/// The axum app of `stack`, serving `/mcp`.
fn app(stack: Stack) -> axum::Router {
    match stack {
        Stack::Cancelkit => {
            let builder =
                Peer::builder(Protocol::Mcp(McpRevision::Negotiated)).router(cancelkit_router());
            // Host checked against loopback names, as rmcp does by default.
            McpHttpServer::new(builder)
                .origin_policy(OriginPolicy::new().loopback_hosts())
                .into_router()
        }
        Stack::Rmcp => {
            let service: StreamableHttpService<RmcpTools, LocalSessionManager> =
                StreamableHttpService::new(
                    || Ok(RmcpTools),
                    Arc::new(LocalSessionManager::default()),
                    StreamableHttpServerConfig::default(),
                );
            axum::Router::new().route_service("/mcp", service)
        }
    }
}

/// `cancelkit-bench serve-http STACK WORKERS`: serves until killed.
pub fn main(args: &[String]) {
    let stack = args.first().and_then(|a| Stack::from_arg(a));
    let workers = args.get(1).and_then(|w| w.parse::<usize>().ok());
    let (Some(stack), Some(workers)) = (stack, workers.filter(|w| *w > 0)) else {
        eprintln!("usage: cancelkit-bench serve-http cancelkit|rmcp WORKERS");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let bound = listener.local_addr().expect("its address");
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "listening on http://{bound}/mcp");
        let _ = stdout.flush();
        // Nagle off on every accepted connection, for both stacks (as cancelkit's gateway
        // does): with it on, an answer written in pieces waits for the client's delayed ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app(stack)).await.expect("serve");
    });
}
