//! Per-protocol cancellation rules: which cancel notifications are accepted and sent, and
//! whether a request the peer cancelled still gets a response.

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::{acp, mcp};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::framing::Framing;

/// An MCP protocol revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpRevision {
    /// 2024-11-05: `notifications/cancelled` with a required `requestId`.
    V2024_11_05,
    /// 2025-11-25: `requestId` optional in the schema (required for ordinary requests), tasks.
    V2025_11_25,
}

/// The protocol a [`Peer`](super::Peer) speaks, which decides its cancellation rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Agent Client Protocol v1. Accepts `$/cancel_request` and the draft `$/cancelRequest`;
    /// sends `$/cancel_request` (or the draft form, see
    /// [`PeerBuilder::emit_draft_cancel`](super::PeerBuilder::emit_draft_cancel)); a cancelled
    /// request is always answered; `session/cancel` ends a session's prompt turn.
    Acp,
    /// Model Context Protocol. Accepts and sends `notifications/cancelled`; a request the peer
    /// cancelled gets no response (see
    /// [`PeerBuilder::answer_cancelled`](super::PeerBuilder::answer_cancelled)).
    Mcp(McpRevision),
    /// LSP-style JSON-RPC: `$/cancelRequest {id}` both ways, `Content-Length` framing, and a
    /// cancelled request is always answered (-32800).
    Lsp,
}

impl Protocol {
    /// The framing the protocol uses by default.
    pub fn default_framing(self) -> Framing {
        match self {
            Protocol::Lsp => Framing::ContentLength,
            Protocol::Acp | Protocol::Mcp(_) => Framing::Lines,
        }
    }

    /// Whether a request the peer cancelled still gets a response by default.
    pub(crate) fn answers_cancelled(self) -> bool {
        !matches!(self, Protocol::Mcp(_))
    }

    /// If `method` is a cancel notification of this protocol, reads which request it cancels.
    ///
    /// `Some(Err(..))` is a cancel notification with unreadable params (ignored by the caller).
    pub(crate) fn parse_cancel(
        self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<Result<CancelRequest, String>> {
        fn read<'a, T: Deserialize<'a>>(params: Option<&'a RawValue>) -> Result<T, String> {
            let text = params.map_or("null", RawValue::get);
            serde_json::from_str(text).map_err(|e| e.to_string())
        }
        let parsed = match (self, method) {
            (Protocol::Acp, acp::CancelRequestParams::METHOD) => {
                read::<acp::CancelRequestParams>(params).and_then(|p| {
                    p.request_id
                        .map(|id| CancelRequest { id, reason: None })
                        .ok_or_else(|| "requestId is null".to_owned())
                })
            }
            (Protocol::Acp | Protocol::Lsp, acp::DraftCancelRequestParams::METHOD) => {
                read::<acp::DraftCancelRequestParams>(params).map(|p| CancelRequest {
                    id: p.id,
                    reason: None,
                })
            }
            (Protocol::Mcp(_), mcp::v2025_11_25::CancelledNotificationParams::METHOD) => {
                read::<mcp::v2025_11_25::CancelledNotificationParams>(params).and_then(|p| {
                    p.request_id
                        .map(|id| CancelRequest {
                            id,
                            reason: p.reason,
                        })
                        .ok_or_else(|| "requestId is missing".to_owned())
                })
            }
            _ => return None,
        };
        Some(parsed)
    }
}

/// A cancel notification, read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CancelRequest {
    pub id: RequestId,
    pub reason: Option<String>,
}

/// The cancel notification to send for one of our requests: method and params.
pub(crate) fn cancel_notification(
    protocol: Protocol,
    draft: bool,
    id: &RequestId,
    reason: &str,
) -> (&'static str, serde_json::Value) {
    match protocol {
        Protocol::Acp if draft => (
            acp::DraftCancelRequestParams::METHOD,
            serde_json::json!({ "id": id }),
        ),
        Protocol::Acp => (
            acp::CancelRequestParams::METHOD,
            serde_json::json!({ "requestId": id }),
        ),
        Protocol::Mcp(_) => (
            mcp::v2025_11_25::CancelledNotificationParams::METHOD,
            serde_json::json!({ "requestId": id, "reason": reason }),
        ),
        Protocol::Lsp => (
            acp::DraftCancelRequestParams::METHOD,
            serde_json::json!({ "id": id }),
        ),
    }
}

#[cfg(test)]
mod tests {
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
}
