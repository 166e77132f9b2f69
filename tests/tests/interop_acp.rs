//! Our ACP bindings against the official `agent-client-protocol-schema` crate, both directions.

use agent_client_protocol_schema::v1 as official;
use cancelkit_protocol::acp;
use cancelkit_protocol::jsonrpc::{CancelledErrorData, ErrorCode, ErrorObject, RequestId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Serializes `value` and reads it back as `T`.
fn convert<T: DeserializeOwned>(value: &impl Serialize) -> T {
    let json = serde_json::to_value(value).unwrap();
    serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{json} does not parse: {e}"))
}

#[test]
fn our_cancel_request_parses_with_the_official_crate() {
    let ours: acp::CancelRequestNotification = serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": 7, "_meta": {"origin": "ide"}}
    }))
    .unwrap();
    assert_eq!(acp::CancelRequestNotification::METHOD, "$/cancel_request");
    assert_eq!(
        acp::CancelRequestNotification::METHOD,
        official::PROTOCOL_LEVEL_METHOD_NAMES.cancel_request
    );
    let theirs: official::CancelRequestNotification = convert(&ours.params);
    assert_eq!(theirs.request_id, official::RequestId::Number(7));
    assert_eq!(theirs.meta.unwrap()["origin"], "ide");

    let string_id = acp::CancelRequestParams {
        request_id: Some(RequestId::from("req-1")),
        meta: None,
    };
    let theirs: official::CancelRequestNotification = convert(&string_id);
    assert_eq!(theirs.request_id, official::RequestId::Str("req-1".into()));

    let null_id = acp::CancelRequestParams {
        request_id: None,
        meta: None,
    };
    assert_eq!(
        serde_json::to_value(&null_id).unwrap(),
        json!({"requestId": null})
    );
    let theirs: official::CancelRequestNotification = convert(&null_id);
    assert_eq!(theirs.request_id, official::RequestId::Null);
}

#[test]
fn the_official_cancel_request_parses_with_ours() {
    for (id, expected) in [
        (official::RequestId::Number(42), Some(RequestId::Number(42))),
        (
            official::RequestId::Str("42".into()),
            Some(RequestId::from("42")),
        ),
        (official::RequestId::Null, None),
    ] {
        let mut meta = serde_json::Map::new();
        meta.insert("trace".into(), json!("t-1"));
        let theirs = official::CancelRequestNotification::new(id).meta(meta);
        let ours: acp::CancelRequestParams = convert(&theirs);
        assert_eq!(ours.request_id, expected);
        assert_eq!(ours.meta.as_ref().unwrap()["trace"], "t-1");
        // And back again without loss.
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
    }
}

#[test]
fn our_cancelled_error_parses_with_the_official_crate_and_theirs_with_ours() {
    let ours = ErrorObject {
        code: ErrorCode::RequestCancelled,
        message: ErrorCode::RequestCancelled.message().to_owned(),
        data: Some(
            serde_json::to_value(CancelledErrorData {
                reason: Some("cancelled by the client".into()),
                request_id: Some(RequestId::from(7)),
                partial: Some(false),
                extra: Default::default(),
            })
            .unwrap(),
        ),
    };
    let theirs: official::Error = convert(&ours);
    assert_eq!(theirs.code, official::ErrorCode::RequestCancelled);
    assert_eq!(theirs.message, "Request cancelled");
    assert_eq!(theirs.data.unwrap()["reason"], "cancelled by the client");

    let theirs = official::Error::request_cancelled().data(json!({"reason": "shutdown"}));
    let ours: ErrorObject = convert(&theirs);
    assert_eq!(ours.code, ErrorCode::RequestCancelled);
    assert_eq!(ours.code.code(), -32800);
    assert_eq!(ours.message, "Request cancelled");
    let data: CancelledErrorData = serde_json::from_value(ours.data.unwrap()).unwrap();
    assert_eq!(data.reason.as_deref(), Some("shutdown"));
}

/// Every code both sides name has the same number and the same standard message.
#[test]
fn error_codes_agree_with_the_official_table() {
    let mut shared = 0;
    for code in ErrorCode::NAMED {
        let number = i32::try_from(code.code()).unwrap();
        let theirs = official::ErrorCode::from(number);
        if matches!(theirs, official::ErrorCode::Other(_)) {
            continue; // an LSP or MCP code ACP does not name
        }
        shared += 1;
        assert_eq!(i32::from(theirs), number);
        assert_eq!(theirs.to_string(), code.message(), "message of {number}");
        let ours: ErrorCode = convert(&theirs);
        assert_eq!(ours, *code);
    }
    assert_eq!(shared, 8, "ACP names eight codes");
    // A code neither side names passes through both unchanged.
    let ours: ErrorCode = convert(&official::ErrorCode::Other(-32099));
    assert_eq!(ours, ErrorCode::Other(-32099));
}

#[test]
fn official_capabilities_survive_a_round_trip_through_ours() {
    let client = official::ClientCapabilities::new()
        .fs(official::FileSystemCapabilities::new()
            .read_text_file(true)
            .write_text_file(true))
        .terminal(true);
    let ours: acp::ClientCapabilities = convert(&client);
    assert!(ours.cancellation.is_none());
    assert!(ours.extra.contains_key("fs"));
    let back: official::ClientCapabilities = convert(&ours);
    assert_eq!(back, client);

    let agent = official::AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(official::PromptCapabilities::new().image(true))
        .mcp_capabilities(official::McpCapabilities::new().http(true));
    let ours: acp::AgentCapabilities = convert(&agent);
    let back: official::AgentCapabilities = convert(&ours);
    assert_eq!(back, agent);
}

/// The draft `cancellation` capability is unknown to the official crate: it must not break it,
/// and everything it does know survives.
#[test]
fn our_capabilities_parse_with_the_official_crate() {
    let ours: acp::ClientCapabilities = serde_json::from_value(json!({
        "cancellation": {"request": true},
        "fs": {"readTextFile": true, "writeTextFile": false},
        "terminal": true
    }))
    .unwrap();
    assert_eq!(
        ours.cancellation.as_ref().and_then(|c| c.request),
        Some(true)
    );
    let theirs: official::ClientCapabilities = convert(&ours);
    assert!(theirs.terminal);
    assert!(theirs.fs.read_text_file);

    let ours: acp::AgentCapabilities =
        serde_json::from_value(json!({"cancellation": {"request": true}, "loadSession": true}))
            .unwrap();
    let theirs: official::AgentCapabilities = convert(&ours);
    assert!(theirs.load_session);
}

#[test]
fn session_cancel_and_prompt_results_agree() {
    let theirs = official::CancelNotification::new("sess-1");
    let ours: acp::SessionCancelParams = convert(&theirs);
    assert_eq!(ours.session_id, "sess-1");
    assert_eq!(acp::SessionCancelParams::METHOD, "session/cancel");
    let back: official::CancelNotification = convert(&ours);
    assert_eq!(back, theirs);

    let pairs = [
        (official::StopReason::EndTurn, acp::StopReason::EndTurn),
        (official::StopReason::MaxTokens, acp::StopReason::MaxTokens),
        (
            official::StopReason::MaxTurnRequests,
            acp::StopReason::MaxTurnRequests,
        ),
        (official::StopReason::Refusal, acp::StopReason::Refusal),
        (official::StopReason::Cancelled, acp::StopReason::Cancelled),
    ];
    for (theirs, ours) in pairs {
        let result: acp::PromptResult = convert(&official::PromptResponse::new(theirs));
        assert_eq!(result.stop_reason, ours);
        let back: official::PromptResponse = convert(&result);
        assert_eq!(back.stop_reason, theirs);
    }
}

/// Our whole-message types carry the same method names as the official method table.
#[test]
fn method_names_match_the_official_tables() {
    let agent_methods: Value = serde_json::to_value(official::AGENT_METHOD_NAMES).unwrap();
    assert_eq!(
        agent_methods["session_cancel"],
        acp::SessionCancelNotification::METHOD
    );
    assert_eq!(agent_methods["session_prompt"], acp::PromptResponse::METHOD);
    assert!(acp::CANCEL_METHODS.contains(&"$/cancel_request"));
    assert!(acp::CANCEL_METHODS.contains(&"$/cancelRequest"));
    assert!(acp::CANCEL_METHODS.contains(&"session/cancel"));
    assert!(!acp::CANCEL_METHODS.contains(&"session/prompt"));
}
