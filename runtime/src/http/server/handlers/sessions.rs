//! A session's life over HTTP: `initialize` opens it, `GET` opens its stream or resumes one of
//! its streams, `DELETE` ends it.

use std::sync::Arc;

use futures_util::StreamExt;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cancelkit_wire::headers as mcp_headers;

use crate::peer::Message;

use super::super::State;
use super::super::conn::Refusal;
use super::super::session::TooMany;
use super::super::stream::{self, AttachError, BodyOptions};
use super::{
    AxumState, Call, Shared, Target, accepts, check_headers, check_origin, event_stream, json,
    owner, refusal, rpc_error, session_header, sse_response, target,
};

/// `initialize` without a session: a new session of `owner`, kept if the peer agrees.
pub(super) async fn initialize(state: &State, call: Call<'_>, owner: Option<String>) -> Response {
    let conn = state.session_conn();
    let session = match state.sessions.create(Arc::clone(&conn), owner) {
        Ok(session) => session,
        Err(too_many) => {
            conn.peer.close();
            let message = match too_many {
                TooMany::Server(max) => {
                    format!("Server overloaded: {max} sessions are open, the most it holds")
                }
                TooMany::Owner(max) => format!(
                    "Server overloaded: you have {max} sessions open, the most one user may \
                     hold; end one (DELETE) or retry later"
                ),
            };
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(call.id),
                -32050,
                &message,
            );
        }
    };
    let mut http = call.http;
    http.session = Some(Arc::clone(&session.id));
    let progress = crate::peer::progress_token_of(call.params);
    let admitted = match conn.admit(call.id, progress, false, Some(Arc::new(http))) {
        Ok(admitted) => admitted,
        Err(refused) => return refusal(call.id, refused),
    };
    let Ok(mut events) = admitted.stream.attach(None) else {
        unreachable!("a new stream has nothing to resume")
    };
    let message = Message::Request {
        id: call.id.clone(),
        method: call.method.to_owned(),
        params: call.params.map(ToOwned::to_owned),
    };
    conn.send(0, None, message).await;
    let answer = loop {
        match events.recv().await {
            Some(event) if event.last => break Some(event.data),
            Some(_) => {}
            None => break None,
        }
    };
    let Some(answer) = answer else {
        state.sessions.remove(&session.id, session.owner());
        return refusal(call.id, Refusal::Closed);
    };
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Agreed>,
    }
    #[derive(serde::Deserialize)]
    struct Agreed {
        #[serde(rename = "protocolVersion")]
        version: String,
    }
    let agreed = serde_json::from_slice::<Answer>(&answer)
        .ok()
        .and_then(|a| a.result);
    let Some(agreed) = agreed else {
        // Refused: no session.
        state.sessions.remove(&session.id, session.owner());
        return json(StatusCode::OK, answer);
    };
    let _ = session.version.set(agreed.version);
    let mut response = json(StatusCode::OK, answer);
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response
            .headers_mut()
            .insert(mcp_headers::SESSION_ID, value);
    }
    response
}

/// `GET`: a session's stream, or the resumption of one of its streams (`Last-Event-ID`).
pub(in crate::http::server) async fn get(AxumState(state): Shared, parts: Parts) -> Response {
    let headers = &parts.headers;
    if let Some(refused) = check_origin(&state, headers) {
        return refused;
    }
    if !accepts(headers).1 {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "Not Acceptable: a GET stream is text/event-stream",
        );
    }
    let Some(session_id) = session_header(headers) else {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST, DELETE")],
            "GET opens a session's stream: it needs Mcp-Session-Id (2026-07-28 has no such stream)",
        )
            .into_response();
    };
    let target = match target(&state, &parts, None, None, None) {
        Ok(target) => target,
        Err(refused) => return *refused,
    };
    if let Some(refused) = check_headers(headers, &target, None) {
        return refused;
    }
    let Target::Session(session) = target else {
        unreachable!("a session header names a session or is refused: {session_id}")
    };
    let conn = &session.conn;
    let resumable = state.options.replay > 0;
    let options = BodyOptions {
        ids: resumable,
        prime: resumable && session.primes(),
        keep_alive: state.options.keep_alive,
    };
    let Some(last) = headers.get(mcp_headers::LAST_EVENT_ID) else {
        let Some(standalone) = &conn.standalone else {
            unreachable!("sessions have a stream of their own")
        };
        let events = standalone.attach_fresh();
        // Owed no answer: it ends when the server stops.
        let body = stream::body(standalone.id, None, events, options, ());
        let body = match state.options.stop.clone() {
            Some(stop) => body.take_until(stop.cancelled_owned()).left_stream(),
            None => body.right_stream(),
        };
        return sse_response(Body::from_stream(body));
    };
    let resumed = last
        .to_str()
        .ok()
        .and_then(stream::parse_event_id)
        .map(|(stream_id, seq)| match conn.stream(stream_id) {
            Some(stream) => stream.attach(Some(seq)).map(|events| (stream, events)),
            None if conn.ended(stream_id, seq) => Err(AttachError::Ended),
            None => Err(AttachError::Evicted),
        });
    match resumed {
        Some(Ok((stream, events))) => event_stream(
            stream.id,
            None,
            events,
            BodyOptions {
                prime: false,
                ..options
            },
            (),
        ),
        // Both official clients resume a stream that ended without a result (a cancelled
        // call's, or one answered with an error): 405 is the answer to a GET that the spec
        // gives besides an event stream, and the one both take quietly.
        Some(Err(AttachError::Ended)) => {
            let mut response = rpc_error(
                StatusCode::METHOD_NOT_ALLOWED,
                None,
                -32600,
                "this stream has ended and has nothing more to deliver (its request was \
                 cancelled or answered)",
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            response
        }
        Some(Err(AttachError::Evicted)) | None => rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "Bad Request: the stream of this Last-Event-ID cannot be resumed (unknown, or its \
             events are no longer kept)",
        ),
    }
}

/// `DELETE`: ends the session.
pub(in crate::http::server) async fn delete(AxumState(state): Shared, parts: Parts) -> Response {
    let headers = &parts.headers;
    if let Some(refused) = check_origin(&state, headers) {
        return refused;
    }
    let Some(session_id) = session_header(headers) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "Bad Request: DELETE ends a session and needs Mcp-Session-Id",
        );
    };
    let owner = owner(&state, &parts);
    if state.sessions.remove(session_id, owner.as_deref()) {
        StatusCode::OK.into_response()
    } else {
        rpc_error(StatusCode::NOT_FOUND, None, -32001, "Session not found")
    }
}
