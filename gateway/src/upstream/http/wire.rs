//! The wire: POSTing a message, reading a JSON or SSE answer within the size limit, the
//! progress and server requests met on the way, and the `_meta` stamp.

use super::*;

/// How an exchange ended without a result.
#[derive(Debug)]
pub(super) enum Failure {
    /// Nothing was processed: the upstream could not be reached, or answered 5xx.
    Unavailable(String),
    /// A 4xx without a JSON-RPC error in its body.
    Refused(StatusCode, String),
    /// A 404 for a request carrying the session.
    SessionExpired,
    /// The upstream's JSON-RPC error.
    Rpc(JsonRpcError),
    /// The request was sent, but its answer did not come whole.
    Lost(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unavailable(why) | Failure::Lost(why) => f.write_str(why),
            Failure::Refused(status, body) => write!(f, "HTTP {status}: {body}"),
            Failure::SessionExpired => f.write_str("the session expired (HTTP 404)"),
            Failure::Rpc(e) => write!(f, "error {}: {}", e.code.code(), e.message),
        }
    }
}

impl From<Failure> for CallError {
    fn from(failure: Failure) -> CallError {
        match failure {
            Failure::Rpc(e) => CallError::Rpc(e),
            Failure::Lost(why) => CallError::Lost(why),
            other => CallError::Unavailable(other.to_string()),
        }
    }
}

/// A request's answer.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) result: Value,
    /// The `Mcp-Session-Id` the answer carried (for `initialize`).
    pub(super) session: Option<HeaderValue>,
}

/// What the gateway says it is.
pub(super) fn client_info() -> Value {
    json!({"name": "cancelkit-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// Stamps a 2026-07-28 request: version, capabilities (none) and client info in `_meta`,
/// over whatever the caller's params held there.
pub(super) fn stamp(params: &mut Value) {
    let (capabilities, info) = (json!({}), client_info());
    let stamp = meta::Stamp::new(&capabilities).with_info(Some(&info));
    meta::stamp(params, &stamp, meta::Existing::Replace);
}

pub(super) fn lists_2026(result: &Value) -> bool {
    meta::discover_lists(result, V2026)
}

/// The POST carrying `message`, with the headers the era asks for.
pub(super) fn post(
    endpoint: &Endpoint,
    connection: &Connection,
    message: &Value,
    extra: Vec<(HeaderName, HeaderValue)>,
) -> reqwest::RequestBuilder {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static(headers::ACCEPT_JSON_OR_SSE),
    );
    match &connection.era {
        Era::V2026 => {
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(V2026.text()));
        }
        Era::Legacy { version, session } => {
            if let Some(version) = version {
                headers.insert(PROTOCOL_VERSION, version.clone());
            }
            if let Some(session) = session {
                headers.insert(SESSION_ID, session.clone());
            }
        }
    }
    headers.extend(extra);
    endpoint
        .client
        .post(&*endpoint.url)
        .headers(headers)
        .body(message.to_string())
}

/// What sending failed with: nothing reached the server (connecting failed), or the request
/// may have reached it.
pub(super) fn send_failure(endpoint: &Endpoint, error: &reqwest::Error) -> Failure {
    if error.is_connect() || error.is_builder() {
        Failure::Unavailable(format!("cannot reach {}: {}", endpoint.url, chain(error)))
    } else {
        Failure::Lost(format!("the request failed: {}", chain(error)))
    }
}

/// POSTs a notification (or a response to a server's request); any 2xx is success.
pub(super) async fn notify(
    endpoint: &Endpoint,
    connection: &Connection,
    message: &Value,
) -> Result<(), String> {
    let response = post(endpoint, connection, message, Vec::new())
        .send()
        .await
        .map_err(|e| chain(&e).to_string())?;
    let status = response.status();
    // Read the (empty or small) body so the connection can be used again.
    let _ = read_body(response, ERROR_BODY_LIMIT, true).await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// Sends request `id` and reads its answer (JSON or SSE), forwarding progress on the way.
/// With `in_flight`, the POST is sent from a task of its own, which is put there.
pub(super) async fn exchange(
    endpoint: &Endpoint,
    connection: &Connection,
    id: i64,
    message: &Value,
    extra: Vec<(HeaderName, HeaderValue)>,
    progress: Option<&Progress<'_>>,
    in_flight: Option<&mut Option<InFlight>>,
) -> Result<Answer, Failure> {
    let sending = post(endpoint, connection, message, extra).send();
    let sent = match in_flight {
        None => sending.await,
        Some(slot) => {
            let (answered, answered_rx) = oneshot::channel();
            let task = tokio::spawn(async move {
                let sent = sending.await;
                if sent.is_ok() {
                    let _ = answered.send(());
                }
                sent
            });
            *slot = Some(InFlight {
                answered: answered_rx,
                post: task.abort_handle(),
            });
            task.await
                .map_err(|e| Failure::Lost(format!("sending the request failed: {e}")))?
        }
    };
    let response = sent.map_err(|e| send_failure(endpoint, &e))?;
    let status = response.status();
    let session = response.headers().get(SESSION_ID).cloned();
    if status == StatusCode::NOT_FOUND && connection.has_session() {
        return Err(Failure::SessionExpired);
    }
    if !status.is_success() {
        let body = read_body(response, ERROR_BODY_LIMIT, true)
            .await
            .unwrap_or_default();
        if let Ok(message) = serde_json::from_slice::<Value>(&body)
            && message.get("id") == Some(&Value::from(id))
            && let Some(error) = message.get("error")
        {
            return Err(Failure::Rpc(rpc_error(error)));
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(200)])
            .trim()
            .to_owned();
        return Err(if status.is_server_error() {
            Failure::Unavailable(format!("HTTP {status}: {text}"))
        } else {
            Failure::Refused(status, text)
        });
    }
    let event_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(sse::CONTENT_TYPE))
        });
    let reader = Reader {
        endpoint,
        connection,
        id,
        progress,
    };
    let result = if event_stream {
        reader.sse(response).await?
    } else {
        let body = read_body(response, MAX_MESSAGE_BYTES, false).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Failure::Lost(format!(
                "the upstream answered HTTP {status} without a response to request {id}"
            )));
        }
        let message: Value = serde_json::from_slice(&body)
            .map_err(|e| Failure::Lost(format!("the answer is not JSON: {e}")))?;
        reader.messages(message).ok_or_else(|| {
            Failure::Lost(format!("the answer holds no response to request {id}"))
        })??
    };
    Ok(Answer { result, session })
}

/// Reads a body up to `limit` bytes: beyond, the rest is left unread when `truncate`, else
/// the answer is refused as [`Failure::Lost`].
pub(super) async fn read_body(
    response: reqwest::Response,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, Failure> {
    let too_large = || Failure::Lost(format!("the answer exceeds {limit} bytes"));
    if !truncate
        && response
            .content_length()
            .is_some_and(|length| length > limit as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| Failure::Lost(format!("the answer broke off: {}", chain(&e))))?;
        if body.len() + chunk.len() > limit {
            if truncate {
                body.extend_from_slice(&chunk[..limit - body.len()]);
                break;
            }
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads the messages answering request `id`.
pub(super) struct Reader<'a> {
    pub(super) endpoint: &'a Endpoint,
    pub(super) connection: &'a Connection,
    pub(super) id: i64,
    pub(super) progress: Option<&'a Progress<'a>>,
}

impl Reader<'_> {
    /// Reads SSE events until the response to `id`.
    pub(super) async fn sse(&self, response: reqwest::Response) -> Result<Value, Failure> {
        let mut stream = response.bytes_stream();
        let mut parser = sse::Parser::new(sse::Limits::new(MAX_MESSAGE_BYTES));
        let mut events = Vec::new();
        loop {
            let chunk = match stream.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => {
                    return Err(Failure::Lost(format!(
                        "the response stream broke: {}",
                        chain(&e)
                    )));
                }
                None => {
                    return Err(Failure::Lost(format!(
                        "the response stream ended without a response to request {}",
                        self.id
                    )));
                }
            };
            parser
                .feed(&chunk, &mut events)
                .map_err(|e| Failure::Lost(e.to_string()))?;
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue; // a priming event (an id and a retry time, no message)
                }
                let message = match serde_json::from_str::<Value>(&event.data) {
                    Ok(message) => message,
                    Err(e) => {
                        tracing::warn!(
                            upstream = &*self.endpoint.upstream,
                            "an SSE event that is not JSON is skipped: {e}"
                        );
                        continue;
                    }
                };
                if let Some(outcome) = self.messages(message) {
                    // The stream normally ends with the response: read its end if it is
                    // already here, so the connection can be used again.
                    for _ in 0..4 {
                        match stream.next().now_or_never() {
                            Some(Some(Ok(_))) => {}
                            _ => break,
                        }
                    }
                    return outcome;
                }
            }
        }
    }

    /// Handles one message (or a batch); the outcome once the response to `id` is among them.
    pub(super) fn messages(&self, message: Value) -> Option<Result<Value, Failure>> {
        match message {
            Value::Array(batch) => batch.into_iter().find_map(|m| self.message(m)),
            message => self.message(message),
        }
    }

    pub(super) fn message(&self, message: Value) -> Option<Result<Value, Failure>> {
        let upstream = &*self.endpoint.upstream;
        let Value::Object(mut message) = message else {
            tracing::warn!(upstream, "a message that is not an object is skipped");
            return None;
        };
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            let method = method.to_owned();
            if let Some(id) = message.get("id").cloned() {
                self.answer_request(&method, id);
            } else if method == "notifications/progress" {
                self.forward_progress(message.remove("params"));
            } else {
                tracing::debug!(upstream, method, "notification during a call ignored");
            }
            return None;
        }
        if message.get("id") != Some(&Value::from(self.id)) {
            tracing::debug!(upstream, id = ?message.get("id"), "a response to another request is ignored");
            return None;
        }
        Some(if let Some(error) = message.get("error") {
            Err(Failure::Rpc(rpc_error(error)))
        } else if let Some(result) = message.remove("result") {
            Ok(result)
        } else {
            Err(Failure::Lost(format!(
                "the response to request {} has neither result nor error",
                self.id
            )))
        })
    }

    pub(super) fn forward_progress(&self, params: Option<Value>) {
        let (Some(progress), Some(Value::Object(mut params))) = (self.progress, params) else {
            return;
        };
        if params.get("progressToken") != Some(&progress.token) {
            return;
        }
        params.remove("progressToken");
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) =
            progress.sink.try_send(Value::Object(params))
        {
            tracing::debug!(
                upstream = &*self.endpoint.upstream,
                id = self.id,
                "progress dropped: the caller's buffer is full"
            );
        }
    }

    /// Answers a server's request met on a call's stream: `ping` with an empty result, any
    /// other with -32601 (the gateway offers the server nothing to ask for).
    pub(super) fn answer_request(&self, method: &str, id: Value) {
        let answer = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
        };
        let upstream = &*self.endpoint.upstream;
        if !matches!(self.connection.era, Era::Legacy { .. }) {
            tracing::debug!(upstream, method, "a 2026-07-28 server's request is ignored");
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let endpoint = self.endpoint.clone();
        let connection = Connection {
            era: self.connection.era.clone(),
            generation: self.connection.generation,
        };
        let method = method.to_owned();
        runtime.spawn(async move {
            let sent =
                tokio::time::timeout(CANCEL_TIMEOUT, notify(&endpoint, &connection, &answer)).await;
            if !matches!(sent, Ok(Ok(()))) {
                tracing::debug!(
                    upstream = &*endpoint.upstream,
                    method,
                    "the answer to the server's request was not delivered"
                );
            }
        });
    }
}

/// A JSON-RPC error object as received; a malformed one becomes -32603 carrying it as data.
pub(super) fn rpc_error(error: &Value) -> JsonRpcError {
    serde_json::from_value::<ErrorObject>(error.clone())
        .map(JsonRpcError::from)
        .unwrap_or_else(|_| {
            JsonRpcError::new(
                ErrorCode::InternalError,
                "the upstream sent a malformed error",
            )
            .with_data(error.clone())
        })
}
