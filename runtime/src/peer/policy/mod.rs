//! Everything that differs by protocol and revision, in one place: which cancel notifications
//! are accepted and sent, whether a request the peer cancelled still gets a response, which
//! requests can never be cancelled, and the protocol-specific rules around them — ACP's draft
//! `cancellation` capability and `session/cancel` ([`acp`]), MCP 2025-11-25 tasks ([`tasks`]).
//!
//! The reader and the dispatcher ask [`Rules`] at fixed points of a message's life and contain
//! no protocol branches of their own.

mod acp;
pub(crate) mod tasks;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::{acp as acp_types, mcp};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::framing::Framing;
use super::registry::{Finished, Registry};
use super::router::Reply;
use super::wire;

/// `initialize`: never cancelled, in either direction.
pub(crate) const INITIALIZE: &str = "initialize";

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
fn cancel_notification(
    protocol: Protocol,
    draft: bool,
    id: &RequestId,
    reason: &str,
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
            serde_json::json!({ "requestId": id, "reason": reason }),
        ),
        Protocol::Lsp => (
            acp_types::DraftCancelRequestParams::METHOD,
            serde_json::json!({ "id": id }),
        ),
    }
}

/// What a request is to the rules, told from its method name alone (on the reader, cheaply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing special.
    Plain,
    /// `initialize`: never cancelled; ACP and MCP edit its result's capabilities.
    Initialize,
    /// ACP `session/prompt`: a turn that `session/cancel` ends with `stopReason: "cancelled"`.
    Prompt,
    /// MCP 2025-11-25 `tools/call`, which may ask for task-augmented execution.
    TaskAugmentable,
}

/// The rules of one connection, with the little state they keep.
#[derive(Debug)]
pub(crate) struct Rules {
    pub(crate) protocol: Protocol,
    /// Whether a request the peer cancelled still gets a response.
    pub(crate) answer_cancelled: bool,
    /// ACP: send the draft `$/cancelRequest` to a peer that declared it.
    emit_draft_cancel: bool,
    /// ACP: the peer declared `cancellation: {request: true}`.
    peer_accepts_draft: AtomicBool,
    /// MCP 2025-11-25: task-augmented requests and `tasks/*`.
    pub(crate) tasks: Option<Arc<tasks::Tasks>>,
}

impl Rules {
    pub(crate) fn new(
        protocol: Protocol,
        answer_cancelled: Option<bool>,
        emit_draft_cancel: bool,
        task_limits: tasks::TaskLimits,
    ) -> Self {
        Self {
            protocol,
            answer_cancelled: answer_cancelled.unwrap_or(protocol.answers_cancelled()),
            emit_draft_cancel,
            peer_accepts_draft: AtomicBool::new(false),
            tasks: (protocol == Protocol::Mcp(McpRevision::V2025_11_25))
                .then(|| Arc::new(tasks::Tasks::new(task_limits))),
        }
    }

    /// What kind of request `method` is.
    pub(crate) fn kind(&self, method: &str) -> Kind {
        match (self.protocol, method) {
            (_, INITIALIZE) => Kind::Initialize,
            (Protocol::Acp, acp_types::PromptResult::METHOD) => Kind::Prompt,
            (Protocol::Mcp(_), tasks::AUGMENTABLE) if self.tasks.is_some() => Kind::TaskAugmentable,
            _ => Kind::Plain,
        }
    }

    /// Answers the requests that are served on the reader, in order with the cancels around
    /// them: MCP `tasks/get` and `tasks/cancel` (quick, and `tasks/cancel` must take effect
    /// before anything read after it).
    pub(crate) fn answer_now(&self, method: &str, params: Option<&RawValue>) -> Option<Reply> {
        let tasks = self.tasks.as_ref()?;
        match method {
            tasks::GET => Some(tasks.get(params)),
            tasks::CANCEL => Some(tasks.cancel(params)),
            _ => None,
        }
    }

    /// The tasks that serve `tasks/result`, if `method` is that and this connection has tasks.
    pub(crate) fn task_result(&self, method: &str) -> Option<&Arc<tasks::Tasks>> {
        self.tasks.as_ref().filter(|_| method == tasks::RESULT)
    }

    /// ACP: the session a `session/prompt` runs a turn of, so `session/cancel` can find it.
    pub(crate) fn session_of(&self, kind: Kind, params: Option<&RawValue>) -> Option<String> {
        (kind == Kind::Prompt)
            .then(|| acp::prompt_session(params))
            .flatten()
    }

    /// Protocol notifications with an effect on requests in flight, handled on the reader
    /// before the application's handler sees them: ACP `session/cancel`.
    pub(crate) fn on_notification(
        &self,
        registry: &Registry,
        method: &str,
        params: Option<&RawValue>,
    ) {
        if self.protocol != Protocol::Acp || method != acp_types::SessionCancelParams::METHOD {
            return;
        }
        match params.map(|raw| serde_json::from_str::<acp_types::SessionCancelParams>(raw.get())) {
            Some(Ok(cancel)) => {
                let cancelled = registry.cancel_session(&cancel.session_id);
                tracing::info!(session_id = %cancel.session_id, prompts = cancelled, "the client cancelled a prompt turn");
            }
            _ => tracing::warn!("ignored a malformed session/cancel"),
        }
    }

    /// Runs in the request's task before its handler: ACP `initialize` tells whether the client
    /// accepts the draft `$/cancelRequest`.
    pub(crate) fn before_request(&self, kind: Kind, params: Option<&RawValue>) {
        if self.protocol == Protocol::Acp && kind == Kind::Initialize {
            let accepts = acp::declares_draft_cancellation(params, acp::CLIENT_CAPABILITIES);
            self.peer_accepts_draft.store(accepts, Ordering::Relaxed);
        }
    }

    /// The answer actually sent for a finished request: an ACP turn ended by `session/cancel`
    /// is a result (`stopReason: "cancelled"`), never an error; `initialize` results declare
    /// what the runtime supports (ACP's draft cancellation, MCP tasks' cancel).
    pub(crate) fn edit_reply(&self, kind: Kind, finished: Finished, reply: Reply) -> Reply {
        match (kind, reply) {
            (Kind::Prompt, Err(error)) if finished.session_cancelled && error.is_cancelled() => {
                Ok(RawValue::from_string(acp::CANCELLED_TURN.to_owned()).expect("valid JSON"))
            }
            (Kind::Initialize, Ok(result)) if self.protocol == Protocol::Acp => {
                Ok(edit_json(result, |value| {
                    acp::declare_draft_cancellation(value, acp::AGENT_CAPABILITIES)
                }))
            }
            (Kind::Initialize, Ok(result)) if self.tasks.is_some() => {
                Ok(edit_json(result, tasks::declare_task_cancellation))
            }
            (_, reply) => reply,
        }
    }

    /// Edits the params of one of our requests: ACP `initialize` declares the draft
    /// cancellation capability.
    pub(crate) fn outgoing_params(&self, method: &str, params: &mut serde_json::Value) {
        if self.protocol == Protocol::Acp && method == INITIALIZE {
            acp::declare_draft_cancellation(params, acp::CLIENT_CAPABILITIES);
        }
    }

    /// Sees the answer to one of our requests: ACP `initialize` tells whether the agent accepts
    /// the draft `$/cancelRequest`.
    pub(crate) fn on_response(&self, method: &str, outcome: &Reply) {
        if self.protocol == Protocol::Acp
            && method == INITIALIZE
            && let Ok(result) = outcome
        {
            let accepts = acp::declares_draft_cancellation(Some(result), acp::AGENT_CAPABILITIES);
            self.peer_accepts_draft.store(accepts, Ordering::Relaxed);
        }
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability (ACP).
    pub(crate) fn peer_accepts_draft(&self) -> bool {
        self.peer_accepts_draft.load(Ordering::Relaxed)
    }

    /// The notification that cancels our request `id` (a `method` call), or `None` when it is
    /// never cancelled (`initialize`).
    pub(crate) fn cancel_message(
        &self,
        id: &RequestId,
        method: &str,
        reason: &str,
    ) -> Option<Vec<u8>> {
        if method == INITIALIZE {
            return None;
        }
        let draft = self.emit_draft_cancel && self.peer_accepts_draft();
        let (cancel_method, params) = cancel_notification(self.protocol, draft, id, reason);
        tracing::debug!(request_id = %id, method, reason, cancel_method, "cancelling our request");
        Some(wire::notification(
            cancel_method,
            wire::params(&params).as_deref(),
        ))
    }
}

/// Applies `edit` to a JSON result; a result that does not parse is sent as it is.
fn edit_json(result: Box<RawValue>, edit: impl FnOnce(&mut serde_json::Value)) -> Box<RawValue> {
    match serde_json::from_str::<serde_json::Value>(result.get()) {
        Ok(mut value) => {
            edit(&mut value);
            wire::params(&value).unwrap_or(result)
        }
        Err(_) => result,
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
