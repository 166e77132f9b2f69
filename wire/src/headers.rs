//! The HTTP headers of MCP's Streamable HTTP transport, and the 2026-07-28 routing headers
//! that mirror a request's body so proxies can route without parsing JSON: `Mcp-Method`,
//! `Mcp-Name` (a tool's or prompt's name, a resource's URI) and one `Mcp-Param-<Header>` per
//! tool argument whose property schema carries `x-mcp-header`. A server answers a request
//! whose headers are missing or disagree with its body with 400 and
//! [`HEADER_MISMATCH`].
//!
//! A value travels as it is when it is non-empty printable ASCII without leading or trailing
//! blanks; anything else (empty, blank-edged, control or non-ASCII characters, or a value
//! that starts like the wrapping itself) is sent as `=?base64?<base64 of its UTF-8>?=`, which
//! [`decode`] reverses. A value whose header would exceed [`MAX_VALUE_BYTES`] is not sent.
//!
//! ```
//! use cancelkit_wire::headers::{self, decode, encode};
//! use serde_json::json;
//!
//! assert_eq!(encode("echo").unwrap(), "echo");
//! assert_eq!(encode("héllo").unwrap(), "=?base64?aMOpbGxv?=");
//! assert_eq!(decode(encode(" padded ").unwrap().as_bytes()).unwrap(), " padded ");
//! let routing = headers::routing("tools/call", &json!({"name": "echo"}));
//! assert_eq!(routing[1].0, headers::MCP_NAME);
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// `Mcp-Session-Id`: the session a legacy (2025-03-26 to 2025-11-25) server assigned.
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`: the revision of every request after the handshake (2025-06-18 and
/// later) and of every 2026-07-28 request.
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Last-Event-ID`: where a client resumes an interrupted event stream.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// `Mcp-Method`: the request's method (2026-07-28).
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`: what the request acts on (2026-07-28).
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// The `Accept` of a client's POST: a JSON answer or an event stream.
pub const ACCEPT_JSON_OR_SSE: &str = "application/json, text/event-stream";
/// The prefix of the headers mirroring annotated tool arguments (2026-07-28).
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";
/// The property-schema annotation naming an argument's header.
pub const ANNOTATION: &str = "x-mcp-header";
/// HeaderMismatch (2026-07-28): the headers disagree with the body, or one is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// The longest header value sent; a longer one is left out.
pub const MAX_VALUE_BYTES: usize = 8192;

const WRAP_START: &str = "=?base64?";
const WRAP_END: &str = "?=";

/// For the methods that act on a named thing, the member of `params` that names it.
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        _ => None,
    }
}

/// `value` as it may travel in a header, wrapped in base64 when it cannot travel as it is;
/// `None` when the result would be longer than [`MAX_VALUE_BYTES`].
pub fn encode(value: &str) -> Option<HeaderValue> {
    let bytes = value.as_bytes();
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let plain = !bytes.is_empty()
        && !blank(bytes.first())
        && !blank(bytes.last())
        && bytes.iter().all(|&b| (0x20..=0x7E).contains(&b))
        && !value.starts_with(WRAP_START);
    let text = if plain {
        value.to_owned()
    } else {
        format!("{WRAP_START}{}{WRAP_END}", STANDARD.encode(bytes))
    };
    if text.len() > MAX_VALUE_BYTES {
        return None;
    }
    HeaderValue::from_str(&text).ok()
}

/// A header value [`decode`] cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The value is wrapped, but its inside is not canonical base64 of UTF-8 text.
    #[error("a `=?base64?…?=` header value that is not base64 of UTF-8 text")]
    BadBase64,
    /// The value holds bytes no plain header value may (controls, non-ASCII).
    #[error("a header value with characters that must be sent base64-wrapped")]
    NotPlain,
}

/// The text a header value carries: unwrapped when it is `=?base64?…?=`, else as it is.
pub fn decode(value: &[u8]) -> Result<String, DecodeError> {
    if let Some(inner) = value
        .strip_prefix(WRAP_START.as_bytes())
        .and_then(|v| v.strip_suffix(WRAP_END.as_bytes()))
    {
        let bytes = STANDARD.decode(inner).map_err(|_| DecodeError::BadBase64)?;
        return String::from_utf8(bytes).map_err(|_| DecodeError::BadBase64);
    }
    if value
        .iter()
        .all(|&b| (0x20..=0x7E).contains(&b) || b == b'\t')
    {
        Ok(String::from_utf8_lossy(value).into_owned())
    } else {
        Err(DecodeError::NotPlain)
    }
}

/// The `Mcp-Method` and `Mcp-Name` headers of a 2026-07-28 request of `method` with `params`.
pub fn routing(method: &str, params: &Value) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::with_capacity(2);
    if let Some(value) = encode(method) {
        out.push((MCP_METHOD, value));
    }
    if let Some(name) = name_member(method)
        .and_then(|key| params.get(key))
        .and_then(Value::as_str)
        .and_then(encode)
    {
        out.push((MCP_NAME, name));
    }
    out
}

/// One tool argument mirrored into a header: where it is in the arguments, and the header's
/// name after [`MCP_PARAM_PREFIX`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ParamHeader {
    /// The property names from the root of the arguments.
    pub path: Vec<String>,
    /// The annotation's value (an RFC 9110 token).
    pub header: String,
}

/// The annotated arguments of one tool's `inputSchema`: properties reached from the root
/// through `properties` alone whose `x-mcp-header` is a non-empty HTTP token.
pub fn annotations(input_schema: &Value) -> Vec<ParamHeader> {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<ParamHeader>) {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            path.push(name.clone());
            if let Some(header) = property.get(ANNOTATION).and_then(Value::as_str)
                && !header.is_empty()
                && header.bytes().all(is_token_byte)
            {
                out.push(ParamHeader {
                    path: path.clone(),
                    header: header.to_owned(),
                });
            }
            if path.len() < 32 {
                walk(property, path, out);
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    out
}

/// The value an annotated argument's header carries: strings, booleans and numbers only.
fn param_text(arguments: &Value, path: &[String]) -> Option<String> {
    let value = path.iter().try_fold(arguments, |v, key| v.get(key))?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers for `arguments`, given the tool's annotations.
pub fn params(
    annotations: &[ParamHeader],
    arguments: Option<&Value>,
) -> Vec<(HeaderName, HeaderValue)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    annotations
        .iter()
        .filter_map(|annotation| {
            let text = param_text(arguments, &annotation.path)?;
            let name = HeaderName::from_bytes(
                format!("{MCP_PARAM_PREFIX}{}", annotation.header).as_bytes(),
            )
            .ok()?;
            Some((name, encode(&text)?))
        })
        .collect()
}

/// How a 2026-07-28 request's headers disagree with its body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the `{header}` header {problem}")]
pub struct Mismatch {
    /// The header at fault.
    pub header: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A server's check of a 2026-07-28 request's routing headers against its body: `Mcp-Method`
/// must name `method`, `Mcp-Name` the thing it acts on, and each annotated argument's header
/// its value (decoded first). Answer a [`Mismatch`] with 400 and [`HEADER_MISMATCH`].
pub fn check(
    headers: &HeaderMap,
    method: &str,
    params: &Value,
    annotations: &[ParamHeader],
) -> Result<(), Mismatch> {
    fn compare(headers: &HeaderMap, name: &str, expected: Option<&str>) -> Result<(), Mismatch> {
        let mismatch = |problem: String| Mismatch {
            header: name.to_owned(),
            problem,
        };
        let mut values = headers.get_all(name).iter();
        let (got, extra) = (values.next(), values.next());
        if extra.is_some() {
            return Err(mismatch("is sent more than once".into()));
        }
        match (got, expected) {
            (None, None) => Ok(()),
            (None, Some(_)) => Err(mismatch("is missing".into())),
            (Some(_), None) => Err(mismatch("names nothing the body has".into())),
            (Some(got), Some(expected)) => {
                let got =
                    decode(got.as_bytes()).map_err(|e| mismatch(format!("is unreadable: {e}")))?;
                if got == expected {
                    Ok(())
                } else {
                    Err(mismatch(format!(
                        "says {got:?} but the body says {expected:?}"
                    )))
                }
            }
        }
    }
    compare(headers, MCP_METHOD.as_str(), Some(method))?;
    let name = name_member(method).and_then(|key| params.get(key)?.as_str());
    if name_member(method).is_some() {
        compare(headers, MCP_NAME.as_str(), name)?;
    }
    let arguments = params.get("arguments");
    for annotation in annotations {
        let header = format!(
            "{MCP_PARAM_PREFIX}{}",
            annotation.header.to_ascii_lowercase()
        );
        let expected = arguments.and_then(|a| param_text(a, &annotation.path));
        compare(headers, &header, expected.as_deref())?;
    }
    Ok(())
}

/// RFC 9110 token characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests;
