//! Why a request got no answer from the server, and the error response the peer gets instead.

use cancelkit_protocol::jsonrpc::RequestId;
use reqwest::StatusCode;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::JsonRpcError;

/// What kind of transport failure a -32603 error made by the client stands for: its
/// `data.transport`. Errors the server itself sent carry none.
///
/// ```
/// use cancelkit::JsonRpcError;
/// use cancelkit::http::client::TransportFailure;
///
/// let error = JsonRpcError::internal("cannot reach the server")
///     .with_data(serde_json::json!({"transport": "unreachable"}));
/// assert_eq!(TransportFailure::of(&error), Some(TransportFailure::Unreachable));
/// assert!(TransportFailure::Unreachable.never_reached_the_server());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportFailure {
    /// The server could not be reached (connecting failed): the request was not processed.
    Unreachable,
    /// The server answered with a non-2xx status and no JSON-RPC error (`data.status` holds
    /// it, `data.body` the start of the body).
    Status,
    /// The server ended the session (HTTP 404 to a request carrying it); the connection
    /// closes.
    SessionExpired,
    /// The request was sent but its answer was lost: the connection broke, or the event stream
    /// ended before the response and could not be resumed. The server may still run it.
    Lost,
    /// An event, or the answer, was larger than the client's limit.
    TooLarge,
    /// The answer was not what the protocol allows: not JSON, not a JSON-RPC message, or
    /// without the response.
    BadAnswer,
    /// The request was larger than the client's limit and was not sent.
    NotSent,
}

impl TransportFailure {
    const ALL: [TransportFailure; 7] = [
        TransportFailure::Unreachable,
        TransportFailure::Status,
        TransportFailure::SessionExpired,
        TransportFailure::Lost,
        TransportFailure::TooLarge,
        TransportFailure::BadAnswer,
        TransportFailure::NotSent,
    ];

    /// Its name in `data.transport`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransportFailure::Unreachable => "unreachable",
            TransportFailure::Status => "http_status",
            TransportFailure::SessionExpired => "session_expired",
            TransportFailure::Lost => "lost",
            TransportFailure::TooLarge => "too_large",
            TransportFailure::BadAnswer => "bad_answer",
            TransportFailure::NotSent => "not_sent",
        }
    }

    /// The failure an error stands for, if the client made it.
    pub fn of(error: &JsonRpcError) -> Option<TransportFailure> {
        let name = error.data.as_ref()?.get("transport")?.as_str()?;
        TransportFailure::ALL
            .into_iter()
            .find(|f| f.as_str() == name)
    }

    /// Whether the request certainly did not reach the server's handler, so sending it again
    /// (on a new connection, for an expired session) cannot run it twice.
    pub const fn never_reached_the_server(self) -> bool {
        matches!(
            self,
            TransportFailure::Unreachable
                | TransportFailure::NotSent
                | TransportFailure::SessionExpired
        )
    }
}

/// Why a request got no response.
#[derive(Debug)]
pub(super) enum Failure {
    /// Connecting failed.
    Unreachable(String),
    /// A non-2xx status whose body held no JSON-RPC error.
    Status { status: StatusCode, excerpt: String },
    /// A non-2xx status whose body held this JSON-RPC error object (passed on as it is).
    Rpc(Box<RawValue>),
    /// 404 to a request carrying the session.
    SessionExpired,
    /// The answer broke off.
    Lost(String),
    /// Beyond a size limit.
    TooLarge(String),
    /// Not an answer the protocol allows.
    BadAnswer(String),
}

impl Failure {
    /// What sending failed with: nothing reached the server (connecting failed), or the request
    /// may have reached it.
    pub(super) fn of_send(url: &reqwest::Url, error: &reqwest::Error) -> Failure {
        // reqwest's message names the URL: shown without its password and query.
        let shown = shown_url(url);
        let cause = cancelkit_wire::chain(error)
            .to_string()
            .replace(url.as_str(), &shown);
        if error.is_connect() || error.is_builder() {
            Failure::Unreachable(format!("cannot reach {shown}: {cause}"))
        } else {
            Failure::Lost(format!("the request failed: {cause}"))
        }
    }

    /// The error response for request `id`.
    pub(super) fn response(&self, id: &RequestId) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            jsonrpc: &'static str,
            id: &'a RequestId,
            error: &'a RawValue,
        }
        if let Failure::Rpc(error) = self {
            let out = Out {
                jsonrpc: "2.0",
                id,
                error,
            };
            if let Ok(bytes) = serde_json::to_vec(&out) {
                return bytes;
            }
        }
        crate::peer::wire::error(Some(id), &self.to_error())
    }

    /// The -32603 error standing for this failure (for [`Failure::Rpc`], the server's error
    /// is passed on instead, by [`response`](Self::response)).
    pub(super) fn to_error(&self) -> JsonRpcError {
        let (kind, message, mut data) = match self {
            Failure::Unreachable(why) => (TransportFailure::Unreachable, why.clone(), json!({})),
            Failure::Status { status, excerpt } => (
                TransportFailure::Status,
                if excerpt.is_empty() {
                    format!("the server answered HTTP {status}")
                } else {
                    format!("the server answered HTTP {status}: {excerpt}")
                },
                json!({"status": status.as_u16(), "body": excerpt}),
            ),
            Failure::Rpc(error) => (
                TransportFailure::Status,
                "the server answered with an error".to_owned(),
                json!({"error": serde_json::from_str::<Value>(error.get()).unwrap_or(Value::Null)}),
            ),
            Failure::SessionExpired => (
                TransportFailure::SessionExpired,
                "the server ended the session (HTTP 404 to its Mcp-Session-Id); the connection closes: connect again".to_owned(),
                json!({"status": 404}),
            ),
            Failure::Lost(why) => (TransportFailure::Lost, why.clone(), json!({})),
            Failure::TooLarge(why) => (TransportFailure::TooLarge, why.clone(), json!({})),
            Failure::BadAnswer(why) => (TransportFailure::BadAnswer, why.clone(), json!({})),
        };
        data["transport"] = kind.as_str().into();
        JsonRpcError::internal(message).with_data(data)
    }
}

/// The error for a request the peer wrote beyond the client's message limit.
pub(super) fn not_sent(limit: usize) -> JsonRpcError {
    JsonRpcError::internal(format!(
        "the request exceeds the client's message limit of {limit} bytes and was not sent"
    ))
    .with_data(json!({"transport": TransportFailure::NotSent.as_str()}))
}

/// The longest part of an error body quoted in a message, in characters.
const EXCERPT_CHARS: usize = 200;

/// The failure a non-2xx answer stands for, from the start of its body: the JSON-RPC error
/// it holds, if any, else the status and the body's first characters.
pub(super) fn from_status(status: StatusCode, body: &[u8]) -> Failure {
    #[derive(serde::Deserialize)]
    struct ErrorMessage {
        error: Box<RawValue>,
    }
    if let Ok(message) = serde_json::from_slice::<ErrorMessage>(body)
        && message.error.get().trim_start().starts_with('{')
    {
        return Failure::Rpc(message.error);
    }
    Failure::Status {
        status,
        excerpt: excerpt(body),
    }
}

/// The first characters of a body, on one line.
pub(super) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text
        .trim()
        .chars()
        .take(EXCERPT_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.trim().chars().nth(EXCERPT_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

/// `url` as logs and errors show it: a password becomes `***`, and so does a query string (it
/// may carry a token); the scheme, user, host, port and path stay.
pub(crate) fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    if shown.query().is_some() {
        shown.set_query(Some("***"));
    }
    shown.set_fragment(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_url_hides_the_password_and_the_query() {
        let url =
            reqwest::Url::parse("https://bob:s3cret@example.com:8443/mcp?token=t0k3n#x").unwrap();
        let shown = shown_url(&url);
        assert_eq!(shown, "https://bob:***@example.com:8443/mcp?***");
        assert!(!shown.contains("s3cret") && !shown.contains("t0k3n"));
        let plain = reqwest::Url::parse("http://127.0.0.1:9/mcp").unwrap();
        assert_eq!(shown_url(&plain), "http://127.0.0.1:9/mcp");
    }
}
