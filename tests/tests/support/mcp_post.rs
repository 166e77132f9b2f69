//! A Streamable HTTP `POST` of one JSON-RPC message as a client sends it (shared by the HTTP
//! server's test files): `Accept` for JSON or an event stream, the session if any, and for a
//! message stamped with MCP 2026-07-28 the version and routing headers that revision requires.

use cancelkit::wire::{headers, meta};
use serde_json::Value;

const V2026: &str = "2026-07-28";

/// `message` POSTed to `url` with `client`, in `session` if given.
pub fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    message: &Value,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(url)
        .header("accept", headers::ACCEPT_JSON_OR_SSE)
        .json(message);
    if let Some(session) = session {
        request = request.header(headers::SESSION_ID, session);
    }
    // A 2026-07-28 request names its version, method and tool in headers too.
    if message["params"]["_meta"][meta::PROTOCOL_VERSION] == V2026 {
        request = request.header(headers::PROTOCOL_VERSION, V2026);
        let method = message["method"].as_str().unwrap_or_default();
        for (name, value) in headers::routing(method, &message["params"]) {
            request = request.header(name, value);
        }
    }
    request
}
