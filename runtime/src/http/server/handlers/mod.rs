//! `POST`, `GET` and `DELETE` on the served path: here `POST` and what every method checks;
//! a session's life (`initialize`, `GET`, `DELETE`) in `sessions.rs`.

mod head;
mod sessions;

use head::{accepts, check_origin, is_2026, is_json, json, rpc_error, session_header};

pub(super) use sessions::{delete, get};

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State as AxumState;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use cancelkit_wire::{McpRevision, admission, headers as mcp_headers, sse};
use serde_json::value::RawValue;

use super::State;
use super::conn::{Admitted, Conn, Kind, Refusal, cancelled_id};
use super::request::HttpRequest;
use super::session::Session;
use super::stream::{self, BodyOptions, Event, Events};
use crate::JsonRpcError;
use crate::peer::limits::{check_identifiers, id_len};
use crate::peer::wire::{self, Incoming};
use crate::peer::{Inbound, Message};

type Shared = AxumState<Arc<State>>;

/// The one revision of the shared peer.
const V2026: &str = McpRevision::V2026_07_28.text();

/// Where a POST goes.
enum Target {
    /// `initialize` without a session: a new one.
    NewSession,
    Session(Arc<Session>),
    /// The peer of 2026-07-28 requests.
    Shared(Arc<Conn>),
}

/// Who sends the request, when sessions have owners.
fn owner(state: &State, parts: &Parts) -> Option<String> {
    state
        .options
        .owner
        .as_ref()
        .and_then(|owner| (owner.0)(parts))
}

fn target(
    state: &State,
    parts: &Parts,
    id: Option<&RequestId>,
    method: Option<&str>,
    params: Option<&RawValue>,
) -> Result<Target, Box<Response>> {
    let headers = &parts.headers;
    if let Some(session_id) = session_header(headers) {
        let owner = owner(state, parts);
        return match state.sessions.get(session_id, owner.as_deref()) {
            Some(session) => Ok(Target::Session(session)),
            None => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                id,
                -32001,
                "Session not found: it ended or never existed; send initialize for a new one",
            ))),
        };
    }
    match method {
        Some(method) if is_2026(headers, method, params) => Ok(Target::Shared(state.shared_conn())),
        Some("initialize") if id.is_some() => Ok(Target::NewSession),
        _ => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "Bad Request: no Mcp-Session-Id header; send initialize first, or stamp the request \
             for MCP 2026-07-28 (params._meta)",
        ))),
    }
}

/// `MCP-Protocol-Version` (and at 2026-07-28 the routing headers) must be one the request can
/// be answered by: in a session, any legacy revision the server speaks (see
/// [`session_version`]); for a 2026-07-28 request, what it is stamped with.
fn check_headers(
    headers: &HeaderMap,
    target: &Target,
    request: Option<(&RequestId, &str, Option<&RawValue>)>,
) -> Option<Response> {
    let id = request.map(|(id, ..)| id);
    match target {
        Target::NewSession => None,
        Target::Session(session) => {
            let sent = headers.get(mcp_headers::PROTOCOL_VERSION)?;
            let agreed = session
                .version
                .get()
                .map_or("a revision not agreed yet", String::as_str);
            let message = session_version(sent.as_bytes(), agreed).err()?;
            Some(rpc_error(StatusCode::BAD_REQUEST, id, -32600, &message))
        }
        Target::Shared(_) => {
            let (_, method, params) = request?;
            let params: serde_json::Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or_default();
            let rejection = admission::admit(headers, method, &params, &[V2026]).err()?;
            let mut error = JsonRpcError::new(ErrorCode::from(rejection.code), rejection.message);
            error.data = rejection.data;
            let status = StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::BAD_REQUEST);
            Some(json(status, wire::error(id, &error)))
        }
    }
}

/// Whether a session whose `initialize` agreed on `agreed` serves a request whose
/// `MCP-Protocol-Version` is `sent`; the refusal's message if not.
///
/// The header SHOULD name the negotiated revision, and a server MUST answer 400 to one that is
/// *invalid or unsupported* (2025-06-18 and 2025-11-25, basic/transports): so any revision that
/// `initialize` answers as itself ([`McpRevision::legacy`]: 2024-11-05, 2025-03-26, 2025-06-18,
/// 2025-11-25) is served, by the session's own rules — the official suite's client sends
/// 2025-03-26 in a 2025-11-25 session, and the TypeScript and Python SDK servers accept any
/// version they support. 2026-07-28 is refused although the server speaks it: that revision has
/// no sessions and requires the version in the body's `_meta` to match the header, which a
/// session's request does not carry; the Python SDK 2.x likewise routes a request with that
/// header out of its sessions, to the stateless era, which refuses an unstamped request.
fn session_version(sent: &[u8], agreed: &str) -> Result<(), String> {
    let sent = String::from_utf8_lossy(sent);
    match McpRevision::parse(&sent) {
        Some(revision) if revision.has_initialize() => Ok(()),
        Some(revision) => Err(format!(
            "Bad Request: MCP-Protocol-Version is {revision}, which has no sessions, but the \
             request is in a session that speaks {agreed}"
        )),
        None => Err(format!(
            "Bad Request: MCP-Protocol-Version {sent:?} is not a revision this server supports in \
             a session ({}); the session speaks {agreed}",
            McpRevision::legacy()
                .map(McpRevision::text)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `POST`: one JSON-RPC message.
pub(super) async fn post(AxumState(state): Shared, mut parts: Parts, body: Bytes) -> Response {
    let headers = &parts.headers;
    if let Some(refused) = check_origin(&state, headers) {
        return refused;
    }
    let (takes_json, takes_sse) = accepts(headers);
    if !takes_json && !takes_sse {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "Not Acceptable: the client must accept application/json and text/event-stream",
        );
    }
    if !is_json(headers) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            -32600,
            "Unsupported Media Type: the body must be application/json",
        );
    }
    match wire::parse(&body) {
        Incoming::Invalid { id, error } => {
            // An id over the bound is not echoed.
            let id = id.filter(|id| id_len(id) <= state.max_id_len);
            json(StatusCode::BAD_REQUEST, wire::error(id.as_ref(), &error))
        }
        Incoming::Ignored(why) => rpc_error(StatusCode::BAD_REQUEST, None, -32600, why),
        Incoming::Request { id, method, params } => {
            // Before anything keeps the id or the token (a route, a session's maps, a peer):
            // the peer's own rule, applied here because the shared peer sees ours instead.
            if let Err(refused) = check_identifiers(&id, params, true, state.max_id_len) {
                tracing::warn!(
                    length = refused.len,
                    max = state.max_id_len,
                    "refused a request whose id or progress token is over the bound"
                );
                let answer_to = refused.echo_id.then_some(&id);
                return json(
                    StatusCode::BAD_REQUEST,
                    wire::error(answer_to, &refused.error),
                );
            }
            let target = match target(&state, &parts, Some(&id), Some(&method), params) {
                Ok(target) => target,
                Err(refused) => return *refused,
            };
            if let Some(refused) = check_headers(headers, &target, Some((&id, &method, params))) {
                return refused;
            }
            let session = match &target {
                Target::Session(session) => Some(Arc::clone(&session.id)),
                Target::NewSession | Target::Shared(_) => None,
            };
            let owner = match &target {
                Target::NewSession | Target::Shared(_) => owner(&state, &parts),
                Target::Session(_) => None,
            };
            // The server's hook sees the request before its handler does; the headers it
            // gives go on the response (an event stream starts before the handler runs).
            let extra = state
                .options
                .on_request
                .as_ref()
                .map(|hook| (hook.0)(&method, &mut parts));
            let call = Call {
                id: &id,
                method: &method,
                params,
                takes_json,
                takes_sse,
                http: HttpRequest::new(parts, session, id.clone()),
            };
            let mut response = match target {
                Target::NewSession => sessions::initialize(&state, call, owner).await,
                Target::Session(session) => {
                    let conn = Arc::clone(&session.conn);
                    request(&state, &conn, Some(&session), call, None).await
                }
                Target::Shared(conn) => request(&state, &conn, None, call, owner).await,
            };
            if let Some(extra) = extra {
                response.headers_mut().extend(extra);
            }
            response
        }
        Incoming::Notification { method, params } => {
            let target = match target(&state, &parts, None, Some(&method), params) {
                Ok(target) => target,
                Err(refused) => return *refused,
            };
            if let Some(refused) = check_headers(headers, &target, None) {
                return refused;
            }
            notification(target, &method, params, state.max_id_len).await
        }
        Incoming::Response { id, outcome } => {
            match target(&state, &parts, None, None, None) {
                Ok(Target::Session(session)) => {
                    session.conn.answered(&id);
                    let response = Message::Response { id, outcome };
                    session.conn.send(0, None, response).await;
                }
                Ok(_) => tracing::debug!(%id, "a response outside a session; dropped"),
                Err(refused) => return *refused,
            }
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn notification(
    target: Target,
    method: &str,
    params: Option<&RawValue>,
    max_id_len: usize,
) -> Response {
    let message = || Message::Notification {
        method: method.to_owned(),
        params: params.map(ToOwned::to_owned),
    };
    match target {
        Target::Session(session) => {
            if method == "notifications/cancelled"
                && let Some(id) = params.and_then(|p| cancelled_id(p.get()))
            {
                if id_len(&id) > max_id_len {
                    // No request has such an id (it would have been refused), and a cancel
                    // kept for it would hold the id for its request that never comes.
                    tracing::debug!(
                        length = id_len(&id),
                        "ignored a cancel naming a request id over the bound"
                    );
                    return StatusCode::ACCEPTED.into_response();
                }
                // The cancelled request's stream ends without a response, as MCP wants; a
                // cancel that overtook its request (or its writing into the peer) waits for it.
                if !session.conn.cancel(&id, message()) {
                    return StatusCode::ACCEPTED.into_response();
                }
            }
            session.conn.send(0, None, message()).await;
        }
        // 2026-07-28 cancels by closing the stream; a cancel names no channel to find its request.
        Target::Shared(_) if method == "notifications/cancelled" => {}
        Target::Shared(conn) => {
            conn.send(0, None, message()).await;
        }
        Target::NewSession => {}
    }
    StatusCode::ACCEPTED.into_response()
}

/// A request as it came.
struct Call<'a> {
    id: &'a RequestId,
    method: &'a str,
    params: Option<&'a RawValue>,
    takes_json: bool,
    takes_sse: bool,
    /// What its handler learns of the HTTP request.
    http: HttpRequest,
}

fn refusal(id: &RequestId, refusal: Refusal) -> Response {
    match refusal {
        Refusal::DuplicateId => rpc_error(
            StatusCode::BAD_REQUEST,
            Some(id),
            -32600,
            "Invalid request: a request with this id is already in flight in this session",
        ),
        Refusal::Full => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(id),
            -32050,
            "Server overloaded: too many requests in flight",
        ),
        Refusal::Closed => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(id),
            -32603,
            "the server is closing this connection",
        ),
    }
}

/// Cancels a 2026-07-28 request when its response stream goes away unanswered.
struct CancelOnDrop {
    conn: Arc<Conn>,
    key: super::conn::Key,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.conn.kind != Kind::Shared || !self.conn.forget(&self.key) {
            return;
        }
        let (channel, id) = self.key.clone();
        let abandoned = Inbound::Abandoned {
            channel,
            id,
            reason: Some("the client closed the response stream".into()),
        };
        let conn = Arc::clone(&self.conn);
        tokio::spawn(async move { conn.send_inbound(abandoned).await });
    }
}

async fn request(
    state: &State,
    conn: &Arc<Conn>,
    session: Option<&Session>,
    call: Call<'_>,
    owner: Option<String>,
) -> Response {
    let resumable = session.is_some() && state.options.replay > 0;
    let http = Some(Arc::new(call.http));
    let progress = crate::peer::progress_token_of(call.params);
    let admitted = match conn.admit(call.id, progress, resumable, http) {
        Ok(admitted) => admitted,
        Err(refused) => return refusal(call.id, refused),
    };
    let Admitted { stream, key } = admitted;
    let Ok(mut events) = stream.attach(None) else {
        unreachable!("a new stream has nothing to resume")
    };
    let guard = CancelOnDrop {
        conn: Arc::clone(conn),
        key,
    };
    let message = Message::Request {
        id: call.id.clone(),
        method: call.method.to_owned(),
        params: call.params.map(ToOwned::to_owned),
    };
    if !conn.send(guard.key.0, owner.map(Into::into), message).await {
        conn.forget(&guard.key);
        return refusal(call.id, Refusal::Closed);
    }
    if let Some(cancel) = conn.written(&guard.key) {
        // Its cancel came first, or while it was being written: the peer gets it right after
        // the request, as on stdio.
        conn.forget(&guard.key);
        conn.send(0, None, cancel).await;
    }
    let options = BodyOptions {
        ids: resumable,
        prime: resumable && session.is_some_and(Session::primes),
        keep_alive: state.options.keep_alive,
    };
    // A method with no handler is answered at once with an error, whose status (2026-07-28)
    // only a JSON answer can carry.
    let stream_now = !call.takes_json
        || (call.takes_sse
            && state.builder.routes_request(call.method)
            && state
                .options
                .stream_methods
                .iter()
                .any(|m| m == call.method));
    if stream_now {
        return event_stream(stream.id, None, events, options, guard);
    }
    // JSON unless something comes before the response. While waiting, this future holds the
    // guard: a client that goes away drops it.
    loop {
        match events.recv().await {
            Some(event) if event.last => {
                drop(guard);
                let status = match conn.kind {
                    Kind::Session => StatusCode::OK,
                    Kind::Shared => status_2026(&event.data),
                };
                return json(status, event.data);
            }
            Some(event) if call.takes_sse => {
                return event_stream(stream.id, Some(event), events, options, guard);
            }
            // A client that takes only JSON gets only the response.
            Some(_) => {}
            // Cancelled by the client in its session: no response, as MCP wants.
            None => return StatusCode::ACCEPTED.into_response(),
        }
    }
}

/// The status of a 2026-07-28 answer: 404 for a method not found, 400 for a request refused
/// as malformed, else 200.
fn status_2026(answer: &[u8]) -> StatusCode {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_slice::<Answer>(answer)
        .ok()
        .and_then(|a| a.error)
        .map_or(StatusCode::OK, |e| {
            StatusCode::from_u16(admission::status_of(e.code)).unwrap_or(StatusCode::OK)
        })
}

fn event_stream<G: Send + 'static>(
    stream_id: u64,
    first: Option<Event>,
    events: Events,
    options: BodyOptions,
    guard: G,
) -> Response {
    let body = stream::body(stream_id, first, events, options, guard);
    sse_response(Body::from_stream(body))
}

fn sse_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, sse::CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
