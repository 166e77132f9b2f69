//! Starts the `acp_agent` example as a child process and cancels a prompt turn twice:
//!
//! 1. `sleep 10`, with `session/cancel` after 2.5 s: the agent answers `stopReason: "cancelled"`;
//! 2. `ask`, where the agent asks this client for permission; the client drops the prompt
//!    (`$/cancel_request`) and the agent cancels its permission request in turn.
//!
//! ```text
//! cargo run -p cancelkit --example acp_client
//! ```

use std::process::Stdio;
use std::time::{Duration, Instant};

use cancelkit::peer::{Context, Peer, Protocol, Router};
use cancelkit::protocol::acp::notification::SessionCancel;
use cancelkit::protocol::acp::request::SessionPrompt;
use cancelkit::protocol::acp::{PromptRequestParams, SessionCancelParams};
use cancelkit::{JsonRpcError, cancellable};
use serde_json::{Value, json};

#[path = "support/child.rs"]
mod child;

/// The client side of `session/request_permission`: a user who never answers. Cancelled by
/// the agent, it reports how long it waited.
#[cancellable]
async fn request_permission(_params: Value, cx: Context) -> Result<Value, JsonRpcError> {
    let asked = Instant::now();
    let id = cx.request_id().map(ToString::to_string).unwrap_or_default();
    let guard = scopeguard(move || {
        println!(
            "  the agent cancelled its permission request {id} after {:?}",
            asked.elapsed()
        );
    });
    tokio::time::sleep(Duration::from_secs(3600)).await;
    std::mem::forget(guard);
    Ok(json!({"outcome": {"outcome": "selected", "optionId": "allow"}}))
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut agent = child::example_command("acp_agent")?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let (stdin, stdout) = (agent.stdin.take().unwrap(), agent.stdout.take().unwrap());
    let started = Instant::now();
    let router = Router::new()
        .request("session/request_permission", request_permission)
        .notification(
            "session/update",
            move |update: Value, _cx: Context| async move {
                println!(
                    "  [{:>5.1}s] session/update: {}",
                    started.elapsed().as_secs_f64(),
                    update["update"]["content"]["text"]
                );
            },
        );
    let peer = Peer::builder(Protocol::Acp)
        .router(router)
        .connect(stdout, stdin);
    let acp = peer.handle();

    let init: Value = acp
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await?;
    println!(
        "initialized: agent declares draft cancellation: {}",
        init["agentCapabilities"]["cancellation"]["request"]
    );
    let session: Value = acp
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await?;
    let session_id = session["sessionId"].as_str().unwrap_or_default().to_owned();

    println!("prompt `sleep 10`, session/cancel after 2.5 s:");
    let turn = Instant::now();
    let prompt = acp.send::<SessionPrompt>(prompt_of(&session_id, "sleep 10"));
    let cancel = {
        let acp = acp.clone();
        let session_id = session_id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            acp.send_notification::<SessionCancel>(SessionCancelParams {
                session_id,
                meta: None,
            })
            .await
        })
    };
    let result = prompt.await?;
    cancel.await??;
    println!(
        "  stopReason {} after {:?}",
        json!(result.stop_reason),
        turn.elapsed()
    );

    println!("prompt `ask`, dropped after 1 s ($/cancel_request):");
    let turn = Instant::now();
    let prompt = acp
        .send::<SessionPrompt>(prompt_of(&session_id, "ask"))
        .timeout(Duration::from_secs(1));
    println!(
        "  prompt ended: {:?} after {:?}",
        prompt.await.err(),
        turn.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;

    acp.close();
    peer.closed().await;
    let _ = agent.wait().await;
    Ok(())
}

/// A `session/prompt` of one text block.
fn prompt_of(session_id: &str, text: &str) -> PromptRequestParams {
    let block = json!({"type": "text", "text": text});
    PromptRequestParams {
        session_id: session_id.to_owned(),
        prompt: block.as_object().into_iter().cloned().collect(),
        meta: None,
        extra: Default::default(),
    }
}
