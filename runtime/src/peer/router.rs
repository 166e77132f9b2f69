//! Routing methods to typed handlers.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use cancelkit_protocol::jsonrpc::RequestId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::handle::PeerHandle;
use crate::JsonRpcError;

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A handler's answer, serialized.
pub(crate) type Reply = Result<Box<RawValue>, JsonRpcError>;

/// What a handler knows about the message it handles: the connection it came on and, for a
/// request, its id.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) peer: PeerHandle,
    pub(crate) id: Option<RequestId>,
    pub(crate) transport: Option<Arc<dyn Any + Send + Sync>>,
}

impl Context {
    /// The connection, for requests and notifications back to the peer. Requests sent from a
    /// handler are children of the handler's scope: cancelling the handler cancels them too,
    /// and the peer is told.
    pub fn peer(&self) -> &PeerHandle {
        &self.peer
    }

    /// The id of the request being handled (`None` for a notification).
    pub fn request_id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    /// What the transport knows about the request being handled, if it is a `T`: under
    /// `cancelkit::http::server::McpHttpServer` (feature `http`) an
    /// `cancelkit::http::server::HttpRequest` with the HTTP request's headers and
    /// extensions (what an authentication layer put there), its session and the client's own
    /// id. `None` on stdio, for notifications, and for a type the transport does not give.
    pub fn transport<T: Any>(&self) -> Option<&T> {
        self.transport.as_deref()?.downcast_ref()
    }
}

trait ErasedRequest: Send + Sync {
    fn call(&self, params: Option<&RawValue>, cx: Context) -> BoxFuture<Reply>;
}

pub(crate) trait ErasedNotification: Send + Sync {
    fn call(&self, params: Option<&RawValue>, cx: Context) -> Result<BoxFuture<()>, String>;
}

struct Typed<F, P, R, E> {
    handler: F,
    _types: PhantomData<fn(P) -> (R, E)>,
}

fn parse<P: DeserializeOwned>(params: Option<&RawValue>) -> Result<P, serde_json::Error> {
    serde_json::from_str(params.map_or("null", RawValue::get))
}

impl<F, Fut, P, R, E> ErasedRequest for Typed<F, P, R, E>
where
    F: Fn(P, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    P: DeserializeOwned + 'static,
    R: Serialize + 'static,
    E: Into<JsonRpcError> + 'static,
{
    fn call(&self, params: Option<&RawValue>, cx: Context) -> BoxFuture<Reply> {
        match parse::<P>(params) {
            Err(e) => Box::pin(std::future::ready(Err(JsonRpcError::invalid_params(
                format!("Invalid params: {e}"),
            )))),
            Ok(params) => {
                let fut = (self.handler)(params, cx);
                Box::pin(async move { super::wire::to_raw(&fut.await.map_err(Into::into)?) })
            }
        }
    }
}

impl<F, Fut, P> ErasedNotification for Typed<F, P, (), ()>
where
    F: Fn(P, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    P: DeserializeOwned + 'static,
{
    fn call(&self, params: Option<&RawValue>, cx: Context) -> Result<BoxFuture<()>, String> {
        let params = parse::<P>(params).map_err(|e| e.to_string())?;
        Ok(Box::pin((self.handler)(params, cx)))
    }
}

/// A request route: the handler and the method it serves.
pub(crate) struct RequestRoute {
    handler: Box<dyn ErasedRequest>,
    /// The method it serves, for the log line of a cancelled request.
    pub(crate) method: Arc<str>,
}

impl RequestRoute {
    pub(crate) fn call(&self, params: Option<&RawValue>, cx: Context) -> BoxFuture<Reply> {
        self.handler.call(params, cx)
    }
}

/// Maps method names to handlers.
///
/// A request handler is any `Fn(P, Context) -> impl Future<Output = Result<R, E>>` with
/// `P: Deserialize`, `R: Serialize` and `E: Into<JsonRpcError>` — a `#[cancellable]` function
/// fits as it is. Params that do not deserialize into `P` are answered with -32602 before the
/// handler runs.
///
/// ```
/// use cancelkit::peer::{Context, Router};
/// use cancelkit::{cancellable, JsonRpcError};
///
/// #[derive(serde::Deserialize)]
/// struct Echo { text: String }
///
/// #[cancellable]
/// async fn echo(params: Echo, _cx: Context) -> Result<String, JsonRpcError> {
///     Ok(params.text)
/// }
///
/// let router = Router::new().request("echo", echo);
/// # let _ = router;
/// ```
#[derive(Clone, Default)]
pub struct Router {
    requests: HashMap<String, Arc<RequestRoute>>,
    notifications: HashMap<String, Arc<dyn ErasedNotification>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut requests: Vec<&String> = self.requests.keys().collect();
        requests.sort();
        let mut notifications: Vec<&String> = self.notifications.keys().collect();
        notifications.sort();
        f.debug_struct("Router")
            .field("requests", &requests)
            .field("notifications", &notifications)
            .finish()
    }
}

impl Router {
    /// An empty router: every request is answered with -32601 Method not found.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes requests for `method` to `handler`.
    ///
    /// When the request is cancelled, the handler's own `#[cancellable]` attribute decides:
    /// `#[cancellable]` drops it at its next `.await` (or answers with its `on_cancel` value),
    /// `#[cancellable(cooperative)]` lets it run to the partial result it returns, and a `grace`
    /// drops it once the grace runs out. A cancelled request is answered with -32800 (for MCP,
    /// not at all) unless the handler returned something else. A handler without the attribute
    /// takes the mode of the first `#[cancellable]` function it awaits, and is dropped at its
    /// next `.await` if it has awaited none.
    pub fn request<F, Fut, P, R, E>(self, method: impl Into<String>, handler: F) -> Self
    where
        F: Fn(P, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        P: DeserializeOwned + 'static,
        R: Serialize + 'static,
        E: Into<JsonRpcError> + 'static,
    {
        self.route(method.into(), handler)
    }

    fn route<F, Fut, P, R, E>(mut self, method: String, handler: F) -> Self
    where
        F: Fn(P, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        P: DeserializeOwned + 'static,
        R: Serialize + 'static,
        E: Into<JsonRpcError> + 'static,
    {
        let handler = Box::new(Typed {
            handler,
            _types: PhantomData,
        });
        let name = Arc::from(method.as_str());
        self.requests.insert(
            method,
            Arc::new(RequestRoute {
                handler,
                method: name,
            }),
        );
        self
    }

    /// Routes notifications for `method` to `handler`. Params that do not deserialize are
    /// logged and dropped (a notification never gets a response).
    ///
    /// Notification handlers run one at a time, in the order their notifications arrived, so
    /// streamed updates (ACP `session/update`) are seen in order; a handler that waits holds
    /// up later notifications, never requests or cancels.
    pub fn notification<F, Fut, P>(mut self, method: impl Into<String>, handler: F) -> Self
    where
        F: Fn(P, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        P: DeserializeOwned + 'static,
    {
        let handler: Arc<dyn ErasedNotification> = Arc::new(Typed::<F, P, (), ()> {
            handler,
            _types: PhantomData,
        });
        self.notifications.insert(method.into(), handler);
        self
    }

    /// Takes out the route for `method`, request or notification (a route of
    /// `cancelkit::mcp::McpServer::router` you answer yourself, or not at all).
    pub fn remove(mut self, method: &str) -> Self {
        self.requests.remove(method);
        self.notifications.remove(method);
        self
    }

    pub(crate) fn request_route(&self, method: &str) -> Option<&Arc<RequestRoute>> {
        self.requests.get(method)
    }

    pub(crate) fn notification_route(&self, method: &str) -> Option<&Arc<dyn ErasedNotification>> {
        self.notifications.get(method)
    }
}
