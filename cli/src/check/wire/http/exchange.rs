//! One request's POST and its answer: a JSON body, or an event stream read into the routes
//! until the request's response came.

use super::*;

pub(super) fn is_sse(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with(sse::CONTENT_TYPE))
}

/// At most [`ERROR_BODY`] characters of `text`, on one line.
pub(super) fn quote(text: &str) -> String {
    let text = text.trim().replace(['\r', '\n'], " ");
    match text.char_indices().nth(ERROR_BODY) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// Reads a whole body, refusing one longer than `limit`.
pub(super) async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| io::Error::other(chain(&e).to_string()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(io::Error::other(format!("a body exceeds {limit} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// POSTs one request and routes what answers it, until its response came or the answer ended.
pub(super) async fn exchange(
    post: reqwest::RequestBuilder,
    method: &str,
    key: &str,
    routes: &Shared,
    shared: &Mutex<State>,
    url: &str,
) {
    let response = match post.send().await {
        Ok(response) => response,
        Err(e) => {
            let why = format!("cannot POST {method} to {url}: {}", chain(&e));
            return Http::failed(shared, why, e.is_connect());
        }
    };
    locked(shared).refused = false;
    let status = response.status();
    if method == "initialize"
        && let Some(session) = response.headers().get(SESSION_ID)
    {
        locked(shared).session = Some(session.clone());
    }
    if status.is_success() && is_sse(response.headers()) {
        let mut reader = Reader::new(Arc::clone(routes), Some(key.to_owned()));
        if let Err(why) = reader.sse(response).await {
            locked(shared).failure = Some(format!("{method} (id {key}): {why}"));
        }
        if method == "initialize" {
            remember_version(shared, reader.response.as_ref());
        }
        return;
    }
    let body = match read_body(response, MAX_LINE).await {
        Ok(body) => body,
        Err(e) => {
            locked(shared).failure = Some(format!("{method} (id {key}): {e}"));
            return;
        }
    };
    match serde_json::from_slice::<Value>(&body) {
        // a JSON-RPC answer, even with an error status (a refused request's error)
        Ok(message) if message.is_object() || message.is_array() => {
            if method == "initialize" && status.is_success() {
                remember_version(shared, Some(&message));
            }
            lock(routes).route_all(message);
        }
        _ if status == StatusCode::ACCEPTED && body.is_empty() => {
            let why = format!("{method} (id {key}): HTTP 202 without a response");
            locked(shared).failure = Some(why);
        }
        _ => {
            let text = String::from_utf8_lossy(&body);
            let why = format!("{method} (id {key}): HTTP {status}: {}", quote(&text));
            locked(shared).failure = Some(why);
        }
    }
}

/// A request body of one chunk that says when it has been taken whole: when the client asks
/// for more after it, or drops it.
pub(super) struct Signalling {
    chunk: Option<Vec<u8>>,
    sent: Option<oneshot::Sender<()>>,
}

impl Signalling {
    /// The body, and what wakes when it has gone.
    pub(super) fn body(bytes: Vec<u8>) -> (reqwest::Body, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let stream = Signalling {
            chunk: Some(bytes),
            sent: Some(tx),
        };
        (reqwest::Body::wrap_stream(stream), rx)
    }
}

impl futures_util::Stream for Signalling {
    type Item = io::Result<Vec<u8>>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if let Some(chunk) = self.chunk.take() {
            return std::task::Poll::Ready(Some(Ok(chunk)));
        }
        if let Some(sent) = self.sent.take() {
            let _ = sent.send(());
        }
        std::task::Poll::Ready(None)
    }
}

/// After `initialize`: its result names the revision every later POST carries.
pub(super) fn remember_version(shared: &Mutex<State>, answer: Option<&Value>) {
    if let Some(version) = answer.and_then(|a| a["result"]["protocolVersion"].as_str()) {
        locked(shared).version = Some(version.to_owned());
    }
}

/// Reads one answer's event stream into the routes.
pub(super) struct Reader {
    routes: Shared,
    /// The request whose response ends the reading (none for a notification's stream).
    key: Option<String>,
    /// That response, once it came.
    response: Option<Value>,
}

impl Reader {
    pub(super) fn new(routes: Shared, key: Option<String>) -> Reader {
        Reader {
            routes,
            key,
            response: None,
        }
    }

    /// Routes each event's message until the stream ends or its request's response came.
    pub(super) async fn sse(&mut self, mut response: reqwest::Response) -> Result<(), String> {
        let mut parser = sse::Parser::new(sse::Limits::new(MAX_LINE));
        let mut events = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("the event stream broke: {}", chain(&e))),
            };
            parser
                .feed(&chunk, &mut events)
                .map_err(|e| e.to_string())?;
            for sse::Event { data, .. } in events.drain(..) {
                if data.trim().is_empty() {
                    continue; // a priming event, or a keep-alive
                }
                let message = serde_json::from_str::<Value>(&data)
                    .unwrap_or_else(|_| json!({ "unparsed": data }));
                let ours = self.key.as_deref().is_some_and(|key| {
                    message.get("method").is_none()
                        && message.get("id").map(id_key).as_deref() == Some(key)
                });
                if ours {
                    self.response = Some(message.clone());
                }
                lock(&self.routes).route_all(message);
            }
            if self.response.is_some() {
                return Ok(());
            }
        }
    }
}
