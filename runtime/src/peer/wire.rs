//! Reading JSON-RPC messages off a frame and writing them onto one.

use std::borrow::Cow;

use cancelkit_protocol::jsonrpc::{ErrorCode, ErrorObject, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::JsonRpcError;

/// What one frame turned out to be.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    /// A call that wants a response.
    Request {
        id: RequestId,
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    /// A one-way message.
    Notification {
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    /// An answer to one of our requests.
    Response {
        id: RequestId,
        outcome: Result<Box<RawValue>, JsonRpcError>,
    },
    /// Not a valid message: answered with `error` (and `id` when it could be read).
    Invalid {
        id: Option<RequestId>,
        error: JsonRpcError,
    },
    /// Not answerable (a malformed response): logged and dropped.
    Ignored(&'static str),
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    /// `Some` whenever the member is present, even as `null` (a request with a null id is
    /// invalid, not a notification).
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    /// Present even as `null`: `"result": null` is a valid (empty) result.
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn parse_id(raw: &RawValue) -> Option<RequestId> {
    serde_json::from_str(raw.get()).ok()
}

/// Classifies one frame. Never fails: every problem becomes `Invalid` or `Ignored`.
pub(crate) fn parse(frame: &[u8]) -> Incoming<'_> {
    // serde reads a struct from an array too (its fields by position), so `["2.0",1,"m"]` would
    // pass for a request: a message must be an object, and an array is a batch.
    if frame.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        let error = match serde_json::from_slice::<serde::de::IgnoredAny>(frame) {
            Ok(_) => JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request")
                .with_data("batches are not supported"),
            Err(e) => {
                JsonRpcError::new(ErrorCode::ParseError, "Parse error").with_data(e.to_string())
            }
        };
        return Incoming::Invalid { id: None, error };
    }
    let message: RawMessage<'_> = match serde_json::from_slice(frame) {
        Ok(message) => message,
        Err(e) => {
            let error = if e.is_syntax() || e.is_eof() {
                JsonRpcError::new(ErrorCode::ParseError, "Parse error").with_data(e.to_string())
            } else {
                JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request")
                    .with_data(e.to_string())
            };
            return Incoming::Invalid { id: None, error };
        }
    };
    let id = message.id.map(|raw| (raw, parse_id(raw)));
    if message.jsonrpc.as_deref() != Some("2.0") {
        if message.method.is_none() && message.id.is_some() {
            return Incoming::Ignored("a response without \"jsonrpc\": \"2.0\"");
        }
        return Incoming::Invalid {
            id: id.and_then(|(_, id)| id),
            error: JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request")
                .with_data("\"jsonrpc\" must be \"2.0\""),
        };
    }
    match (message.method, id) {
        (Some(method), None) => Incoming::Notification {
            method,
            params: message.params,
        },
        (Some(method), Some((_, Some(id)))) => Incoming::Request {
            id,
            method,
            params: message.params,
        },
        (Some(_), Some((raw, None))) => Incoming::Invalid {
            id: None,
            error: JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request").with_data(format!(
                "a request id must be a string or an integer that fits in 64 bits, not {}",
                truncate(raw.get(), 64)
            )),
        },
        (None, Some((_, Some(id)))) if message.result.is_some() || message.error.is_some() => {
            let outcome = match (message.result, message.error) {
                (_, Some(error)) => Err(serde_json::from_str::<ErrorObject>(error.get())
                    .map(JsonRpcError::from)
                    .unwrap_or_else(|_| {
                        JsonRpcError::internal("the peer sent a malformed error object")
                            .with_data(truncate(error.get(), 256))
                    })),
                (Some(result), None) => Ok(result.to_owned()),
                (None, None) => unreachable!("guarded above"),
            };
            Incoming::Response { id, outcome }
        }
        (None, Some((_, None))) if message.result.is_some() || message.error.is_some() => {
            Incoming::Ignored("a response whose id is null or not a valid request id")
        }
        (None, id) => Incoming::Invalid {
            id: id.and_then(|(_, id)| id),
            error: JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request")
                .with_data("a message needs a \"method\" (request, notification) or a \"result\"/\"error\" (response)"),
        },
    }
}

/// `text` cut after `max` characters, with `...` when it was cut (for echoes and log lines).
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

#[derive(Serialize)]
struct Out<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Option<&'a RequestId>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorOut<'a>>,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a serde_json::Value>,
}

const EMPTY: Out<'static> = Out {
    jsonrpc: "2.0",
    id: None,
    method: None,
    params: None,
    result: None,
    error: None,
};

fn to_vec(out: &Out<'_>) -> Vec<u8> {
    serde_json::to_vec(out).expect("serializing a JSON-RPC envelope of raw JSON cannot fail")
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`
pub(crate) fn result(id: &RequestId, result: &RawValue) -> Vec<u8> {
    to_vec(&Out {
        id: Some(Some(id)),
        result: Some(result),
        ..EMPTY
    })
}

/// `{"jsonrpc":"2.0","id":ID|null,"error":{...}}`
pub(crate) fn error(id: Option<&RequestId>, error: &JsonRpcError) -> Vec<u8> {
    to_vec(&Out {
        id: Some(id),
        error: Some(ErrorOut {
            code: error.code.code(),
            message: &error.message,
            data: error.data.as_ref(),
        }),
        ..EMPTY
    })
}

/// `{"jsonrpc":"2.0","id":ID,"method":METHOD,"params":PARAMS}`
pub(crate) fn request(id: &RequestId, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    to_vec(&Out {
        id: Some(Some(id)),
        method: Some(method),
        params,
        ..EMPTY
    })
}

/// `{"jsonrpc":"2.0","method":METHOD,"params":PARAMS}`
pub(crate) fn notification(method: &str, params: Option<&RawValue>) -> Vec<u8> {
    to_vec(&Out {
        method: Some(method),
        params,
        ..EMPTY
    })
}

/// Serializes a result (an error only for a type whose `Serialize` fails).
pub(crate) fn to_raw<T: Serialize>(value: &T) -> Result<Box<RawValue>, JsonRpcError> {
    serde_json::value::to_raw_value(value)
        .map_err(|e| JsonRpcError::internal(format!("cannot serialize the result: {e}")))
}

/// Params as sent: `null` means none (the member is left out).
pub(crate) fn params(value: &serde_json::Value) -> Option<Box<RawValue>> {
    (!value.is_null()).then(|| serde_json::value::to_raw_value(value).expect("a Value serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> String {
        match parse(text.as_bytes()) {
            Incoming::Request { id, method, .. } => format!("request {id} {method}"),
            Incoming::Notification { method, .. } => format!("notification {method}"),
            Incoming::Response { id, outcome: Ok(r) } => format!("result {id} {}", r.get()),
            Incoming::Response {
                id,
                outcome: Err(e),
            } => format!("error {id} {}", e.code.code()),
            Incoming::Invalid { id, error } => format!(
                "invalid {} {}",
                id.map(|i| i.to_string()).unwrap_or("null".into()),
                error.code.code()
            ),
            Incoming::Ignored(why) => format!("ignored: {why}"),
        }
    }

    #[test]
    fn classification() {
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":7,"method":"m"}"#),
            "request 7 m"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":"7","method":"m","params":{}}"#),
            "request \"7\" m"
        );
        assert_eq!(kind(r#"{"jsonrpc":"2.0","method":"n"}"#), "notification n");
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#),
            r#"result 1 {"a":1}"#
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":2,"result":null}"#),
            "result 2 null"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"x"}}"#),
            "error 1 -32800"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#),
            "error 1 -32603"
        );
        assert_eq!(kind("{not json"), "invalid null -32700");
        assert_eq!(kind("[1,2]"), "invalid null -32600");
        // Found by the wire fuzzer: an array was read as a message, its items by position.
        assert_eq!(kind(r#"["2.0",1,"m"]"#), "invalid null -32600");
        assert_eq!(kind(r#" ["ssn","nrs","nsk-5",5]"#), "invalid null -32600");
        assert_eq!(kind("[1,"), "invalid null -32700");
        assert_eq!(kind("42"), "invalid null -32600");
        assert_eq!(
            kind(r#"{"jsonrpc":"1.0","id":3,"method":"m"}"#),
            "invalid 3 -32600"
        );
        assert_eq!(kind(r#"{"id":3,"method":"m"}"#), "invalid 3 -32600");
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#),
            "invalid null -32600"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#),
            "invalid null -32600"
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"m"}"#),
            "invalid null -32600"
        );
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":4}"#), "invalid 4 -32600");
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":7}"#),
            "invalid null -32600"
        );
        assert!(
            kind(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#)
                .starts_with("ignored")
        );
    }

    #[test]
    fn envelopes() {
        let raw = RawValue::from_string("{\"x\":1}".into()).unwrap();
        assert_eq!(
            String::from_utf8(result(&RequestId::from(1), &raw)).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"x":1}}"#
        );
        assert_eq!(
            String::from_utf8(error(None, &JsonRpcError::from_code(ErrorCode::ParseError)))
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        );
        assert_eq!(
            String::from_utf8(request(&RequestId::from("a"), "m", None)).unwrap(),
            r#"{"jsonrpc":"2.0","id":"a","method":"m"}"#
        );
        assert_eq!(
            String::from_utf8(notification("n", Some(&raw))).unwrap(),
            r#"{"jsonrpc":"2.0","method":"n","params":{"x":1}}"#
        );
    }
}

/// Whether the JSON object `params` may have a member named `key`: `false` only when it
/// certainly has none (the name nowhere in the text, and no `\u` escape that could spell it).
/// A cheap look before parsing params that rarely carry the member (a 4 KiB prompt is scanned
/// with memchr instead of being parsed).
pub(crate) fn may_have_key(params: &RawValue, key: &str) -> bool {
    let text = params.get();
    text.contains(key) || text.contains("\\u")
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn a_key_is_found_however_it_is_written_and_ruled_out_only_when_absent() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        assert!(may_have_key(&raw(r#"{"task":{}}"#), "task"));
        assert!(may_have_key(&raw(r#"{"t\u0061sk":{}}"#), "task"));
        assert!(may_have_key(&raw(r#"{"text":"a task"}"#), "task"));
        assert!(!may_have_key(
            &raw(r#"{"name":"x","arguments":{"text":"the fox"}}"#),
            "task"
        ));
    }
}
