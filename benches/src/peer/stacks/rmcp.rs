//! rmcp 3.11 as an MCP server and client.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, RunningService};

use super::super::conn::{BoxFut, Conn, Parked};
use super::super::work::{Signals, StopClock, Work, mcp_params, mcp_work};
use super::{BoxRead, BoxWrite};

#[derive(Clone)]
struct Server {
    signals: Signals,
}

impl rmcp::ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Every stack's handler lets go of the params before it parks.
        let work = mcp_work(&request);
        drop(request);
        match work {
            Work::Park(label) => {
                let _clock = StopClock(self.signals.clone());
                self.signals.started(label);
                // rmcp does not stop a handler: it cancels `ct`, which the handler must watch.
                context.ct.cancelled().await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            Work::Heap => {
                self.signals.heap();
                Ok(CallToolResult::success(vec![]).into())
            }
            Work::Noop => Ok(CallToolResult::success(vec![]).into()),
        }
    }
}

/// Serves MCP on `read`/`write` until the connection ends.
pub async fn serve(read: BoxRead, write: BoxWrite, signals: Signals) {
    if let Ok(running) = (Server { signals }).serve((read, write)).await {
        let _ = running.waiting().await;
    }
}

/// An rmcp client (initialized).
#[derive(Clone)]
pub struct Client {
    peer: Peer<RoleClient>,
    _running: Arc<RunningService<RoleClient, ()>>,
}

/// Connects and initializes a client on `read`/`write`.
pub async fn connect(read: BoxRead, write: BoxWrite) -> Client {
    let running = ().serve((read, write)).await.expect("rmcp client initializes");
    Client {
        peer: running.peer().clone(),
        _running: Arc::new(running),
    }
}

impl Conn for Client {
    fn call(&self, text: Arc<str>) -> impl Future<Output = ()> + Send + 'static {
        let peer = self.peer.clone();
        async move {
            peer.call_tool(mcp_params(Work::Noop, &text))
                .await
                .expect("a no-op call is answered");
        }
    }

    fn park(&self, label: u64, text: &Arc<str>) -> Box<dyn Parked> {
        let peer = self.peer.clone();
        let params = mcp_params(Work::Park(label), text);
        Box::new(ParkedCall(Box::pin(async move {
            let _ = peer.call_tool(params).await;
        })))
    }

    fn heap(&self) -> impl Future<Output = ()> + Send + 'static {
        let peer = self.peer.clone();
        async move {
            peer.call_tool(mcp_params(Work::Heap, ""))
                .await
                .expect("a heap call is answered");
        }
    }
}

/// rmcp's call future: sent on its first poll, cancelled (notifications/cancelled) on drop.
struct ParkedCall(BoxFut);

impl std::future::Future for ParkedCall {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Parked for ParkedCall {
    fn cancel(self: Box<Self>) -> BoxFut {
        drop(self);
        Box::pin(std::future::ready(()))
    }

    fn answered(&self) -> bool {
        false
    }
}
