//! A plain ACP v1 agent on the official Rust SDK (crate `agent-client-protocol` 5.x), over stdio:
//! a peer for `cancelkit check acp`'s tests, written the way the SDK's documentation suggests.
//!
//! - A prompt `sleep N` streams an `agent_message_chunk` update each second for N seconds, then
//!   ends its turn with `end_turn`.
//! - A prompt `ask N` first asks the client for permission (`session/request_permission`), then
//!   sleeps N seconds.
//!
//! Cancellation: `session/cancel` cancels the session's turn, which is answered with
//! `stopReason: "cancelled"`; dropping the turn drops its pending permission request, and the SDK
//! then sends `$/cancel_request` for it by itself. A `$/cancel_request` for the prompt fires the
//! responder's `RequestCancellation`, and the prompt is answered with the SDK's -32800 error.
//!
//! ```text
//! cargo run -p cancelkit-cli --example acp_sdk_agent
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PermissionOption,
    PermissionOptionKind, PromptRequest, PromptResponse, RequestPermissionRequest,
    SessionNotification, SessionUpdate, StopReason, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

/// Each session's running turn (a number and its token), cancelled by `session/cancel`; a turn
/// removes itself when it ends.
type Turns = Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>;

/// Numbers the turns.
static TURN: AtomicU64 = AtomicU64::new(1);

fn lock(turns: &Turns) -> std::sync::MutexGuard<'_, HashMap<String, (u64, CancellationToken)>> {
    turns
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sends one `agent_message_chunk` update.
fn say(cx: &ConnectionTo<Client>, session: &str, text: String) -> Result<(), Error> {
    let chunk = ContentChunk::new(ContentBlock::from(text));
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        SessionUpdate::AgentMessageChunk(chunk),
    ))
}

/// The work of one turn: `ask N` and `sleep N` as the module says, anything else is echoed.
async fn run_turn(prompt: PromptRequest, cx: ConnectionTo<Client>) -> Result<(), Error> {
    let session = prompt.session_id.0.to_string();
    let text: Vec<String> = prompt
        .prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect();
    let text = text.join(" ");
    let mut words = text.split_whitespace();
    let verb = words.next().unwrap_or_default();
    let seconds: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    match verb {
        "ask" => {
            let fields = ToolCallUpdateFields::new().title("Run the example tool".to_owned());
            let options = vec![
                PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
            ];
            let request = RequestPermissionRequest::new(
                session.clone(),
                ToolCallUpdate::new("call-1", fields),
                options,
            );
            let answer = cx.send_request(request).block_task().await?;
            say(&cx, &session, format!("permission: {:?}", answer.outcome))?;
        }
        "sleep" => {}
        _ => return say(&cx, &session, format!("you said: {text}")),
    }
    for second in 1..=seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        say(&cx, &session, format!("slept {second} of {seconds} s"))?;
    }
    Ok(())
}

/// Runs a turn until it ends, `session/cancel` cancels it, or `$/cancel_request` names it.
async fn prompt(
    prompt: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
    turns: Turns,
) -> Result<(), Error> {
    let session = prompt.session_id.0.to_string();
    let turn = CancellationToken::new();
    let number = TURN.fetch_add(1, Ordering::Relaxed);
    if let Some((_, previous)) = lock(&turns).insert(session.clone(), (number, turn.clone())) {
        previous.cancel();
    }
    let request = responder.cancellation();
    let work = run_turn(prompt, cx.clone());
    cx.spawn(async move {
        let answer = tokio::select! {
            outcome = work => match outcome {
                Ok(()) => responder.respond(PromptResponse::new(StopReason::EndTurn)),
                Err(error) => responder.respond_with_error(error),
            },
            () = turn.cancelled() => responder.respond(PromptResponse::new(StopReason::Cancelled)),
            () = request.cancelled() => responder.respond_with_error(Error::request_cancelled()),
        };
        let mut turns = lock(&turns);
        if turns.get(&session).is_some_and(|(n, _)| *n == number) {
            turns.remove(&session);
        }
        answer
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let turns: Turns = Arc::default();
    let cancels = Arc::clone(&turns);
    let sessions = Arc::new(AtomicU64::new(1));
    let transport = ByteStreams::new(
        tokio::io::stdout().compat_write(),
        tokio::io::stdin().compat(),
    );
    Agent
        .v1()
        .name("cancelkit-interop-rust-sdk-agent")
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(initialize.protocol_version)
                        .agent_capabilities(AgentCapabilities::new()),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_new: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed);
                responder.respond(NewSessionResponse::new(format!("sess-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                prompt(request, responder, cx, Arc::clone(&turns)).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _cx| {
                if let Some((_, turn)) = lock(&cancels).get(&*cancel.session_id.0) {
                    turn.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
