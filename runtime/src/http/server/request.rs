//! What a handler served by [`McpHttpServer`](super::McpHttpServer) learns about the HTTP
//! request that carried its JSON-RPC request.

use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, Method, Uri};
use cancelkit_protocol::jsonrpc::RequestId;

use crate::peer::Context;

/// The HTTP side of a request, as its handler sees it through [`HttpRequest::of`]: the
/// headers and extensions of the POST that carried it (what an authentication layer put
/// there: a user, a tenant, scopes), the session it belongs to, and the id the client gave it.
///
/// ```
/// use cancelkit::http::server::HttpRequest;
/// use cancelkit::peer::Context;
/// use cancelkit::JsonRpcError;
///
/// #[derive(Clone)]
/// struct User(String);
///
/// async fn whoami(_params: serde_json::Value, cx: Context) -> Result<String, JsonRpcError> {
///     let user = HttpRequest::of(&cx)
///         .and_then(|http| http.extensions().get::<User>())
///         .ok_or_else(|| JsonRpcError::internal("no user: served without the auth layer"))?;
///     Ok(user.0.clone())
/// }
/// ```
#[derive(Debug)]
pub struct HttpRequest {
    parts: Parts,
    pub(super) session: Option<Arc<str>>,
    id: RequestId,
}

impl HttpRequest {
    pub(super) fn new(parts: Parts, session: Option<Arc<str>>, id: RequestId) -> HttpRequest {
        HttpRequest { parts, session, id }
    }

    /// The HTTP request behind the request `cx` handles, when it came through
    /// [`McpHttpServer`](super::McpHttpServer); `None` on other transports and for
    /// notifications.
    pub fn of(cx: &Context) -> Option<&HttpRequest> {
        cx.transport::<HttpRequest>()
    }

    /// The headers of the POST.
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The extensions of the POST: whatever the layers in front of the server inserted.
    pub fn extensions(&self) -> &Extensions {
        &self.parts.extensions
    }

    /// The method of the HTTP request (always `POST`).
    pub fn method(&self) -> &Method {
        &self.parts.method
    }

    /// The URI the POST was sent to.
    pub fn uri(&self) -> &Uri {
        &self.parts.uri
    }

    /// The session (`Mcp-Session-Id`) the request belongs to; `None` for a 2026-07-28
    /// request, which belongs to none.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The id the client gave the request. In a session it is the id the handler sees too; a
    /// 2026-07-28 request reaches the handler under an id of the server's (its peer is shared
    /// by clients whose ids may collide), and this is the client's own.
    pub fn client_id(&self) -> &RequestId {
        &self.id
    }
}
