//! cancelkit's `Peer` as an MCP server and client (2025-11-25) or an ACP agent and client.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{PromptRequest, PromptResponse, StopReason};
use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, McpRevision, OutgoingRequest, Peer, PeerHandle, Protocol, Router};
use rmcp::model::{CallToolRequestParams, CallToolResult};

use super::super::conn::{BoxFut, Conn, Parked};
use super::super::work::{Signals, StopClock, Work, acp_params, acp_work, mcp_params, mcp_work};
use super::{BoxRead, BoxWrite};

/// The protocol of one side: MCP or ACP.
pub fn protocol(acp: bool) -> Protocol {
    if acp {
        Protocol::Acp
    } else {
        Protocol::Mcp(McpRevision::V2025_11_25)
    }
}

/// Room for the loaded rows' 10,000 running requests and their samples: cancelkit's default
/// bound (4,096 in flight) would refuse the rest with -32050; rmcp and the ACP SDK have none.
pub const MAX_IN_FLIGHT: usize = 20_000;

async fn park(label: u64, signals: Signals) {
    let _clock = StopClock(signals.clone());
    signals.started(label);
    std::future::pending::<()>().await;
}

/// The server's router: the same work as the other stacks, on the same typed params.
pub fn router(acp: bool, signals: Signals) -> Router {
    if acp {
        Router::new().request(
            "session/prompt",
            move |prompt: PromptRequest, _cx: Context| {
                let signals = signals.clone();
                // Every stack's handler lets go of the params before it parks.
                let work = acp_work(&prompt);
                drop(prompt);
                async move {
                    match work {
                        Work::Park(label) => park(label, signals).await,
                        Work::Heap => signals.heap(),
                        Work::Noop => {}
                    }
                    Ok::<_, JsonRpcError>(PromptResponse::new(StopReason::EndTurn))
                }
            },
        )
    } else {
        Router::new().request(
            "tools/call",
            move |call: CallToolRequestParams, _cx: Context| {
                let signals = signals.clone();
                let work = mcp_work(&call);
                drop(call);
                async move {
                    match work {
                        Work::Park(label) => park(label, signals).await,
                        Work::Heap => signals.heap(),
                        Work::Noop => {}
                    }
                    Ok::<_, JsonRpcError>(CallToolResult::success(vec![]))
                }
            },
        )
    }
}

/// Serves `acp` or MCP on `read`/`write` until the connection ends.
pub async fn serve(acp: bool, read: BoxRead, write: BoxWrite, signals: Signals) {
    serve_limited(acp, read, write, signals, None).await;
}

/// [`serve`] with a concurrency limit (the cancelkit-only "limit full" row).
pub async fn serve_limited(
    acp: bool,
    read: BoxRead,
    write: BoxWrite,
    signals: Signals,
    limit: Option<usize>,
) {
    let mut builder = Peer::builder(protocol(acp))
        .router(router(acp, signals))
        .max_in_flight(MAX_IN_FLIGHT)
        .max_in_flight_bytes(1 << 30);
    if let Some(limit) = limit {
        builder = builder.max_concurrency(limit);
    }
    builder.connect(read, write).closed().await;
}

/// A cancelkit client.
#[derive(Clone)]
pub struct Client {
    handle: PeerHandle,
    acp: bool,
    _peer: Arc<Peer>,
}

/// Connects a client on `read`/`write`.
pub fn connect(acp: bool, read: BoxRead, write: BoxWrite) -> Client {
    let peer = Peer::builder(protocol(acp)).connect(read, write);
    Client {
        handle: peer.handle(),
        acp,
        _peer: Arc::new(peer),
    }
}

impl Client {
    /// The server side's view is not needed; this is the client's handle.
    pub fn handle(&self) -> &PeerHandle {
        &self.handle
    }

    fn send(&self, work: Work, text: &str) -> Request {
        if self.acp {
            Request::Acp(
                self.handle
                    .request("session/prompt", acp_params(work, text)),
            )
        } else {
            Request::Mcp(self.handle.request("tools/call", mcp_params(work, text)))
        }
    }
}

/// One request of either protocol, each deserializing the answer into its typed result.
enum Request {
    Mcp(OutgoingRequest<CallToolResult>),
    Acp(OutgoingRequest<PromptResponse>),
}

impl std::future::Future for Request {
    type Output = bool;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<bool> {
        match self.get_mut() {
            Request::Mcp(r) => std::pin::Pin::new(r).poll(cx).map(|r| r.is_ok()),
            Request::Acp(r) => std::pin::Pin::new(r).poll(cx).map(|r| r.is_ok()),
        }
    }
}

impl Conn for Client {
    fn call(&self, text: Arc<str>) -> impl Future<Output = ()> + Send + 'static {
        let request = self.send(Work::Noop, &text);
        async move { assert!(request.await, "a no-op request is answered") }
    }

    fn park(&self, label: u64, text: &Arc<str>) -> Box<dyn Parked> {
        Box::new(ParkedRequest(self.send(Work::Park(label), text)))
    }

    fn heap(&self) -> impl Future<Output = ()> + Send + 'static {
        let request = self.send(Work::Heap, "");
        async move { assert!(request.await, "a heap request is answered") }
    }
}

struct ParkedRequest(Request);

impl std::future::Future for ParkedRequest {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl Parked for ParkedRequest {
    fn cancel(self: Box<Self>) -> BoxFut {
        match self.0 {
            // MCP: dropping the request sends notifications/cancelled; nothing is answered.
            Request::Mcp(request) => {
                drop(request);
                Box::pin(std::future::ready(()))
            }
            // ACP: cancel it and read the -32800 answer.
            Request::Acp(mut request) => {
                request.cancel();
                Box::pin(async move {
                    assert!(request.await.is_err(), "a cancelled prompt gets -32800");
                })
            }
        }
    }

    fn answered(&self) -> bool {
        matches!(self.0, Request::Acp(_))
    }
}
