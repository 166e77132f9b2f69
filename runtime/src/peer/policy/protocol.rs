//! The protocol a connection speaks, and the cancel notifications of each: which it reads, and
//! which it sends for one of our requests.

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::{acp as acp_types, mcp};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::McpRevision;
use crate::peer::framing::Framing;

/// The protocol a [`Peer`](crate::peer::Peer) speaks, which decides its cancellation rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Agent Client Protocol v1. Accepts `$/cancel_request` and the draft `$/cancelRequest`;
    /// sends `$/cancel_request` (or the draft form, see
    /// [`PeerBuilder::emit_draft_cancel`](crate::peer::PeerBuilder::emit_draft_cancel)); a cancelled
    /// request is always answered; `session/cancel` ends a session's prompt turn.
    Acp,
    /// Model Context Protocol. Accepts and sends `notifications/cancelled`; a request the peer
    /// cancelled gets no response (see
    /// [`PeerBuilder::answer_cancelled`](crate::peer::PeerBuilder::answer_cancelled)).
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
            (Protocol::Acp, acp_types::CancelRequestParams::METHOD) => {
                read::<acp_types::CancelRequestParams>(params).and_then(|p| {
                    p.request_id
                        .map(|id| CancelRequest { id, reason: None })
                        .ok_or_else(|| "requestId is null".to_owned())
                })
            }
            (Protocol::Acp | Protocol::Lsp, acp_types::DraftCancelRequestParams::METHOD) => {
                read::<acp_types::DraftCancelRequestParams>(params).map(|p| CancelRequest {
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
pub(super) fn cancel_notification(
    protocol: Protocol,
    draft: bool,
    id: &RequestId,
    reason: Option<&str>,
) -> (&'static str, serde_json::Value) {
    match protocol {
        Protocol::Acp if draft => (
            acp_types::DraftCancelRequestParams::METHOD,
            serde_json::json!({ "id": id }),
        ),
        Protocol::Acp => (
            acp_types::CancelRequestParams::METHOD,
            serde_json::json!({ "requestId": id }),
        ),
        Protocol::Mcp(_) => (
            mcp::v2025_11_25::CancelledNotificationParams::METHOD,
            match reason {
                Some(reason) => serde_json::json!({ "requestId": id, "reason": reason }),
                None => serde_json::json!({ "requestId": id }),
            },
        ),
        Protocol::Lsp => (
            acp_types::DraftCancelRequestParams::METHOD,
            serde_json::json!({ "id": id }),
        ),
    }
}
