//! What every method reads from a request's head (origin, `Accept`, `Content-Type`, the
//! session, the era) and the error responses it writes.

use super::*;

/// A response whose body is one JSON-RPC error.
pub(super) fn rpc_error(
    status: StatusCode,
    id: Option<&RequestId>,
    code: i64,
    message: &str,
) -> Response {
    let error = JsonRpcError::new(ErrorCode::from(code), message);
    json(status, wire::error(id, &error))
}

pub(super) fn json(status: StatusCode, body: impl Into<Body>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.into(),
    )
        .into_response()
}

/// DNS-rebinding protection: the refusal, if the request is refused.
pub(super) fn check_origin(state: &State, headers: &HeaderMap) -> Option<Response> {
    let value = |name| headers.get(name).map(HeaderValue::as_bytes);
    let refused = state
        .options
        .origin
        .check(value(header::ORIGIN), value(header::HOST))
        .err()?;
    Some((StatusCode::FORBIDDEN, refused.to_string()).into_response())
}

/// Whether the client takes JSON, and event streams (no `Accept`: both).
pub(super) fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return (true, true);
    }
    let (mut json, mut sse) = (false, false);
    for range in values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let media = range.split(';').next().unwrap_or_default().trim();
        let media = media.to_ascii_lowercase();
        json |= matches!(media.as_str(), "application/json" | "application/*" | "*/*");
        sse |= matches!(media.as_str(), sse::CONTENT_TYPE | "text/*" | "*/*");
    }
    (json, sse)
}

pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

pub(super) fn session_header(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(mcp_headers::SESSION_ID)
        .and_then(|v| v.to_str().ok())
}

/// [`admission::is_2026`] on raw params (parsed only when they may hold an envelope key).
pub(super) fn is_2026(headers: &HeaderMap, method: &str, params: Option<&RawValue>) -> bool {
    let params = params
        .filter(|p| wire::may_have_key(p, "io.modelcontextprotocol/"))
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    admission::is_2026(headers, method, &params)
}
