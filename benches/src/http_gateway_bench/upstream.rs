//! The one upstream every stack of the HTTP gateway benchmark calls: rmcp 3.11's Streamable HTTP
//! server (the official Rust SDK) in a child process of the bench binary
//! (`cancelkit-bench upstream-http ADDR`), with two tools:
//!
//! - `echo {text}` answers with its text;
//! - `sleep {seconds}` sleeps, and stops when cancelled (its token fired, or its future
//!   dropped); it writes `upstream-http: started sleep` on stderr when it starts and
//!   `upstream-http: cancelled sleep (token|dropped) [unix_us=...]` when it is stopped, the
//!   wall-clock time of the stop, which the bench reads (the same clock as its own).
//!
//! While a `sleep` runs, each `DELETE` (a client ending its session) is logged too, as
//! `upstream-http: session deleted [unix_us=...]`: for a client that cancels by ending the
//! session, the time its cancel reached the upstream.
//!
//! rmcp serves both eras on its endpoint: 2025-11-25 sessions (`initialize`) and 2026-07-28
//! stateless requests. The process prints `listening on http://ADDR/mcp` on stdout once bound.
//!
//! [`command`] is the one place that says which program serves the upstream, so it can be
//! swapped (for cancelkit's own Streamable HTTP server, say) without touching the rest.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::ListenerExt;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::process::Proc;
use crate::gateway_bench::{StopLog, unix_us};

/// The tag of the upstream's stderr lines.
pub const TAG: &str = "upstream-http";

/// The command that serves the upstream on `127.0.0.1:0`: this bench binary's `upstream-http`
/// subcommand. Whatever it runs must print `listening on http://ADDR/PATH` on stdout and the
/// `started` / `cancelled ... [unix_us=N]` lines above on stderr.
pub fn command() -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the bench binary's path"));
    command.args(["upstream-http", "127.0.0.1:0"]);
    command
}

/// The running upstream, its sleeps' starts and stops watched on its stderr.
pub struct Upstream {
    /// Its MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Its starts and stops.
    pub log: StopLog,
    /// The process (killed when dropped).
    pub proc: Proc,
}

impl Upstream {
    /// Starts [`command`] and waits for its address.
    pub fn start() -> Upstream {
        let mut command = command();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut proc = Proc::spawn(command, "the upstream");
        let log = StopLog::watch(proc.child.stderr.take().expect("piped"), TAG);
        let stdout = BufReader::new(proc.child.stdout.take().expect("piped"));
        let mut url = None;
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("listening on ") {
                url = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        Upstream {
            url: url.expect("the upstream printed its address"),
            log,
            proc,
        }
    }
}

/// `cancelkit-bench upstream-http ADDR`: serves the upstream until killed.
pub fn main(args: &[String]) {
    let addr = args.first().map(String::as_str).unwrap_or("127.0.0.1:0");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let config = StreamableHttpServerConfig::default();
        let service: StreamableHttpService<Tools, LocalSessionManager> =
            StreamableHttpService::new(|| Ok(Tools), Arc::default(), config);
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(log_deletes));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind the upstream");
        let local = listener.local_addr().expect("its address");
        println!("listening on http://{local}/mcp");
        // Nagle off, as the gateway has it: else a response's last bytes wait for the client's
        // delayed ACK (~40 ms) whenever they are written apart from the rest.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, router).await.expect("serve");
    });
}

/// How many `sleep` calls are running.
static SLEEPING: AtomicUsize = AtomicUsize::new(0);

/// Logs a `DELETE` that arrives while a `sleep` runs.
async fn log_deletes(request: Request, next: Next) -> Response {
    if request.method() == axum::http::Method::DELETE && SLEEPING.load(Ordering::SeqCst) > 0 {
        eprintln!("{TAG}: session deleted [unix_us={}]", unix_us());
    }
    next.run(request).await
}

#[derive(Clone)]
struct Tools;

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("a schema is an object")
    };
    Tool::new(name, description, schema)
}

fn text(result: &str) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(result)]).into()
}

/// Counts a running sleep; writes the stop line if the sleep is dropped before it ends.
struct Unfinished {
    armed: bool,
}

impl Unfinished {
    fn start() -> Unfinished {
        SLEEPING.fetch_add(1, Ordering::SeqCst);
        eprintln!("{TAG}: started sleep");
        Unfinished { armed: true }
    }

    fn stopped(&mut self, how: &str) {
        self.armed = false;
        eprintln!("{TAG}: cancelled sleep ({how}) [unix_us={}]", unix_us());
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.armed {
            self.stopped("dropped");
        }
        SLEEPING.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                "echo",
                "Answers with its text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool(
                "sleep",
                "Sleeps for `seconds`; stops when cancelled",
                json!({"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let argument = |name: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .cloned()
                .unwrap_or(Value::Null)
        };
        match &*request.name {
            "echo" => match argument("text") {
                Value::String(s) => Ok(text(&s)),
                _ => Err(ErrorData::invalid_params("`text` must be a string", None)),
            },
            "sleep" => {
                let Some(seconds) = argument("seconds").as_f64().filter(|s| *s >= 0.0) else {
                    return Err(ErrorData::invalid_params(
                        "`seconds` must be a number ≥ 0",
                        None,
                    ));
                };
                let mut unfinished = Unfinished::start();
                let started = Instant::now();
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds.min(3600.0))) => {
                        unfinished.armed = false;
                        Ok(text(&format!("slept {:.1?}", started.elapsed())))
                    }
                    () = context.ct.cancelled() => {
                        unfinished.stopped("token");
                        Ok(text("cancelled"))
                    }
                }
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool `{other}`"),
                None,
            )),
        }
    }
}
