//! The fixtures: a tool server with test operations and a callback server collecting its
//! results, both on loopback, and helpers watching process groups in /proc.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use cancelkit::rap::{self, ToolCall, ToolError, ToolOutput, ToolServer};
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub(crate) const TOKEN: &str = "s3cret";

/// The process tool's grace period between SIGTERM and SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_millis(1500);

/// Serves `router` on a fresh loopback port (with client addresses, for the rate limit).
pub(crate) async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Collects the `tool_result`s posted to it.
#[derive(Clone, Default)]
pub(crate) struct Callbacks(Arc<Mutex<Vec<Value>>>);

impl Callbacks {
    pub(crate) async fn start(&self) -> String {
        let router = axum::Router::new()
            .route(
                "/results",
                post(|State(seen): State<Callbacks>, axum::Json(result): axum::Json<Value>| async move {
                    seen.0.lock().unwrap().push(result);
                }),
            )
            .with_state(self.clone());
        format!("http://{}/results", serve(router).await)
    }

    pub(crate) fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    pub(crate) async fn wait_for(&self, count: usize) -> Vec<Value> {
        for _ in 0..500 {
            if self.all().len() >= count {
                return self.all();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {count} results, got {:?}", self.all());
    }
}

/// A tool server with `echo` (instant), `sleep` (cancellable, async) and `run` (a shell script
/// as a process tool).
pub(crate) fn tool_server(
    builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder,
) -> ToolServer {
    let base = ToolServer::builder("test-tools")
        .bearer_token(TOKEN)
        .operation(
            "echo",
            "Returns its text",
            json!({"type": "object"}),
            |args: Value, _call: ToolCall| async move {
                Ok(ToolOutput::from(args["text"].as_str().unwrap_or_default()))
            },
        )
        .operation(
            "sleep",
            "Sleeps for ms milliseconds",
            json!({"type": "object"}),
            |args: Value, call: ToolCall| sleep_tool(args, call),
        )
        .operation(
            "panic",
            "Has a bug",
            json!({"type": "object"}),
            |_args: Value, _call: ToolCall| async move {
                if true {
                    panic!("tool bug");
                }
                Ok(ToolOutput::from("unreachable"))
            },
        )
        .operation(
            "run",
            "Runs a shell script",
            json!({"type": "object"}),
            |args: Value, _call: ToolCall| async move {
                let mut command = tokio::process::Command::new("sh");
                command
                    .arg("-c")
                    .arg(args["script"].as_str().unwrap_or("true"));
                let output = rap::process::run(command, GRACE).await?;
                Ok(ToolOutput::Text(output.stdout))
            },
        );
    builder(base).build()
}

#[cancelkit::cancellable]
async fn sleep_tool(args: Value, call: ToolCall) -> Result<ToolOutput, ToolError> {
    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
    Ok(ToolOutput::Text(format!("{} slept", call.tool_call_id)))
}

pub(crate) struct Rig {
    pub(crate) base: String,
    pub(crate) server: ToolServer,
    pub(crate) callbacks: Callbacks,
    pub(crate) callback_url: String,
    pub(crate) http: reqwest::Client,
}

/// The `scheme://host:port` of a URL.
pub(crate) fn origin_of(url: &str) -> String {
    let url = reqwest::Url::parse(url).unwrap();
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap()
    )
}

/// A tool server (allowing its callback server's origin) and a callback server, on loopback.
pub(crate) async fn rig(
    builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder,
) -> Rig {
    let callbacks = Callbacks::default();
    let callback_url = callbacks.start().await;
    let origin = origin_of(&callback_url);
    let server = tool_server(|b| builder(b.allow_callback_origin(&origin).unwrap()));
    let base = format!("http://{}", serve(server.router()).await);
    Rig {
        base,
        server,
        callbacks,
        callback_url,
        http: reqwest::Client::new(),
    }
}

impl Rig {
    pub(crate) async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> (u16, String) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// `/invoke` with a callback URL of our choosing.
    pub(crate) async fn invoke_to(
        &self,
        operation: &str,
        id: &str,
        arguments: &Value,
        callback_url: &str,
    ) -> (u16, String) {
        let body = json!({
            "operation": operation, "arguments": arguments, "id": id,
            "callback_url": callback_url, "group_id": "thread_1",
        });
        self.post("/invoke", Some(TOKEN), body.to_string()).await
    }

    pub(crate) async fn invoke(&self, operation: &str, id: &str, arguments: Value) -> u16 {
        let body = json!({
            "operation": operation, "arguments": arguments, "id": id, "call_id": format!("c-{id}"),
            "callback_url": self.callback_url, "group_id": "thread_1",
        });
        self.post("/invoke", Some(TOKEN), body.to_string()).await.0
    }

    pub(crate) async fn cancel(&self, thread: &str, call: &str) -> (u16, String) {
        let body = json!({"thread_id": thread, "tool_call_id": call});
        self.post("/cancel_tool_call", Some(TOKEN), body.to_string())
            .await
    }

    pub(crate) async fn wait_running(&self, n: usize) {
        for _ in 0..500 {
            if self.server.running() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("expected {n} running calls, have {}", self.server.running());
    }
}

/// Kills what is left of a process group when a test fails half-way.
pub(crate) struct KillGroup(pub(crate) i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{}", self.0)])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Processes (not zombies) whose process group is `pgid`, from /proc.
pub(crate) fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ... ; comm may contain spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            members.push(pid);
        }
    }
    members
}
