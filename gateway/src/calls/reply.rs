//! What a call answers: its reply carried as the upstream wrote it (its `_meta` naming the
//! run), errors naming the run, the -32800 of a cancelled call, and the JSON-RPC responses the
//! fronts write.

use cancelkit::JsonRpcError;
use cancelkit::protocol::jsonrpc::{ErrorCode, RequestId};
use cancelkit::wire::members::edit_object;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{RUN_ID_META, Reply};

/// A result naming its run in `_meta` (`io.cancelkit/runId`); only `_meta` is parsed and
/// written again. A result that is not an object, or whose `_meta` is not one, is passed on
/// as it is.
pub(super) fn with_run_id(result: Box<RawValue>, run_id: Option<&str>) -> Box<RawValue> {
    let Some(run_id) = run_id else {
        return result;
    };
    edit_object(result, |members| {
        members.edit("_meta", |meta| match meta.as_object_mut() {
            Some(meta) => {
                meta.insert(RUN_ID_META.into(), json!(run_id));
                true
            }
            None => false,
        })
    })
}

/// A JSON-RPC result response.
pub fn ok_response(id: &RequestId, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The JSON-RPC error object of `error`.
fn error_object(error: &JsonRpcError) -> Value {
    let mut object = json!({"code": error.code.code(), "message": error.message});
    if let Some(data) = &error.data {
        object["data"] = data.clone();
    }
    object
}

/// A JSON-RPC error response.
pub fn error_response(id: &RequestId, error: &JsonRpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error_object(error)})
}

/// A JSON-RPC response carrying a call's reply as it is, written once.
pub fn reply_response(id: &RequestId, reply: &Reply) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    }
    let response = Response {
        jsonrpc: "2.0",
        id,
        result: reply.as_ref().ok().map(|r| &**r),
        error: reply.as_ref().err().map(error_object),
    };
    serde_json::to_vec(&response).expect("a response serializes")
}

/// An error naming its run in `data.runId` (an upstream's own `data` that is not an object is
/// kept under `data.upstream`).
pub fn with_run(mut error: JsonRpcError, run_id: Option<&str>) -> JsonRpcError {
    let Some(run_id) = run_id else {
        return error;
    };
    error.data = Some(match error.data.take() {
        Some(Value::Object(mut data)) => {
            data.insert("runId".into(), json!(run_id));
            Value::Object(data)
        }
        None | Some(Value::Null) => json!({"runId": run_id}),
        Some(other) => json!({"runId": run_id, "upstream": other}),
    });
    error
}

/// The answer to a cancelled call: -32800 `Request cancelled`, with the caller's id as it sent
/// it, the run id (absent when runs are not tracked), the reason, and `partial: false`.
pub fn cancelled_error(id: &RequestId, run_id: Option<&str>, reason: Option<&str>) -> JsonRpcError {
    let mut data = json!({"requestId": id, "reason": reason, "partial": false});
    if let Some(run_id) = run_id {
        data["runId"] = json!(run_id);
    }
    JsonRpcError::from_code(ErrorCode::RequestCancelled).with_data(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cancelkit::wire::members::Members;

    #[test]
    fn a_cancelled_call_is_answered_as_ever() {
        let id = RequestId::from(7);
        let error = cancelled_error(&id, Some("r1"), Some("client"));
        let response: Value = serde_json::from_slice(&reply_response(&id, &Err(error))).unwrap();
        // Compared as JSON values: the key order of the written bytes depends on whether
        // serde_json's `preserve_order` is on, which feature unification decides (on in the
        // workspace, off for this crate alone).
        let expected: Value = serde_json::from_str(
            r#"{"error":{"code":-32800,"data":{"partial":false,"reason":"client","requestId":7,"runId":"r1"},"message":"Request cancelled"},"id":7,"jsonrpc":"2.0"}"#,
        )
        .unwrap();
        assert_eq!(response, expected);
    }

    #[test]
    fn a_result_names_its_run_and_is_otherwise_passed_on_as_written() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let written = r#"{"content":[{"type":"text","text":"x"}],"n":1.50}"#;
        let named = with_run_id(raw(written), Some("r1"));
        let members = Members::read(named.get()).unwrap();
        assert_eq!(
            members.get("content").map(RawValue::get),
            Some(r#"[{"type":"text","text":"x"}]"#)
        );
        assert_eq!(members.get("n").map(RawValue::get), Some("1.50"));
        assert_eq!(
            members.get("_meta").map(RawValue::get),
            Some(r#"{"io.cancelkit/runId":"r1"}"#)
        );
        let own = with_run_id(raw(r#"{"_meta":{"k":1}}"#), Some("r1"));
        let own: Value = serde_json::from_str(own.get()).unwrap();
        assert_eq!(own["_meta"], json!({"k": 1, RUN_ID_META: "r1"}));
        assert_eq!(with_run_id(raw(written), None).get(), written);
        let odd = r#"{"_meta":"m"}"#;
        assert_eq!(with_run_id(raw(odd), Some("r1")).get(), odd);
        assert_eq!(with_run_id(raw("[]"), Some("r1")).get(), "[]");
    }

    #[test]
    fn an_overloaded_refusal_is_code_minus_32050() {
        let id = RequestId::from("a");
        let error = JsonRpcError::new(ErrorCode::ServerOverloaded, "Server overloaded: busy");
        let expected: Value = serde_json::from_str(
            r#"{"error":{"code":-32050,"message":"Server overloaded: busy"},"id":"a","jsonrpc":"2.0"}"#,
        )
        .unwrap();
        assert_eq!(error_response(&id, &error), expected);
        let written: Value = serde_json::from_slice(&reply_response(&id, &Err(error))).unwrap();
        assert_eq!(written, expected);
    }
}
