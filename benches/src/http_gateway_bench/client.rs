//! The load generator's MCP client, the same code for every stack: a 2025-11-25 Streamable
//! HTTP session (`initialize`, `notifications/initialized`, then every request with its
//! `Mcp-Session-Id` and `MCP-Protocol-Version`) over a shared keep-alive reqwest pool. An
//! answer is read whole, as JSON or as an SSE stream (the message whose `id` is the request's).

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

/// The revision every stack is asked for.
pub const REVISION: &str = "2025-11-25";

/// Where a stack is called: its MCP endpoint and its bearer token.
#[derive(Clone)]
pub struct Endpoint {
    /// The MCP endpoint.
    pub url: String,
    /// The bearer token (none for the upstream itself and the bare proxy).
    pub token: Option<String>,
}

impl Endpoint {
    fn post(&self, http: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
        let request = http
            .post(url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json");
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

/// One client's MCP session.
#[derive(Clone)]
pub struct Session {
    http: reqwest::Client,
    endpoint: Endpoint,
    headers: HeaderMap,
}

/// A keep-alive client for one stack (its own pool).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(4096)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
}

impl Session {
    /// Opens a session on `endpoint`: `initialize` then `notifications/initialized`.
    pub async fn open(http: &reqwest::Client, endpoint: &Endpoint) -> Result<Session, String> {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": {},
                "clientInfo": {"name": "cancelkit-bench", "version": "1"},
            },
        });
        let response = endpoint
            .post(http, &endpoint.url)
            .body(initialize.to_string())
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let status = response.status();
        let session = response.headers().get("mcp-session-id").cloned();
        let answer = read_answer(response, &json!(0)).await?;
        let version = answer["result"]["protocolVersion"]
            .as_str()
            .ok_or_else(|| format!("initialize answered {status}: {answer}"))?;
        let mut headers = HeaderMap::new();
        if let Some(session) = session {
            headers.insert("mcp-session-id", session);
        }
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_str(version).map_err(|e| e.to_string())?,
        );
        let session = Session {
            http: http.clone(),
            endpoint: endpoint.clone(),
            headers,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let status = session
            .send(&initialized)
            .await
            .map_err(|e| format!("notifications/initialized: {e}"))?
            .status();
        if !status.is_success() {
            return Err(format!("notifications/initialized answered {status}"));
        }
        Ok(session)
    }

    async fn send(&self, message: &Value) -> reqwest::Result<reqwest::Response> {
        self.endpoint
            .post(&self.http, &self.endpoint.url)
            .headers(self.headers.clone())
            .body(message.to_string())
            .send()
            .await
    }

    /// Sends the request `id` (`method` with `params`) and reads its answer whole.
    pub async fn request(&self, id: u64, method: &str, params: Value) -> Result<Value, String> {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self.send(&message).await.map_err(|e| e.to_string())?;
        read_answer(response, &json!(id)).await
    }

    /// `tools/call` of `tool` with `arguments`; the JSON-RPC answer.
    pub async fn call(&self, id: u64, tool: &str, arguments: Value) -> Result<Value, String> {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    /// The names of the tools the stack lists.
    pub async fn tool_names(&self) -> Result<Vec<String>, String> {
        let answer = self.request(1, "tools/list", json!({})).await?;
        Ok(answer["result"]["tools"]
            .as_array()
            .ok_or_else(|| format!("tools/list answered {answer}"))?
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }
}

/// Reads an answer whole: a JSON body, or the SSE event carrying the message with `id`.
async fn read_answer(response: reqwest::Response, id: &Value) -> Result<Value, String> {
    let status = response.status();
    let sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    if !sse {
        return serde_json::from_slice(&body).map_err(|_| {
            format!(
                "answered {status} with {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            )
        });
    }
    let text = std::str::from_utf8(&body).map_err(|e| e.to_string())?;
    sse_message(text, id).ok_or_else(|| {
        format!(
            "no answer to {id} in the SSE stream ({status}): {}",
            &text[..text.len().min(300)]
        )
    })
}

/// The JSON-RPC answer with `id` among the events of an SSE stream (`data:` lines, events
/// ended by a blank line; events that are not JSON, such as a priming event, are skipped).
fn sse_message(text: &str, id: &Value) -> Option<Value> {
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            data.push('\n');
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && message.get("id") == Some(id)
                && message.get("method").is_none()
            {
                return Some(message);
            }
            data.clear();
        }
    }
    None
}

/// The `text` of a `tools/call` answer's first content block.
pub fn text(answer: &Value) -> Option<&str> {
    answer["result"]["content"][0]["text"].as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_found_among_sse_events() {
        let stream = "data: \nid: 0\nretry: 3000\n\n\
                      data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                      data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n\n\
                      data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}\nid: 1/0\n";
        let answer = sse_message(stream, &json!(7)).expect("found");
        assert_eq!(text(&answer), Some("x"));
        assert_eq!(sse_message(stream, &json!(8)), None);
    }
}
