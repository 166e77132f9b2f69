//! The rules, each protocol's cancel forms and requests.

use super::*;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

#[test]
fn each_protocol_reads_its_own_cancel_forms() {
    let acp = Protocol::Acp;
    let shipped = acp.parse_cancel("$/cancel_request", Some(&raw(r#"{"requestId":7}"#)));
    assert_eq!(
        shipped,
        Some(Ok(CancelRequest {
            id: 7.into(),
            reason: None
        }))
    );
    let draft = acp.parse_cancel("$/cancelRequest", Some(&raw(r#"{"id":"a"}"#)));
    assert_eq!(
        draft,
        Some(Ok(CancelRequest {
            id: "a".into(),
            reason: None
        }))
    );
    assert!(acp.parse_cancel("notifications/cancelled", None).is_none());
    assert!(matches!(
        acp.parse_cancel("$/cancel_request", Some(&raw(r#"{"requestId":null}"#))),
        Some(Err(_))
    ));
    assert!(matches!(
        acp.parse_cancel("$/cancel_request", None),
        Some(Err(_))
    ));

    let mcp = Protocol::Mcp(McpRevision::V2025_11_25);
    let cancelled = mcp.parse_cancel(
        "notifications/cancelled",
        Some(&raw(r#"{"requestId":3,"reason":"user"}"#)),
    );
    assert_eq!(
        cancelled,
        Some(Ok(CancelRequest {
            id: 3.into(),
            reason: Some("user".into())
        }))
    );
    assert!(
        mcp.parse_cancel("$/cancelRequest", Some(&raw(r#"{"id":3}"#)))
            .is_none()
    );
    assert!(matches!(
        mcp.parse_cancel("notifications/cancelled", Some(&raw("{}"))),
        Some(Err(_))
    ));

    let lsp = Protocol::Lsp;
    assert!(
        lsp.parse_cancel("$/cancelRequest", Some(&raw(r#"{"id":1}"#)))
            .is_some()
    );
    assert!(
        lsp.parse_cancel("$/cancel_request", Some(&raw(r#"{"requestId":1}"#)))
            .is_none()
    );
}
