//! Everything that differs by protocol and revision, in one place: which cancel notifications
//! are accepted and sent, whether a request the peer cancelled still gets a response, which
//! requests can never be cancelled, and the rules only one protocol has — ACP's draft
//! `cancellation` capability and `session/cancel` ([`acp`]); MCP's eras, tasks,
//! `subscriptions/listen` and 2026-07-28 results ([`mcp`]).
//!
//! The reader and the dispatcher ask [`Rules`] at fixed points of a message's life and contain
//! no protocol branches of their own. [`Rules`] holds what every protocol has and the state of
//! its own protocol only: an ACP or LSP-style connection carries none of MCP's.

mod acp;
mod mcp;
mod protocol;

use cancelkit_protocol::acp as acp_types;
use cancelkit_protocol::jsonrpc::RequestId;
use serde_json::value::RawValue;

use super::registry::{Finished, Registry};
use super::router::Reply;
use super::wire;

/// `initialize`: never cancelled, in either direction.
pub(crate) const INITIALIZE: &str = "initialize";

pub use cancelkit_wire::McpRevision;
pub(crate) use mcp::{McpOptions, McpRules, era, tasks};
pub(crate) use protocol::CancelRequest;
pub use protocol::Protocol;
use protocol::cancel_notification;

/// What a request is to the rules, told from its method name alone (on the reader, cheaply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing special.
    Plain,
    /// `initialize`: never cancelled; ACP and MCP edit its result's capabilities.
    Initialize,
    /// ACP `session/prompt`: a turn that `session/cancel` ends with `stopReason: "cancelled"`.
    Prompt,
    /// MCP `tools/call`, which may run as a task (2025-11-25: asked for with `params.task`;
    /// 2026-07-28: a tool the server runs as a task, for a client declaring the extension).
    TaskAugmentable,
    /// MCP 2026-07-28 `server/discover`: its result is completed by the runtime.
    Discover,
    /// MCP 2026-07-28 `subscriptions/listen`: a server ends it with `notifications/cancelled`.
    Listen,
    /// MCP 2026-07-28 lists and `resources/read`: results carry `ttlMs` and `cacheScope`.
    Cacheable,
}

/// What a request's task learns before its handler runs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Admission {
    /// MCP 2026-07-28: the client declared the tasks extension for this request.
    pub(crate) declares_tasks: bool,
}

/// The rules of one connection: what every protocol has, and its own protocol's rules.
#[derive(Debug)]
pub(crate) struct Rules {
    pub(crate) protocol: Protocol,
    /// Whether a request the peer cancelled still gets a response.
    pub(crate) answer_cancelled: bool,
    own: Own,
}

/// The rules and state only one protocol has.
#[derive(Debug)]
enum Own {
    Acp(acp::AcpRules),
    /// Boxed: the largest, and only MCP connections pay for it.
    Mcp(Box<McpRules>),
    Lsp,
}

impl Rules {
    pub(crate) fn new(
        protocol: Protocol,
        answer_cancelled: Option<bool>,
        emit_draft_cancel: bool,
        task_limits: tasks::TaskLimits,
        mcp: McpOptions,
    ) -> Self {
        let own = match protocol {
            Protocol::Acp => Own::Acp(acp::AcpRules::new(emit_draft_cancel)),
            Protocol::Mcp(revision) => {
                Own::Mcp(Box::new(McpRules::new(revision, task_limits, mcp)))
            }
            Protocol::Lsp => Own::Lsp,
        };
        Self {
            protocol,
            answer_cancelled: answer_cancelled.unwrap_or(protocol.answers_cancelled()),
            own,
        }
    }

    /// The MCP rules, on an MCP connection.
    pub(crate) fn mcp(&self) -> Option<&McpRules> {
        match &self.own {
            Own::Mcp(mcp) => Some(mcp),
            _ => None,
        }
    }

    fn acp(&self) -> Option<&acp::AcpRules> {
        match &self.own {
            Own::Acp(acp) => Some(acp),
            _ => None,
        }
    }

    /// The MCP era in force, if this is MCP and it is decided.
    pub(crate) fn mcp_revision(&self) -> Option<McpRevision> {
        self.mcp()?.era.current()
    }

    /// Whether this connection speaks MCP 2026-07-28.
    pub(crate) fn is_2026(&self) -> bool {
        self.mcp().is_some_and(McpRules::is_2026)
    }

    /// Whether we are the client of an MCP 2026-07-28 connection.
    pub(crate) fn is_2026_client(&self) -> bool {
        self.mcp().is_some_and(McpRules::is_2026_client)
    }

    /// Why we may not send a request now, if we may not (an MCP 2026-07-28 server issues none).
    pub(crate) fn refuse_request(&self, method: &str) -> Option<String> {
        self.mcp()?.refuse_request(method)
    }

    /// Why we may not send this notification, if we may not (MCP 2026-07-28 servers).
    pub(crate) fn refuse_notification(
        &self,
        method: &str,
        params: &serde_json::Value,
    ) -> Option<String> {
        self.mcp()?.refuse_notification(method, params)
    }

    /// What kind of request `method` is.
    pub(crate) fn kind(&self, method: &str) -> Kind {
        if method == INITIALIZE {
            return Kind::Initialize;
        }
        match &self.own {
            Own::Acp(_) if method == acp_types::PromptResult::METHOD => Kind::Prompt,
            Own::Mcp(mcp) => mcp.kind(method).unwrap_or(Kind::Plain),
            _ => Kind::Plain,
        }
    }

    /// On the reader, first for every inbound request: the protocol's requests answered there,
    /// in order with the cancels around them ([`McpRules::answer_now`]).
    pub(crate) fn answer_now(&self, method: &str, params: Option<&RawValue>) -> Option<Reply> {
        self.mcp()?.answer_now(method, params)
    }

    /// In the request's task, before its handler ([`McpRules::admit`]).
    pub(crate) fn admit(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Admission, crate::JsonRpcError> {
        self.mcp()
            .map_or(Ok(Admission::default()), |mcp| mcp.admit(params))
    }

    /// The runtime's answer to a request the application has no route for, when the protocol
    /// requires one ([`McpRules::default_discover`]).
    pub(crate) fn default_discover(&self, method: &str) -> Option<Reply> {
        self.mcp()?.default_discover(method)
    }

    /// The MCP tasks that serve `tasks/result`, if `method` is that.
    pub(crate) fn task_result(&self, method: &str) -> Option<&std::sync::Arc<tasks::Tasks>> {
        self.mcp()?.task_result(method)
    }

    /// MCP 2026-07-28: a `subscriptions/listen` request started (`true`) or ended.
    pub(crate) fn track_listen(&self, id: &RequestId, open: bool) {
        if let Some(mcp) = self.mcp() {
            mcp.track_listen(id, open);
        }
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
        if self.acp().is_none() || method != acp_types::SessionCancelParams::METHOD {
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

    /// Runs in the request's task before its handler ([`acp::AcpRules::before_request`]).
    pub(crate) fn before_request(&self, kind: Kind, params: Option<&RawValue>) {
        if let Some(acp) = self.acp() {
            acp.before_request(kind, params);
        }
    }

    /// The answer actually sent for a finished request, as its protocol wants it: an ACP turn
    /// ended by `session/cancel`, capabilities declared in `initialize` results, MCP
    /// 2026-07-28 results completed.
    pub(crate) fn edit_reply(&self, kind: Kind, finished: Finished, reply: Reply) -> Reply {
        match &self.own {
            Own::Acp(acp) => acp.edit_reply(kind, finished, reply),
            Own::Mcp(mcp) => reply.map(|result| mcp.edit_result(kind, result)),
            Own::Lsp => reply,
        }
    }

    /// The params of one of our requests as sent (`None`: none): ACP `initialize` declares
    /// the draft cancellation capability; an MCP 2026-07-28 client stamps its `_meta`, editing
    /// only that member of the params.
    pub(crate) fn outgoing_params(
        &self,
        method: &str,
        params: Box<RawValue>,
    ) -> Option<Box<RawValue>> {
        let params = match &self.own {
            Own::Acp(acp) if method == INITIALIZE => {
                edit_json(params, |value| acp.outgoing_params(method, value))
            }
            Own::Mcp(mcp) if mcp.is_2026() => return mcp.options.client.stamp_raw(Some(params)),
            _ => params,
        };
        (params.get() != "null").then_some(params)
    }

    /// Sees the answer to one of our requests ([`acp::AcpRules::on_response`]).
    pub(crate) fn on_response(&self, method: &str, outcome: &Reply) {
        if let Some(acp) = self.acp() {
            acp.on_response(method, outcome);
        }
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability (ACP).
    pub(crate) fn peer_accepts_draft(&self) -> bool {
        self.acp().is_some_and(acp::AcpRules::peer_accepts_draft)
    }

    /// The notification that cancels our request `id` (a `method` call), or `None` when it is
    /// never cancelled (`initialize`). `reason`: the text the outgoing-reason policy lets out
    /// (MCP only; `None` sends no `reason`).
    pub(crate) fn cancel_message<'a>(
        &self,
        id: &RequestId,
        method: &str,
        reason: impl Into<Option<&'a str>>,
    ) -> Option<Vec<u8>> {
        let reason = reason.into();
        if method == INITIALIZE {
            return None;
        }
        if self.mcp().is_some_and(McpRules::is_2026_server) {
            // Never reached through the public API (such a server sends no requests), kept as
            // the last guard of the rule.
            tracing::warn!(request_id = %id, method, "an MCP 2026-07-28 server does not cancel; nothing sent");
            return None;
        }
        let draft = self.acp().is_some_and(acp::AcpRules::sends_draft);
        let (cancel_method, params) = cancel_notification(self.protocol, draft, id, reason);
        tracing::debug!(request_id = %id, method, ?reason, cancel_method, "cancelling our request");
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
mod tests;
