//! The official ACP SDK (agent-client-protocol 5.2) as an agent and a client.

use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, InitializeRequest, InitializeResponse, PromptRequest, PromptResponse,
    StopReason,
};
use agent_client_protocol::{Agent, ByteStreams, Client as ClientRole};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use super::super::conn::{BoxFut, Conn, Parked};
use super::super::work::{Signals, StopClock, Work, acp_params, acp_work};
use super::{BoxRead, BoxWrite};

type Connection = agent_client_protocol::v1::ConnectionTo<Agent>;

fn transport(
    read: BoxRead,
    write: BoxWrite,
) -> ByteStreams<tokio_util::compat::Compat<BoxWrite>, tokio_util::compat::Compat<BoxRead>> {
    ByteStreams::new(write.compat_write(), read.compat())
}

/// Serves ACP on `read`/`write` until the connection ends.
pub async fn serve(read: BoxRead, write: BoxWrite, signals: Signals) {
    let _ = Agent
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
            async move |prompt: PromptRequest,
                        responder: agent_client_protocol::v1::Responder<PromptResponse>,
                        cx: agent_client_protocol::v1::ConnectionTo<ClientRole>| {
                // Every stack's handler lets go of the params before it parks.
                let work = acp_work(&prompt);
                drop(prompt);
                match work {
                    Work::Noop => responder.respond(PromptResponse::new(StopReason::EndTurn)),
                    Work::Heap => {
                        signals.heap();
                        responder.respond(PromptResponse::new(StopReason::EndTurn))
                    }
                    Work::Park(label) => {
                        let signals = signals.clone();
                        let cancellation = responder.cancellation();
                        // The SDK does not stop a handler: it fires a cancellation the handler
                        // watches, in a task of its own so the dispatch loop goes on.
                        cx.spawn(async move {
                            let clock = StopClock(signals.clone());
                            signals.started(label);
                            cancellation.cancelled().await;
                            drop(clock);
                            responder.respond_with_error(
                                agent_client_protocol::Error::request_cancelled(),
                            )
                        })
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport(read, write))
        .await;
}

/// An ACP SDK client (initialized); its connection runs in a task of its own.
#[derive(Clone)]
pub struct Client {
    cx: Connection,
}

/// Connects and initializes a client on `read`/`write`.
pub async fn connect(read: BoxRead, write: BoxWrite) -> Client {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = ClientRole
            .v1()
            .connect_with(transport(read, write), async move |cx: Connection| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let _ = tx.send(cx);
                // The connection lives as long as the runtime the run is on.
                std::future::pending::<Result<(), agent_client_protocol::Error>>().await
            })
            .await;
    });
    Client {
        cx: rx.await.expect("the ACP SDK client initializes"),
    }
}

impl Conn for Client {
    fn call(&self, text: Arc<str>) -> impl Future<Output = ()> + Send + 'static {
        let answer = self
            .cx
            .send_request(acp_params(Work::Noop, &text))
            .block_task();
        async move {
            answer.await.expect("a no-op prompt is answered");
        }
    }

    fn park(&self, label: u64, text: &Arc<str>) -> Box<dyn Parked> {
        let sent = self.cx.send_request(acp_params(Work::Park(label), text));
        let handle = sent.cancellation_handle();
        Box::new(ParkedPrompt {
            handle,
            answer: Box::pin(async move {
                let _ = sent.block_task().await;
            }),
        })
    }

    fn heap(&self) -> impl Future<Output = ()> + Send + 'static {
        let answer = self
            .cx
            .send_request(acp_params(Work::Heap, ""))
            .block_task();
        async move {
            answer.await.expect("a heap prompt is answered");
        }
    }
}

struct ParkedPrompt {
    handle: agent_client_protocol::RequestCancellationHandle,
    answer: BoxFut,
}

impl std::future::Future for ParkedPrompt {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.answer.as_mut().poll(cx)
    }
}

impl Parked for ParkedPrompt {
    fn cancel(self: Box<Self>) -> BoxFut {
        self.handle.cancel().expect("the cancel is sent");
        let answer = self.answer;
        Box::pin(answer)
    }

    fn answered(&self) -> bool {
        true
    }
}
