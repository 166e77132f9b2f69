//! `#[cancellable]` inside the official ACP SDK's (`agent-client-protocol` 5.x) request handlers,
//! with cancelkit's feature `acp`.
//!
//! Their agent, our attribute: the SDK's client sends `$/cancel_request` for an in-flight
//! request; the handler's work is dropped (a guard reports it), the client receives -32800
//! "Request cancelled" with `data.reason`, exactly once on the wire, and the agent goes on
//! serving. A relay between the two records every line each side sends.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, InitializeRequest, InitializeResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, RequestCancellation};
use cancelkit::cancellable;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

type Events = mpsc::UnboundedSender<String>;

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an event within 10 s")
        .expect("events open")
}

/// Reports its event when dropped: observes that a handler's work was dropped.
struct Report(Events, &'static str);

impl Drop for Report {
    fn drop(&mut self) {
        let _ = self.0.send(self.1.to_owned());
    }
}

/// The agent's state; its handlers' work is `#[cancellable]`.
struct MyAgent {
    events: Events,
}

impl MyAgent {
    /// `session/prompt`, parented on the SDK's marker: session "quick" answers at once, any
    /// other runs until the client cancels it.
    #[cancellable(token = cancellation, timeout = "1m")]
    async fn prompt(
        &self,
        request: PromptRequest,
        cancellation: RequestCancellation,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        if &*request.session_id.0 == "quick" {
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        let _ = self.events.send("prompt started".into());
        let _dropped = Report(self.events.clone(), "prompt dropped");
        std::future::pending::<()>().await;
        Ok(PromptResponse::new(StopReason::EndTurn))
    }

    /// `session/new`'s work: a plain `#[cancellable]`, cancelled through
    /// [`cancelkit::acp::with_cancellation`] around it.
    #[cancellable]
    async fn new_session(
        &self,
        request: NewSessionRequest,
    ) -> Result<NewSessionResponse, agent_client_protocol::Error> {
        if request.cwd.as_os_str() == "/quick" {
            return Ok(NewSessionResponse::new("quick"));
        }
        let _ = self.events.send("session/new started".into());
        let _dropped = Report(self.events.clone(), "session/new dropped");
        std::future::pending::<()>().await;
        Ok(NewSessionResponse::new("slow"))
    }
}

/// Their agent (the ACP SDK's `Agent`), serving `io` until the connection ends.
async fn serve_their_agent(io: DuplexStream, events: Events) {
    let agent = Arc::new(MyAgent { events });
    let for_sessions = agent.clone();
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
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let (agent, cancellation) = (agent.clone(), responder.cancellation());
                // Off the dispatch loop, which must stay free to read the cancel.
                cx.spawn(async move {
                    responder.respond_with_result(agent.prompt(request, cancellation).await)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let agent = for_sessions.clone();
                let cancellation = responder.cancellation();
                cx.spawn(cancelkit::acp::with_cancellation(
                    &cancellation,
                    async move { responder.respond_with_result(agent.new_session(request).await) },
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport(io))
        .await;
    let _ = result;
}

type Half<T> = tokio_util::compat::Compat<T>;

/// The ACP SDK's transport over one end of a tokio duplex.
fn transport(
    io: DuplexStream,
) -> ByteStreams<Half<tokio::io::WriteHalf<DuplexStream>>, Half<tokio::io::ReadHalf<DuplexStream>>>
{
    let (read, write) = tokio::io::split(io);
    ByteStreams::new(write.compat_write(), read.compat())
}

/// A message seen on the wire, and who sent it.
#[derive(Debug)]
enum Wire {
    FromClient(Value),
    FromAgent(Value),
}

/// Their agent behind a recording relay; returns the client's end, the handlers' events and
/// the wire.
fn agent_behind_a_relay() -> (
    DuplexStream,
    mpsc::UnboundedReceiver<String>,
    mpsc::UnboundedReceiver<Wire>,
) {
    let (events, events_rx) = mpsc::unbounded_channel();
    let (wire, wire_rx) = mpsc::unbounded_channel();
    let (agent_end, relay_agent_side) = tokio::io::duplex(1 << 16);
    let (client_end, relay_client_side) = tokio::io::duplex(1 << 16);
    tokio::spawn(serve_their_agent(agent_end, events));
    let (agent_read, agent_write) = tokio::io::split(relay_agent_side);
    let (client_read, client_write) = tokio::io::split(relay_client_side);
    tokio::spawn(relay(client_read, agent_write, wire.clone(), false));
    tokio::spawn(relay(agent_read, client_write, wire, true));
    (client_end, events_rx, wire_rx)
}

/// Copies newline-delimited JSON from `from` to `to`, reporting each message.
async fn relay(
    from: tokio::io::ReadHalf<DuplexStream>,
    mut to: tokio::io::WriteHalf<DuplexStream>,
    wire: mpsc::UnboundedSender<Wire>,
    agent: bool,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let value: Value = serde_json::from_str(&line).expect("one JSON message per line");
        let _ = wire.send(if agent {
            Wire::FromAgent(value)
        } else {
            Wire::FromClient(value)
        });
        if to.write_all(format!("{line}\n").as_bytes()).await.is_err() {
            break;
        }
    }
}

/// `connection`, or a panic after 20 s (a handler that is never stopped would hang the client).
async fn within<T>(connection: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), connection)
        .await
        .expect("the client's work finishes within 20 s")
}

/// Everything seen on the wire so far.
fn drain(wire: &mut mpsc::UnboundedReceiver<Wire>) -> Vec<Wire> {
    let mut seen = Vec::new();
    while let Ok(message) = wire.try_recv() {
        seen.push(message);
    }
    seen
}

/// The id of the client's request for `method` (the first, or the second with `nth = 1`).
fn request_id(seen: &[Wire], method: &str, nth: usize) -> Value {
    seen.iter()
        .filter_map(|m| match m {
            Wire::FromClient(v) if v["method"] == method && v.get("id").is_some() => {
                Some(v["id"].clone())
            }
            _ => None,
        })
        .nth(nth)
        .unwrap_or_else(|| panic!("no request #{nth} for {method}: {seen:?}"))
}

/// Every response the agent sent for `id`.
fn responses_to<'a>(seen: &'a [Wire], id: &Value) -> Vec<&'a Value> {
    seen.iter()
        .filter_map(|m| match m {
            Wire::FromAgent(v)
                if &v["id"] == id && (v.get("result").is_some() || v.get("error").is_some()) =>
            {
                Some(v)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn cancel_request_drops_the_sdk_handler_and_answers_32800_once() {
    let (io, mut events, mut wire) = agent_behind_a_relay();
    let (cancelled, quick) = within(Client.v1().connect_with(transport(io), async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let prompt = cx.send_request(PromptRequest::new("slow", vec!["hi".into()]));
        assert_eq!(next(&mut events).await, "prompt started");
        prompt.cancel()?; // sends `$/cancel_request`
        let cancelled = prompt.block_task().await;
        // The agent keeps serving.
        let quick = cx
            .send_request(PromptRequest::new("quick", vec!["hi".into()]))
            .block_task()
            .await?;
        Ok((cancelled, quick))
    }))
    .await
    .expect("the connection works");

    let error = cancelled.expect_err("a cancelled prompt is an error");
    assert_eq!(
        error.code,
        agent_client_protocol::ErrorCode::REQUEST_CANCELLED
    );
    assert_eq!(error.message, "Request cancelled");
    assert_eq!(
        error.data.as_ref().expect("data")["reason"],
        "cancelled by the peer"
    );
    assert_eq!(quick.stop_reason, StopReason::EndTurn);
    assert_eq!(next(&mut events).await, "prompt dropped");

    // On the wire: the cancel named the prompt, which got one answer, -32800.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let seen = drain(&mut wire);
    let id = request_id(&seen, "session/prompt", 0);
    assert!(
        seen.iter().any(|m| matches!(m, Wire::FromClient(v)
            if v["method"] == "$/cancel_request" && v["params"]["requestId"] == id)),
        "{seen:?}"
    );
    let answers = responses_to(&seen, &id);
    assert_eq!(answers.len(), 1, "exactly one answer: {answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32800);
    let quick_id = request_id(&seen, "session/prompt", 1);
    assert_eq!(responses_to(&seen, &quick_id).len(), 1);
}

#[tokio::test]
async fn acp_scope_cancels_plain_cancellable_calls_inside_it() {
    let (io, mut events, mut wire) = agent_behind_a_relay();
    let (cancelled, quick) = within(Client.v1().connect_with(transport(io), async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let session = cx.send_request(NewSessionRequest::new("/slow"));
        assert_eq!(next(&mut events).await, "session/new started");
        session.cancel()?;
        let cancelled = session.block_task().await;
        let quick = cx
            .send_request(NewSessionRequest::new("/quick"))
            .block_task()
            .await?;
        Ok((cancelled, quick))
    }))
    .await
    .expect("the connection works");

    let error = cancelled.expect_err("a cancelled session/new is an error");
    assert_eq!(
        error.code,
        agent_client_protocol::ErrorCode::REQUEST_CANCELLED
    );
    assert_eq!(
        error.data.as_ref().expect("data")["reason"],
        "cancelled by the peer"
    );
    assert_eq!(&*quick.session_id.0, "quick");
    assert_eq!(next(&mut events).await, "session/new dropped");

    tokio::time::sleep(Duration::from_millis(100)).await;
    let seen = drain(&mut wire);
    let id = request_id(&seen, "session/new", 0);
    let answers = responses_to(&seen, &id);
    assert_eq!(answers.len(), 1, "exactly one answer: {answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32800);
}

/// A cancel for a request whose work already finished changes nothing: the normal response
/// stands, and it is the only one.
#[tokio::test]
async fn a_late_cancel_leaves_the_answer_alone() {
    let (io, _events, mut wire) = agent_behind_a_relay();
    let quick = within(Client.v1().connect_with(transport(io), async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let prompt = cx.send_request(PromptRequest::new("quick", vec!["hi".into()]));
        let handle = prompt.cancellation_handle();
        let response = prompt.block_task().await?;
        handle.cancel()?;
        // A round trip after the cancel: by its answer the cancel has been processed.
        cx.send_request(PromptRequest::new("quick", vec!["again".into()]))
            .block_task()
            .await?;
        Ok(response)
    }))
    .await
    .expect("the connection works");
    assert_eq!(quick.stop_reason, StopReason::EndTurn);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let seen = drain(&mut wire);
    let id = request_id(&seen, "session/prompt", 0);
    let answers = responses_to(&seen, &id);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["stopReason"], "end_turn");
}
