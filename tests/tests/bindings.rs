//! What the hand-written emitters promise: request ids, error codes, method constants.

use std::collections::{BTreeSet, HashSet};

use cancelkit_protocol::jsonrpc::{ErrorCode, JsonRpcVersion, RequestId};
use cancelkit_protocol::{gateway, rap};
use serde_json::json;

#[test]
fn request_ids_of_different_kinds_never_compare_equal() {
    assert_ne!(RequestId::from(1), RequestId::from("1"));
    let set: HashSet<RequestId> = [RequestId::from(1), RequestId::from("1"), RequestId::from(1)]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 2);
    assert_eq!(RequestId::from(String::from("a")), RequestId::from("a"));
}

#[test]
fn request_ids_order_numbers_first_then_strings() {
    let ordered: Vec<RequestId> = [
        RequestId::from("b"),
        RequestId::from(10),
        RequestId::from("a"),
        RequestId::from(-3),
    ]
    .into_iter()
    .collect::<BTreeSet<_>>()
    .into_iter()
    .collect();
    assert_eq!(
        ordered,
        [
            RequestId::from(-3),
            RequestId::from(10),
            RequestId::from("a"),
            RequestId::from("b")
        ]
    );
}

#[test]
fn request_ids_display_as_json() {
    assert_eq!(RequestId::from(7).to_string(), "7");
    assert_eq!(RequestId::from("7").to_string(), "\"7\"");
    assert_eq!(RequestId::from("a\"b\n").to_string(), r#""a\"b\n""#);
}

#[test]
fn request_ids_reject_what_json_rpc_does_not_allow_with_a_clear_message() {
    for bad in [
        json!(null),
        json!(1.5),
        json!(true),
        json!([1]),
        json!({"id": 1}),
    ] {
        let err = serde_json::from_value::<RequestId>(bad.clone()).unwrap_err();
        assert!(
            err.to_string()
                .contains("a request id: a string or an integer"),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        serde_json::from_value::<RequestId>(json!(i64::MAX)).unwrap(),
        RequestId::Number(i64::MAX)
    );
}

#[test]
fn error_codes_map_both_ways_with_a_fallback() {
    assert_eq!(ErrorCode::from(-32800), ErrorCode::RequestCancelled);
    assert_eq!(ErrorCode::RequestCancelled.code(), -32800);
    assert_eq!(ErrorCode::RequestCancelled.message(), "Request cancelled");
    assert_eq!(ErrorCode::from(-32602).message(), "Invalid params");
    assert_eq!(ErrorCode::from(-32042), ErrorCode::UrlElicitationRequired);
    assert_eq!(ErrorCode::from(-32050), ErrorCode::ServerOverloaded);
    assert_eq!(ErrorCode::ServerOverloaded.message(), "Server overloaded");
    assert_eq!(
        ErrorCode::from(-32022),
        ErrorCode::UnsupportedProtocolVersion
    );
    assert_eq!(ErrorCode::from(12), ErrorCode::Other(12));
    assert_eq!(ErrorCode::Other(12).message(), "Unknown error");
    // A named number wrapped by hand still equals the named variant.
    assert_eq!(ErrorCode::Other(-32800), ErrorCode::RequestCancelled);
    assert_eq!(i64::from(ErrorCode::ParseError), -32700);
    assert_eq!(
        ErrorCode::RequestCancelled.to_string(),
        "Request cancelled (-32800)"
    );
    for code in ErrorCode::NAMED {
        assert_eq!(ErrorCode::from(code.code()), *code);
        assert_ne!(code.message(), "Unknown error");
    }
    assert_eq!(ErrorCode::NAMED.len(), 13);
}

#[test]
fn error_codes_are_plain_integers_on_the_wire() {
    assert_eq!(
        serde_json::to_value(ErrorCode::RequestCancelled).unwrap(),
        json!(-32800)
    );
    assert_eq!(
        serde_json::to_value(ErrorCode::Other(-1)).unwrap(),
        json!(-1)
    );
    assert_eq!(
        serde_json::from_value::<ErrorCode>(json!(-32801)).unwrap(),
        ErrorCode::ContentModified
    );
    assert!(serde_json::from_value::<ErrorCode>(json!("-32800")).is_err());
    assert!(serde_json::from_value::<ErrorCode>(json!(-32800.5)).is_err());
}

#[test]
fn the_version_marker_defaults_to_2_0() {
    assert_eq!(
        serde_json::to_value(JsonRpcVersion::default()).unwrap(),
        json!("2.0")
    );
}

#[test]
fn http_bodies_carry_their_route() {
    assert_eq!(rap::ToolCancellation::HTTP_METHOD, "POST");
    assert_eq!(rap::ToolCancellation::PATH, "/cancel_tool_call");
    assert_eq!(rap::CANCEL_METHODS, ["POST /cancel_tool_call"]);
    assert_eq!(gateway::RunStatus::HTTP_METHOD, "GET");
    assert_eq!(
        gateway::RunStatus::PATH,
        "/cancellation/status/{request_id}"
    );
    assert_eq!(gateway::CANCEL_METHODS, ["POST /cancellation/cancel"]);
    assert_eq!(
        gateway::METHODS,
        [
            "GET /cancellation/status/{request_id}",
            "POST /cancellation/cancel"
        ]
    );
}
