//! cancelkit against the official ACP SDK (`agent-client-protocol` 5.x), both directions.
//!
//! - Their client cancels (explicitly, and by dropping) a `session/prompt` to our agent: our
//!   handler stops and they receive -32800.
//! - Our client drops a `session/prompt` to their agent: their `RequestCancellation` fires.
//! - Their client sends `session/cancel`: our agent ends the turn with `stopReason: "cancelled"`.

use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, StopReason,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use cancelkit::peer::{Context, Peer, Protocol, Router};
use cancelkit::protocol::acp::PromptRequestParams;
use cancelkit::protocol::acp::request::SessionPrompt;
use cancelkit::{JsonRpcError, cancellable};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Reports from handlers on either side.
type Events = mpsc::UnboundedSender<String>;

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an event within 10 s")
        .expect("events open")
}

struct Report(Events, &'static str);

impl Drop for Report {
    fn drop(&mut self) {
        let _ = self.0.send(self.1.to_owned());
    }
}

/// Our agent: `initialize`, `session/new`, and a `session/prompt` that runs until cancelled.
fn our_agent(events: Events) -> Router {
    Router::new()
        .request("initialize", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"protocolVersion": 1, "agentCapabilities": {}}))
        })
        .request("session/new", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"sessionId": "sess-1"}))
        })
        .request("session/prompt", move |_: Value, cx: Context| {
            prompt(cx, events.clone())
        })
}

#[cancellable]
async fn prompt(_cx: Context, events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.send("prompt started".into());
    let _stopped = Report(events, "prompt stopped");
    std::future::pending::<()>().await;
    Ok(json!({"stopReason": "end_turn"}))
}

/// Serves our agent on one end of a duplex; returns the other end for their client.
fn serve_our_agent(events: Events) -> (Peer, tokio::io::DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(ours);
    let peer = Peer::builder(Protocol::Acp)
        .router(our_agent(events))
        .connect(read, write);
    (peer, theirs)
}

type Half<T> = tokio_util::compat::Compat<T>;

/// The ACP SDK's transport over one end of a tokio duplex.
fn transport(
    io: tokio::io::DuplexStream,
) -> ByteStreams<
    Half<tokio::io::WriteHalf<tokio::io::DuplexStream>>,
    Half<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
> {
    let (read, write) = tokio::io::split(io);
    ByteStreams::new(write.compat_write(), read.compat())
}

#[tokio::test]
async fn their_explicit_cancel_stops_our_handler_and_they_receive_32800() {
    let (events, mut rx) = mpsc::unbounded_channel();
    let (_agent, io) = serve_our_agent(events);
    let outcome = Client
        .v1()
        .connect_with(transport(io), async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session: NewSessionResponse = cx
                .send_request(NewSessionRequest::new("/"))
                .block_task()
                .await?;
            let prompt = cx.send_request(PromptRequest::new(session.session_id, vec!["hi".into()]));
            assert_eq!(next(&mut rx).await, "prompt started");
            prompt.cancel()?;
            Ok(prompt.block_task().await)
        })
        .await
        .expect("the connection works");
    let error = outcome.expect_err("a cancelled prompt is an error");
    assert_eq!(
        error.code,
        agent_client_protocol::ErrorCode::REQUEST_CANCELLED,
        "{error:?}"
    );
    assert_eq!(next(&mut rx).await, "prompt stopped");
}

#[tokio::test]
async fn their_dropped_request_stops_our_handler() {
    let (events, mut rx) = mpsc::unbounded_channel();
    let (agent, io) = serve_our_agent(events);
    Client
        .v1()
        .connect_with(transport(io), async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let prompt = cx.send_request(PromptRequest::new("sess-1", vec!["hi".into()]));
            assert_eq!(next(&mut rx).await, "prompt started");
            drop(prompt);
            assert_eq!(next(&mut rx).await, "prompt stopped");
            Ok(())
        })
        .await
        .expect("the connection works");
    assert_eq!(agent.handle().in_flight(), 0);
}

#[tokio::test]
async fn their_session_cancel_ends_our_turn_with_stop_reason_cancelled() {
    let (events, mut rx) = mpsc::unbounded_channel();
    let (_agent, io) = serve_our_agent(events);
    let response = Client
        .v1()
        .connect_with(transport(io), async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let prompt = cx.send_request(PromptRequest::new("sess-1", vec!["hi".into()]));
            assert_eq!(next(&mut rx).await, "prompt started");
            cx.send_notification(CancelNotification::new("sess-1"))?;
            prompt.block_task().await
        })
        .await
        .expect("the prompt is answered with a result");
    assert_eq!(response.stop_reason, StopReason::Cancelled);
}

/// Their agent: a `session/prompt` handler that waits for its `RequestCancellation`.
async fn serve_their_agent(io: tokio::io::DuplexStream, events: Events) {
    let result = Agent
        .v1()
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
            async move |_prompt: PromptRequest,
                        responder: agent_client_protocol::v1::Responder<PromptResponse>,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                let cancellation = responder.cancellation();
                let events = events.clone();
                let _ = events.send("their prompt started".into());
                cx.spawn(async move {
                    cancellation.cancelled().await;
                    let _ = events.send("their RequestCancellation fired".into());
                    responder.respond_with_error(agent_client_protocol::Error::request_cancelled())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport(io))
        .await;
    let _ = result;
}

/// Our client, initialized against their agent.
async fn our_client_against_their_agent() -> (Peer, mpsc::UnboundedReceiver<String>) {
    let (events, rx) = mpsc::unbounded_channel();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(serve_their_agent(theirs, events));
    let (read, write) = tokio::io::split(ours);
    let client = Peer::builder(Protocol::Acp).connect(read, write);
    let init: Value = client
        .handle()
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
        .expect("their agent answers initialize");
    assert_eq!(init["protocolVersion"], 1);
    (client, rx)
}

#[tokio::test]
async fn our_dropped_request_fires_their_request_cancellation() {
    let (client, mut rx) = our_client_against_their_agent().await;
    // They do not declare the draft capability, so we send the shipped form.
    assert!(!client.handle().peer_accepts_draft_cancel());

    let params = serde_json::from_value(
        json!({"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}),
    )
    .expect("session/prompt params");
    let prompt = client.handle().send::<SessionPrompt>(params);
    assert_eq!(next(&mut rx).await, "their prompt started");
    drop(prompt);
    assert_eq!(next(&mut rx).await, "their RequestCancellation fired");
}

#[tokio::test]
async fn our_timed_out_request_fires_their_request_cancellation() {
    let (client, mut rx) = our_client_against_their_agent().await;
    let outcome = client
        .handle()
        .send::<SessionPrompt>(PromptRequestParams {
            session_id: "s".into(),
            prompt: Vec::new(),
            meta: None,
            extra: Default::default(),
        })
        .timeout(Duration::from_millis(300))
        .await;
    assert!(
        matches!(outcome, Err(cancelkit::peer::RequestError::Timeout(_))),
        "{outcome:?}"
    );
    assert_eq!(next(&mut rx).await, "their prompt started");
    assert_eq!(next(&mut rx).await, "their RequestCancellation fired");
}
