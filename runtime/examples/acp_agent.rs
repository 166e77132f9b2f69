//! An ACP v1 agent over stdio: `initialize`, `session/new`, `session/prompt`.
//!
//! - A prompt whose text is `sleep N` streams a `session/update` each second for N seconds, then
//!   ends its turn with `end_turn`.
//! - A prompt `ask` sends `session/request_permission` to the client and waits for the answer.
//!
//! `session/cancel` ends the turn with `stopReason: "cancelled"`, cancelling the agent's own
//! outstanding requests to the client (`$/cancel_request`); a `$/cancel_request` for the prompt
//! does the same. Every cancellation is logged to stderr.
//!
//! ```text
//! cargo run -p cancelkit --example acp_agent
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cancelkit::peer::{Context, Peer, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::{Value, json};

#[path = "support/log.rs"]
mod log;

static SESSIONS: AtomicU64 = AtomicU64::new(1);

async fn initialize(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": false, "promptCapabilities": {}},
        "authMethods": [],
        "agentInfo": {"name": "cancelkit-example-acp-agent", "version": env!("CARGO_PKG_VERSION")}
    }))
}

async fn new_session(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    let id = SESSIONS.fetch_add(1, Ordering::Relaxed);
    Ok(json!({"sessionId": format!("sess-{id}")}))
}

#[derive(Deserialize)]
struct Prompt {
    #[serde(rename = "sessionId")]
    session_id: String,
    prompt: Vec<Value>,
}

fn cancelled_turn() -> Value {
    json!({"stopReason": "cancelled"})
}

async fn say(cx: &Context, session_id: &str, text: String) -> Result<(), JsonRpcError> {
    cx.peer()
        .notify(
            "session/update",
            json!({
                "sessionId": session_id,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            }),
        )
        .await
        .map_err(JsonRpcError::from)
}

/// One prompt turn. Cancelled (by `session/cancel` or `$/cancel_request`) it ends with
/// `stopReason: "cancelled"`, and the permission request it may be waiting on is cancelled too.
#[cancellable(on_cancel = cancelled_turn)]
async fn prompt(params: Prompt, cx: Context) -> Result<Value, JsonRpcError> {
    let text: String = params
        .prompt
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.trim();
    if let Some(n) = text.strip_prefix("sleep ") {
        let seconds: u64 = n.trim().parse().map_err(|_| {
            JsonRpcError::invalid_params("`sleep N` needs a whole number of seconds")
        })?;
        for second in 1..=seconds {
            tokio::time::sleep(Duration::from_secs(1)).await;
            say(
                &cx,
                &params.session_id,
                format!("slept {second} of {seconds} s"),
            )
            .await?;
        }
        Ok(json!({"stopReason": "end_turn"}))
    } else if text == "ask" {
        let answer: Value = cx
            .peer()
            .request(
                "session/request_permission",
                json!({
                    "sessionId": params.session_id,
                    "toolCall": {"toolCallId": "call-1", "title": "Run the example tool"},
                    "options": [
                        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
                    ]
                }),
            )
            .await?;
        say(
            &cx,
            &params.session_id,
            format!("permission: {}", answer["outcome"]),
        )
        .await?;
        Ok(json!({"stopReason": "end_turn"}))
    } else {
        say(&cx, &params.session_id, format!("you said: {text}")).await?;
        Ok(json!({"stopReason": "end_turn"}))
    }
}

#[tokio::main]
async fn main() {
    log::init();
    let router = Router::new()
        .request("initialize", initialize)
        .request("session/new", new_session)
        .request("session/prompt", prompt);
    let peer = Peer::builder(Protocol::Acp)
        .router(router)
        .connect(tokio::io::stdin(), tokio::io::stdout());
    tracing::info!("acp_agent ready on stdio");
    peer.closed().await;
}
