//! Target `wire`: classifying one frame as a JSON-RPC message (`wire::parse` in the peer).
//!
//! Input: one frame. Checks, besides no panic, against an independent `serde_json::Value`
//! reading of the same bytes:
//!
//! - a request, notification or response carries `"jsonrpc": "2.0"`, and its method, params,
//!   result are those of the JSON text;
//! - every id that was read (request, response, or the id an error response will carry)
//!   re-serializes to the same JSON value as in the frame;
//! - a notification has no `id` member; a response has no method;
//! - an answer is an `Invalid` with -32700 only if the bytes are not JSON, with -32600 otherwise;
//! - round trip: a canonical message rebuilt from what was read is classified the same way;
//! - the message survives both framings: decoding a framed copy gives it back unchanged.

use cancelkit::__fuzz::{Classified, classify};

use crate::framing::decode_frames;
use cancelkit::protocol::jsonrpc::RequestId;
use serde_json::Value;
use serde_json::value::RawValue;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// Target `wire`.
pub fn check(data: &[u8]) {
    crate::panics::install();
    let classified = classify(data);
    let value: Option<Value> = serde_json::from_slice(data).ok();
    let member = |key: &str| value.as_ref().and_then(|v| v.get(key));
    let id_matches = |id: &RequestId| {
        let written = serde_json::to_value(id).expect("a request id serializes");
        member("id") == Some(&written)
    };
    let raw_matches = |raw: &str, key: &str| {
        // The member's value read on its own agrees with the raw text (when the whole frame is
        // readable as a Value at all: deep nesting or huge numbers may not be).
        value.is_none() || serde_json::from_str::<Value>(raw).ok().as_ref() == member(key)
    };
    match &classified {
        Classified::Request { id, method, params } => {
            assert!(
                value.is_none() || id_matches(id),
                "request id {id} re-serializes differently"
            );
            assert_version(&value);
            assert!(value.is_none() || member("method") == Some(&Value::from(method.as_str())));
            if let Some(params) = params {
                assert!(raw_matches(params, "params"), "params differ");
            }
        }
        Classified::Notification { method, params } => {
            assert_version(&value);
            assert!(
                value.is_none() || member("id").is_none(),
                "a notification with an id"
            );
            assert!(value.is_none() || member("method") == Some(&Value::from(method.as_str())));
            if let Some(params) = params {
                assert!(raw_matches(params, "params"), "params differ");
            }
        }
        Classified::Response { id, outcome } => {
            assert_version(&value);
            assert!(
                value.is_none() || id_matches(id),
                "response id {id} re-serializes differently"
            );
            assert!(
                member("method").is_none_or(Value::is_null),
                "a response with a method"
            );
            match outcome {
                Ok(result) => {
                    assert!(raw_matches(result, "result"), "result differs");
                    assert!(
                        value.is_none() || member("error").is_none(),
                        "an error member was dropped"
                    );
                }
                Err(_) => assert!(
                    value.is_none() || member("error").is_some(),
                    "an error from nowhere"
                ),
            }
        }
        Classified::Invalid { id, code } => {
            if let Some(id) = id {
                assert!(
                    value.is_none() || id_matches(id),
                    "the error's id {id} re-serializes differently"
                );
            }
            match *code {
                PARSE_ERROR => assert!(value.is_none(), "valid JSON answered with a parse error"),
                INVALID_REQUEST => {}
                other => panic!("an invalid message answered with code {other}"),
            }
        }
        Classified::Ignored(_) => {
            assert!(
                member("method").is_none_or(Value::is_null),
                "a request or notification was ignored"
            );
        }
    }
    if let Some(canonical) = canonical(&classified) {
        let again = classify(&canonical);
        assert_eq!(
            again,
            classified,
            "rebuilt as {} it is classified differently",
            String::from_utf8_lossy(&canonical)
        );
    }
    round_trip_framing(data);
}

fn assert_version(value: &Option<Value>) {
    if let Some(value) = value {
        assert_eq!(
            value.get("jsonrpc"),
            Some(&Value::from("2.0")),
            "accepted without jsonrpc 2.0"
        );
    }
}

/// The message rebuilt from its classification, in canonical form.
fn canonical(classified: &Classified) -> Option<Vec<u8>> {
    let raw =
        |text: &str| RawValue::from_string(text.to_owned()).expect("raw JSON from the parser");
    let mut message = serde_json::Map::new();
    message.insert("jsonrpc".into(), Value::from("2.0"));
    let mut raw_member = None;
    match classified {
        Classified::Request { id, method, params } => {
            message.insert("id".into(), serde_json::to_value(id).ok()?);
            message.insert("method".into(), Value::from(method.as_str()));
            raw_member = params.as_deref().map(|p| ("params", raw(p)));
        }
        Classified::Notification { method, params } => {
            message.insert("method".into(), Value::from(method.as_str()));
            raw_member = params.as_deref().map(|p| ("params", raw(p)));
        }
        Classified::Response {
            id,
            outcome: Ok(result),
        } => {
            message.insert("id".into(), serde_json::to_value(id).ok()?);
            raw_member = Some(("result", raw(result)));
        }
        Classified::Response {
            id,
            outcome: Err(code),
        } => {
            message.insert("id".into(), serde_json::to_value(id).ok()?);
            message.insert(
                "error".into(),
                serde_json::json!({"code": code, "message": "m"}),
            );
        }
        Classified::Invalid { .. } | Classified::Ignored(_) => return None,
    }
    let mut text = serde_json::to_string(&message).ok()?;
    if let Some((key, raw)) = raw_member {
        // Raw text goes in verbatim (a Value would reformat numbers).
        text.pop();
        text.push_str(&format!(",{}:{}}}", Value::from(key), raw.get()));
    }
    Some(text.into_bytes())
}

/// A frame's bytes come back unchanged through either framing (when they can be framed at all).
fn round_trip_framing(message: &[u8]) {
    let framed = crate::framing::encode(false, message);
    let decoded = decode_frames(false, message.len(), &[&framed]);
    assert_eq!(
        decoded,
        vec![Ok(message.to_vec())],
        "Content-Length round trip"
    );
    let is_blank = message.iter().all(u8::is_ascii_whitespace);
    if !message.contains(&b'\n') && !message.ends_with(b"\r") && !is_blank {
        let framed = crate::framing::encode(true, message);
        let decoded = decode_frames(true, message.len(), &[&framed]);
        assert_eq!(decoded, vec![Ok(message.to_vec())], "newline round trip");
    }
}
