//! The Streamable HTTP transport: every JSON-RPC message is a POST to one endpoint.
//!
//! * A request's POST is sent from a task of its own (once its body has gone out on the
//!   connection, the next message may be sent: a cancel never overtakes its request), which
//!   reads the answer — a JSON body, or
//!   a `text/event-stream` whose events may carry notifications and requests before the
//!   response — and routes every message through the shared `Routes`. The task stops reading
//!   once its response came, when the stream ends (the waiter is then told nothing will come),
//!   or after the per-request timeout.
//! * A notification's POST is awaited; its status (202 expected) is reported for the evidence.
//!   A JSON-RPC message in a 2xx answer is routed like any other (a reply to a notification is
//!   the server's fault); a 4xx is the transport's way to refuse a notification and is only
//!   reported; a 5xx is kept among the others as `{"http_status", "body"}`, so the scenario
//!   that watched for replies sees it.
//! * Legacy revisions: the `Mcp-Session-Id` that answers `initialize` is sent on every later
//!   POST, and `MCP-Protocol-Version` once `initialize` named the revision; the session is
//!   ended with `DELETE` at shutdown.
//! * 2026-07-28 (a request whose `_meta` names it, and every message after one): no session;
//!   `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` on every POST. Closing a request's
//!   response stream is its cancellation: [`Http::close_stream`] aborts the request's task,
//!   which drops its connection.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cancelkit_wire::headers::{
    ACCEPT_JSON_OR_SSE, MCP_METHOD, MCP_NAME, PROTOCOL_VERSION, SESSION_ID, routing,
};
use cancelkit_wire::{McpRevision, chain, meta, sse};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::{MAX_LINE, MAX_PENDING, Pending, Shared, id_key, lock};

mod exchange;

use exchange::*;

/// How long a notification's POST (and a session's DELETE) may take.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of an error body is read and quoted.
const ERROR_BODY: usize = 2048;
/// The `_meta` key naming a 2026-07-28 request's revision.
const META_VERSION: &str = meta::PROTOCOL_VERSION;
/// The first revision with per-request routing headers and no session (versions are dates,
/// so a later one compares greater).
const STATELESS: &str = McpRevision::V2026_07_28.text();

/// What the request tasks and the client share besides the routes.
#[derive(Default)]
struct State {
    /// The legacy session, from the answer to `initialize`.
    session: Option<HeaderValue>,
    /// The revision named in `MCP-Protocol-Version`, once known.
    version: Option<String>,
    /// The task of each request still being read, by id key, with its generation.
    streams: HashMap<String, (u64, AbortHandle)>,
    generation: u64,
    /// The last thing that went wrong.
    failure: Option<String>,
    /// Whether the last connection attempt failed (nothing answered).
    refused: bool,
}

/// A Streamable HTTP client of one endpoint.
pub struct Http {
    url: Arc<str>,
    http: reqwest::Client,
    pub(super) routes: Shared,
    state: Arc<Mutex<State>>,
    request_timeout: Duration,
}

fn locked(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The certificates of a PEM CA file.
fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match reqwest::Certificate::from_pem_bundle(&bytes) {
        Ok(certificates) if !certificates.is_empty() => Ok(certificates),
        Ok(_) => Err(format!("{} holds no PEM certificate", path.display())),
        Err(e) => Err(format!(
            "{} holds no PEM certificate: {}",
            path.display(),
            chain(&e)
        )),
    }
}

/// `name: value` as a header, or why it cannot be one.
pub fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not a header name"))?;
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| format!("the value of `{name}` cannot be sent as a header"))?;
    value.set_sensitive(true);
    Ok((name, value))
}

impl Http {
    /// A client of `url` that sends `headers` (such as `Authorization`) with every request; a
    /// request's POST and the reading of its answer last at most `request_timeout`. An
    /// `https://` URL is trusted through the platform's roots (and `SSL_CERT_FILE`) and the
    /// certificates of `ca_file`.
    pub fn new(
        url: &str,
        request_timeout: Duration,
        headers: &[(String, String)],
        ca_file: Option<&Path>,
    ) -> io::Result<Http> {
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let parsed = reqwest::Url::parse(url).map_err(|e| invalid(format!("`{url}`: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid(format!("`{url}`: not an http:// or https:// URL")));
        }
        let trusted = match ca_file {
            Some(path) => ca_certificates(path).map_err(invalid)?,
            None => Vec::new(),
        };
        let mut defaults = HeaderMap::new();
        for (name, value) in headers {
            let (name, value) = header(name, value).map_err(invalid)?;
            defaults.append(name, value);
        }
        let http = reqwest::Client::builder()
            .tls_certs_merge(trusted)
            .default_headers(defaults)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(NOTIFY_TIMEOUT)
            .build()
            .map_err(|e| io::Error::other(chain(&e).to_string()))?;
        Ok(Http {
            url: url.into(),
            http,
            routes: Shared::default(),
            state: Arc::default(),
            request_timeout,
        })
    }

    /// The last failure on the transport.
    pub fn failure(&self) -> Option<String> {
        locked(&self.state).failure.clone()
    }

    /// Whether the last connection attempt got no HTTP answer at all.
    pub fn unreachable(&self) -> bool {
        locked(&self.state).refused
    }

    /// The POST carrying `frame`, with the headers the revision asks for; remembers the
    /// revision a stamped request names.
    fn post(&self, frame: &Value) -> reqwest::RequestBuilder {
        self.post_with(frame, reqwest::Body::from(frame.to_string()))
    }

    fn post_with(&self, frame: &Value, body: reqwest::Body) -> reqwest::RequestBuilder {
        let method = frame["method"].as_str().unwrap_or_default();
        let stamped = frame["params"]["_meta"][META_VERSION].as_str();
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static(ACCEPT_JSON_OR_SSE));
        let version = {
            let mut state = locked(&self.state);
            if method == "initialize" {
                // a new legacy handshake: whatever came before does not count
                state.version = None;
                state.session = None;
            } else if let Some(stamped) = stamped {
                state.version = Some(stamped.to_owned());
            }
            if let Some(session) = &state.session {
                headers.insert(SESSION_ID, session.clone());
            }
            state.version.clone()
        };
        if let Some(version) = version {
            if version.as_str() >= STATELESS {
                self.routing_headers(method, &frame["params"], &mut headers);
            }
            if let Ok(value) = HeaderValue::from_str(&version) {
                headers.insert(PROTOCOL_VERSION, value);
            }
        }
        self.http.post(&*self.url).headers(headers).body(body)
    }

    /// `Mcp-Method`, and `Mcp-Name` for the methods that act on a named thing.
    fn routing_headers(&self, method: &str, params: &Value, headers: &mut HeaderMap) {
        for (name, value) in routing(method, params) {
            debug_assert!(name == MCP_METHOD || name == MCP_NAME);
            headers.insert(name, value);
        }
    }

    /// Notes a failure; `refused` when nothing answered.
    fn failed(shared: &Mutex<State>, why: String, refused: bool) {
        let mut state = locked(shared);
        state.failure = Some(why);
        state.refused = refused;
    }

    fn send_failure(&self, method: &str, error: &reqwest::Error) -> io::Error {
        let why = format!("cannot POST {method} to {}: {}", self.url, chain(error));
        Http::failed(&self.state, why.clone(), error.is_connect());
        let kind = if error.is_connect() {
            io::ErrorKind::ConnectionRefused
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, why)
    }

    /// POSTs a notification; how it was answered, for the evidence.
    pub async fn notify(&self, frame: &Value) -> io::Result<String> {
        let method = frame["method"].as_str().unwrap_or("a message").to_owned();
        let sent = self.post(frame).timeout(NOTIFY_TIMEOUT).send().await;
        let response = sent.map_err(|e| self.send_failure(&method, &e))?;
        locked(&self.state).refused = false;
        let status = response.status();
        let sse = is_sse(response.headers());
        let mut note = format!("HTTP {status}");
        if status.is_success() && sse {
            // a stream answering a notification: read what is on it, within the timeout
            let mut reader = Reader::new(Arc::clone(&self.routes), None);
            let read = reader.sse(response);
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, read).await;
            note.push_str(" with an event stream");
            return Ok(note);
        }
        let body = read_body(response, MAX_LINE).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        if !text.trim().is_empty() {
            note = format!("{note}: {}", quote(&text));
        }
        if status.is_success() {
            if let Ok(message) = serde_json::from_slice::<Value>(&body) {
                lock(&self.routes).route_all(message);
            }
        } else if status.is_server_error() {
            let kept = json!({"http_status": status.as_u16(), "body": quote(&text)});
            lock(&self.routes).route(kept);
        }
        Ok(note)
    }

    /// Registers a waiter for `id`, then POSTs `frame` from a task that reads the answer;
    /// returns once the body has been written to the connection (or could not be, or after
    /// 5 s).
    pub async fn request(&self, id: &Value, frame: &Value) -> io::Result<Pending> {
        let key = id_key(id);
        let pending = lock(&self.routes).register(id)?;
        let method = frame["method"].as_str().unwrap_or_default().to_owned();
        let bytes = frame.to_string().into_bytes();
        // with its length, not chunked: some servers refuse a body without one
        let length = bytes.len();
        let (body, sent) = Signalling::body(bytes);
        let post = self.post_with(frame, body).header(CONTENT_LENGTH, length);
        let routes = Arc::clone(&self.routes);
        let shared = Arc::clone(&self.state);
        let url = Arc::clone(&self.url);
        let timeout = self.request_timeout;
        let generation = {
            let mut state = locked(&self.state);
            state.generation += 1;
            state.generation
        };
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let exchange = exchange(post, &method, &task_key, &routes, &shared, &url);
            if tokio::time::timeout(timeout, exchange).await.is_err() {
                let why = format!("{method} (id {task_key}): no answer within {timeout:?}");
                locked(&shared).failure = Some(why);
            }
            // Nothing more can come for this request: its waiter learns it now.
            lock(&routes).pending.remove(&task_key);
            let mut state = locked(&shared);
            if state.streams.get(&task_key).map(|s| s.0) == Some(generation) {
                state.streams.remove(&task_key);
            }
        });
        {
            let mut state = locked(&self.state);
            if state.streams.len() >= MAX_PENDING {
                state.streams.retain(|_, (_, task)| !task.is_finished());
            }
            state.streams.insert(key, (generation, task.abort_handle()));
        }
        // Dropped unsent (the connection failed) wakes this as well as sent.
        let _ = tokio::time::timeout(NOTIFY_TIMEOUT, sent).await;
        Ok(pending)
    }

    /// Aborts the task reading request `id`'s answer, which closes its connection; whether
    /// there was one still open.
    pub fn close_stream(&self, id: &Value) -> bool {
        let key = id_key(id);
        let Some((_, task)) = locked(&self.state).streams.remove(&key) else {
            return false;
        };
        let open = !task.is_finished();
        task.abort();
        lock(&self.routes).pending.remove(&key);
        open
    }

    /// Aborts every request's task and ends a legacy session with `DELETE`.
    pub async fn shutdown(self) {
        let (streams, session) = {
            let mut state = locked(&self.state);
            (std::mem::take(&mut state.streams), state.session.take())
        };
        for (_, task) in streams.into_values() {
            task.abort();
        }
        if let Some(session) = session {
            let delete = self
                .http
                .delete(&*self.url)
                .header(SESSION_ID, session)
                .timeout(NOTIFY_TIMEOUT)
                .send();
            let _ = delete.await;
        }
    }
}

#[cfg(test)]
mod tests;
