//! Everything that differs by protocol and revision, in one place: which cancel notifications
//! are accepted and sent, whether a request the peer cancelled still gets a response, which
//! requests can never be cancelled, and the protocol-specific rules around them — ACP's draft
//! `cancellation` capability and `session/cancel` ([`acp`]), MCP 2025-11-25 tasks ([`tasks`]).
//!
//! The reader and the dispatcher ask [`Rules`] at fixed points of a message's life and contain
//! no protocol branches of their own.

mod acp;
pub(crate) mod era;
mod protocol;
pub(crate) mod tasks;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::{acp as acp_types, mcp};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::registry::{Finished, Registry};
use super::router::Reply;
use super::wire;

/// `initialize`: never cancelled, in either direction.
pub(crate) const INITIALIZE: &str = "initialize";

pub use cancelkit_wire::McpRevision;
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

/// The MCP-specific options of a connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct McpOptions {
    /// What a 2026-07-28 client stamps on its requests.
    pub(crate) client: era::ClientMeta,
    /// 2026-07-28: the tools whose `tools/call` runs as a task for clients declaring the tasks
    /// extension.
    pub(crate) task_tools: HashSet<String>,
    /// Whether `task_tools` was given: then at 2025-11-25 only those tools run as tasks too.
    pub(crate) task_tools_declared: bool,
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
    /// MCP 2025-11-25 task-augmented requests, the 2026-07-28 tasks extension, and `tasks/*`.
    pub(crate) tasks: Option<Arc<tasks::Tasks>>,
    /// MCP: the era in force and which side we are.
    pub(crate) era: Option<era::Era>,
    pub(crate) mcp: McpOptions,
    /// MCP 2026-07-28: the `subscriptions/listen` requests in flight, the only ones a server
    /// may end with `notifications/cancelled`. Bounded by the requests in flight.
    listens: Mutex<HashSet<cancelkit_protocol::jsonrpc::RequestId>>,
}

impl Rules {
    pub(crate) fn new(
        protocol: Protocol,
        answer_cancelled: Option<bool>,
        emit_draft_cancel: bool,
        task_limits: tasks::TaskLimits,
        mcp: McpOptions,
    ) -> Self {
        let revision = match protocol {
            Protocol::Mcp(revision) => Some(revision),
            _ => None,
        };
        Self {
            protocol,
            answer_cancelled: answer_cancelled.unwrap_or(protocol.answers_cancelled()),
            emit_draft_cancel,
            peer_accepts_draft: AtomicBool::new(false),
            tasks: revision
                .filter(|r| *r != McpRevision::V2024_11_05)
                .map(|_| Arc::new(tasks::Tasks::new(task_limits))),
            era: revision.map(era::Era::new),
            mcp,
            listens: Mutex::new(HashSet::new()),
        }
    }

    /// The MCP era in force, if this is MCP and it is decided.
    pub(crate) fn mcp_revision(&self) -> Option<McpRevision> {
        self.era.as_ref()?.current()
    }

    /// Whether this connection speaks MCP 2026-07-28.
    pub(crate) fn is_2026(&self) -> bool {
        self.era.as_ref().is_some_and(era::Era::is_2026)
    }

    /// Whether we are the server of a 2026-07-28 connection, which issues no requests.
    fn is_2026_server(&self) -> bool {
        self.era
            .as_ref()
            .is_some_and(|era| era.is_2026() && era.role() == era::Role::Server)
    }

    /// Whether we are the client of a 2026-07-28 connection.
    pub(crate) fn is_2026_client(&self) -> bool {
        self.era
            .as_ref()
            .is_some_and(|era| era.is_2026() && era.role() == era::Role::Client)
    }

    /// Why we may not send a request now, if we may not: a 2026-07-28 server issues none.
    pub(crate) fn refuse_request(&self, method: &str) -> Option<String> {
        if let Some(era) = &self.era {
            era.learn_role(false);
        }
        self.is_2026_server().then(|| {
            format!("an MCP 2026-07-28 server issues no requests, so `{method}` is not sent")
        })
    }

    /// Why we may not send this notification, if we may not: a 2026-07-28 server sends
    /// `notifications/cancelled` only to end a `subscriptions/listen` request in flight.
    pub(crate) fn refuse_notification(
        &self,
        method: &str,
        params: &serde_json::Value,
    ) -> Option<String> {
        if method != mcp::v2026_07_28::CancelledNotificationParams::METHOD || !self.is_2026_server()
        {
            return None;
        }
        let id = params
            .get("requestId")
            .and_then(|id| serde_json::from_value(id.clone()).ok());
        match id {
            Some(id) if crate::sync::lock(&self.listens).contains(&id) => None,
            _ => Some(format!(
                "an MCP 2026-07-28 server sends notifications/cancelled only to end a subscriptions/listen stream in flight, and {} names none",
                params
                    .get("requestId")
                    .map_or("the notification".to_owned(), |id| format!(
                        "requestId {id}"
                    ))
            )),
        }
    }

    /// What kind of request `method` is.
    pub(crate) fn kind(&self, method: &str) -> Kind {
        match (self.protocol, method) {
            (_, INITIALIZE) => Kind::Initialize,
            (Protocol::Acp, acp_types::PromptResult::METHOD) => Kind::Prompt,
            (Protocol::Mcp(_), tasks::AUGMENTABLE) if self.tasks.is_some() => Kind::TaskAugmentable,
            (Protocol::Mcp(_), era::DISCOVER) => Kind::Discover,
            (Protocol::Mcp(_), era::LISTEN) if self.is_2026() => Kind::Listen,
            (Protocol::Mcp(_), method) if self.is_2026() && era::CACHEABLE.contains(&method) => {
                Kind::Cacheable
            }
            _ => Kind::Plain,
        }
    }

    /// On the reader, first for every inbound request: learns the MCP era and our side, and
    /// answers the requests that are served on the reader, in order with the cancels around
    /// them: MCP `tasks/get` and `tasks/cancel` (quick, and `tasks/cancel` must take effect
    /// before anything read after it).
    pub(crate) fn answer_now(&self, method: &str, params: Option<&RawValue>) -> Option<Reply> {
        if let Some(era) = &self.era {
            era.learn_role(true);
            era.detect(method, params);
        }
        if let Some(era) = &self.era {
            let undecided_or_2026 = matches!(era.current(), None | Some(McpRevision::V2026_07_28));
            let no_handshake = matches!(method, INITIALIZE | era::PING) && era.is_2026();
            if (no_handshake || (method == era::DISCOVER && undecided_or_2026))
                && let Err(refused) = era.check_request(method, params)
            {
                return Some(Err(refused));
            }
        }
        let tasks = self.tasks.as_ref()?;
        let extension = self.is_2026();
        if extension && matches!(method, tasks::GET | tasks::CANCEL) {
            // The tasks extension's requests carry `_meta` like every other.
            if let Err(refused) = self.era.as_ref()?.check_request(method, params) {
                return Some(Err(refused));
            }
        }
        match method {
            tasks::GET => Some(tasks.get(params, extension)),
            tasks::CANCEL => Some(tasks.cancel(params, extension)),
            _ => None,
        }
    }

    /// In the request's task, before its handler: MCP 2026-07-28 requests must carry their
    /// `_meta` in a version we speak (the methods that do not exist in that era are refused on
    /// the reader, by [`answer_now`](Self::answer_now)).
    pub(crate) fn admit(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Admission, crate::JsonRpcError> {
        match &self.era {
            Some(era) if era.is_2026() => Ok(Admission {
                declares_tasks: era.check_meta(params)?,
            }),
            _ => Ok(Admission::default()),
        }
    }

    /// MCP: the answer to `server/discover` when the application has no route for it. A
    /// negotiated (or 2026-07-28) server must answer it, and a client that is told "method not
    /// found" takes the server for a legacy one and falls back to `initialize` — which the
    /// discover already ruled out on this connection. So the runtime answers with what it
    /// knows (the supported versions, no capabilities beyond the tasks extension) and says so
    /// in the log once per connection.
    pub(crate) fn default_discover(&self, method: &str) -> Option<Reply> {
        let era = self.era.as_ref()?;
        if method != era::DISCOVER || !era.is_2026() {
            return None;
        }
        tracing::warn!(
            "no server/discover route: answered with the supported versions and no capabilities; add a route that declares the server's capabilities"
        );
        let result = edit_json(
            RawValue::from_string("{\"capabilities\":{}}".to_owned()).expect("valid JSON"),
            |value| era::edit_discover(value, era.supported(), !self.mcp.task_tools.is_empty()),
        );
        Some(Ok(era::complete_result(result)))
    }

    /// MCP 2026-07-28: whether a `tools/call` (with these params) runs as a task.
    pub(crate) fn runs_as_extension_task(
        &self,
        admission: Admission,
        params: Option<&RawValue>,
    ) -> bool {
        #[derive(Deserialize)]
        struct Call<'a> {
            #[serde(borrow)]
            name: &'a str,
        }
        admission.declares_tasks
            && self.is_2026()
            && !self.mcp.task_tools.is_empty()
            && params
                .and_then(|p| serde_json::from_str::<Call<'_>>(p.get()).ok())
                .is_some_and(|call| self.mcp.task_tools.contains(call.name))
    }

    /// MCP 2025-11-25: a task-augmented `tools/call` (with these params) of a tool that is not
    /// one of the declared task tools, which the server refuses (-32601, as the specification
    /// asks of a tool whose `taskSupport` is `forbidden`).
    pub(crate) fn refuses_legacy_task(&self, params: Option<&RawValue>) -> Option<String> {
        #[derive(Deserialize)]
        struct Call<'a> {
            #[serde(borrow)]
            name: std::borrow::Cow<'a, str>,
        }
        if !self.mcp.task_tools_declared {
            return None;
        }
        let name = params
            .and_then(|p| serde_json::from_str::<Call<'_>>(p.get()).ok())
            .map(|call| call.name.into_owned())?;
        (!self.mcp.task_tools.contains(&name)).then_some(name)
    }

    /// MCP 2025-11-25 task-augmented requests: possible on this connection now.
    pub(crate) fn legacy_tasks(&self) -> bool {
        self.era.as_ref().is_some_and(era::Era::may_be_2025)
    }

    /// MCP 2026-07-28: a `subscriptions/listen` request started (`true`) or ended.
    pub(crate) fn track_listen(&self, id: &cancelkit_protocol::jsonrpc::RequestId, open: bool) {
        let mut listens = crate::sync::lock(&self.listens);
        if open {
            listens.insert(id.clone());
        } else {
            listens.remove(id);
        }
    }

    /// The tasks that serve `tasks/result`, if `method` is that and this connection has tasks.
    pub(crate) fn task_result(&self, method: &str) -> Option<&Arc<tasks::Tasks>> {
        self.tasks
            .as_ref()
            .filter(|_| method == tasks::RESULT && !self.is_2026())
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
                    acp::declare_draft_cancellation(value, acp::AGENT_CAPABILITIES);
                }))
            }
            (Kind::Initialize, Ok(result))
                if self.tasks.is_some()
                    && self.mcp_revision() == Some(McpRevision::V2025_11_25) =>
            {
                Ok(edit_json(result, tasks::declare_task_cancellation))
            }
            (kind, Ok(result)) if self.is_2026() => {
                let result = match kind {
                    Kind::Discover => {
                        let era = self.era.as_ref().expect("MCP");
                        let tasks = !self.mcp.task_tools.is_empty();
                        edit_json(result, |value| {
                            era::edit_discover(value, era.supported(), tasks);
                        })
                    }
                    Kind::Cacheable => edit_json(result, era::edit_cacheable),
                    _ => result,
                };
                Ok(era::complete_result(result))
            }
            (_, reply) => reply,
        }
    }

    /// Whether the params of our `method` request are edited before sending.
    pub(crate) fn edits_outgoing(&self, method: &str) -> bool {
        method == INITIALIZE || self.is_2026()
    }

    /// Edits the params of one of our requests: ACP `initialize` declares the draft
    /// cancellation capability; an MCP 2026-07-28 client stamps its `_meta`.
    pub(crate) fn outgoing_params(&self, method: &str, params: &mut serde_json::Value) {
        if self.protocol == Protocol::Acp && method == INITIALIZE {
            acp::declare_draft_cancellation(params, acp::CLIENT_CAPABILITIES);
        }
        if self.is_2026() {
            self.mcp.client.stamp(params);
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
        if self.is_2026_server() {
            // Never reached through the public API (such a server sends no requests), kept as
            // the last guard of the rule.
            tracing::warn!(request_id = %id, method, "an MCP 2026-07-28 server does not cancel; nothing sent");
            return None;
        }
        let draft = self.emit_draft_cancel && self.peer_accepts_draft();
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
