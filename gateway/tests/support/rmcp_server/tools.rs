//! The server's tools (`echo`, `sleep`, `routed`, `big`, `fail`) and its handler: the
//! revisions it speaks, the `notifications/cancelled` it logs.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, CancelledNotificationParam, ContentBlock, ErrorData, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tap::Log;

#[derive(Clone)]
pub(super) struct Tools {
    pub(super) log: Log,
    pub(super) legacy: bool,
    /// Behave as the gateway's demo upstream.
    pub(super) demo: bool,
    pub(super) router: ToolRouter<Tools>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    seconds: f64,
    #[serde(default)]
    label: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct RoutedArgs {
    /// Mirrored into the `Mcp-Param-Region` header at 2026-07-28.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct BigArgs {
    bytes: usize,
}

fn request_id(context: &RequestContext<RoleServer>) -> Value {
    serde_json::to_value(&context.id).unwrap()
}

/// Records the sleep's cancellation if it is dropped before it ends.
struct Unfinished {
    log: Log,
    id: Value,
    label: String,
    started: Instant,
    armed: bool,
}

impl Unfinished {
    /// Records the cancellation (`how`: "token" or "dropped") and disarms.
    fn cancelled(&mut self, how: &str) {
        self.armed = false;
        self.log.push(json!({
            "event": "cancelled",
            "how": how,
            "id": self.id,
            "label": self.label,
            "after_ms": self.started.elapsed().as_millis() as u64,
        }));
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.armed {
            self.cancelled("dropped");
        }
    }
}

#[tool_router(vis = "pub(super)")]
impl Tools {
    #[tool(description = "Answers with its text")]
    async fn echo(
        &self,
        Parameters(args): Parameters<EchoArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.log.push(json!({
            "event": "echo",
            "text": args.text,
            "id": request_id(&context),
            "version": context.meta.protocol_version().map(|v| v.to_string()),
            "session": session,
        }));
        Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]))
    }

    #[tool(description = "Sleeps, with progress every 100 ms when asked")]
    async fn sleep(
        &self,
        Parameters(args): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let id = request_id(&context);
        self.log
            .push(json!({"event": "started", "id": id, "label": args.label}));
        let started = Instant::now();
        let mut unfinished = Unfinished {
            log: self.log.clone(),
            id: id.clone(),
            label: args.label.clone(),
            started,
            armed: true,
        };
        let token = context.meta.get_progress_token();
        let done = tokio::time::sleep(Duration::from_secs_f64(args.seconds));
        tokio::pin!(done);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.tick().await;
        let mut sent = 0u32;
        loop {
            tokio::select! {
                () = &mut done => break,
                () = context.ct.cancelled() => {
                    unfinished.cancelled("token");
                    return Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]));
                }
                _ = tick.tick() => {
                    if let Some(token) = &token {
                        sent += 1;
                        let params = if self.demo {
                            // As the demo upstream: seconds slept, of the total.
                            let slept = started.elapsed().as_secs_f64().min(args.seconds);
                            ProgressNotificationParam::new(token.clone(), slept)
                                .with_total(args.seconds)
                                .with_message(format!("slept {slept:.1}s of {}s", args.seconds))
                        } else {
                            ProgressNotificationParam::new(token.clone(), f64::from(sent))
                        };
                        let _ = context.peer.notify_progress(params).await;
                    }
                }
            }
        }
        unfinished.armed = false;
        self.log
            .push(json!({"event": "finished", "id": id, "label": args.label}));
        let text = if self.demo {
            format!("slept {:?}", Duration::from_secs_f64(args.seconds))
        } else {
            "slept".into()
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tool(description = "Answers with the region it was routed with")]
    async fn routed(
        &self,
        Parameters(args): Parameters<RoutedArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-param-region"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.log
            .push(json!({"event": "routed", "region": args.region, "header": header}));
        Ok(CallToolResult::success(vec![ContentBlock::text(
            args.region,
        )]))
    }

    #[tool(description = "Answers with `bytes` bytes of text")]
    async fn big(
        &self,
        Parameters(args): Parameters<BigArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "x".repeat(args.bytes),
        )]))
    }

    #[tool(description = "Fails with a JSON-RPC error")]
    async fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Err(ErrorData::invalid_params(
            "no such thing",
            Some(json!({"why": "testing"})),
        ))
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

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.log.push(json!({
            "event": "notifications/cancelled",
            "requestId": params.request_id,
            "reason": params.reason,
        }));
    }
}
