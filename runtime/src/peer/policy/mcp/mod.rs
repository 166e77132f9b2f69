//! What only MCP does, kept by MCP connections alone: the era of the connection and our side
//! of it ([`era`]), 2025-11-25 task-augmented requests and the 2026-07-28 tasks extension
//! ([`tasks`]), `subscriptions/listen`, and the completion of 2026-07-28 results ([`result`]).
//! ACP and LSP-style connections carry none of this state.

pub(crate) mod era;
pub(crate) mod result;
pub(crate) mod tasks;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::mcp;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Admission, INITIALIZE, Kind, McpRevision};
use crate::peer::router::Reply;
use result::Completion;

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

/// The MCP rules of one connection, with the state they keep.
#[derive(Debug)]
pub(crate) struct McpRules {
    /// 2025-11-25 task-augmented requests, the 2026-07-28 tasks extension, and `tasks/*`
    /// (none at 2024-11-05).
    pub(crate) tasks: Option<Arc<tasks::Tasks>>,
    /// The era in force and which side we are.
    pub(crate) era: era::Era,
    pub(crate) options: McpOptions,
    /// 2026-07-28: the `subscriptions/listen` requests in flight, the only ones a server may
    /// end with `notifications/cancelled`. Bounded by the requests in flight.
    listens: Mutex<HashSet<RequestId>>,
}

impl McpRules {
    pub(crate) fn new(
        revision: McpRevision,
        task_limits: tasks::TaskLimits,
        options: McpOptions,
    ) -> Self {
        Self {
            tasks: (revision != McpRevision::V2024_11_05)
                .then(|| Arc::new(tasks::Tasks::new(task_limits))),
            era: era::Era::new(revision),
            options,
            listens: Mutex::new(HashSet::new()),
        }
    }

    /// Whether this connection speaks 2026-07-28.
    pub(crate) fn is_2026(&self) -> bool {
        self.era.is_2026()
    }

    /// Whether we are the server of a 2026-07-28 connection, which issues no requests.
    pub(crate) fn is_2026_server(&self) -> bool {
        self.era.is_2026() && self.era.role() == era::Role::Server
    }

    /// Whether we are the client of a 2026-07-28 connection.
    pub(crate) fn is_2026_client(&self) -> bool {
        self.era.is_2026() && self.era.role() == era::Role::Client
    }

    /// Why we may not send a request now, if we may not: a 2026-07-28 server issues none.
    pub(crate) fn refuse_request(&self, method: &str) -> Option<String> {
        self.era.learn_role(false);
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
        let named = params.get("requestId");
        let id = named.and_then(|id| RequestId::deserialize(id).ok());
        match id {
            Some(id) if crate::sync::lock(&self.listens).contains(&id) => None,
            _ => Some(format!(
                "an MCP 2026-07-28 server sends notifications/cancelled only to end a subscriptions/listen stream in flight, and {} names none",
                named.map_or("the notification".to_owned(), |id| format!(
                    "requestId {id}"
                ))
            )),
        }
    }

    /// What kind of request `method` is, when MCP makes it special.
    pub(crate) fn kind(&self, method: &str) -> Option<Kind> {
        match method {
            tasks::AUGMENTABLE if self.tasks.is_some() => Some(Kind::TaskAugmentable),
            era::DISCOVER => Some(Kind::Discover),
            era::LISTEN if self.is_2026() => Some(Kind::Listen),
            method if self.is_2026() && era::CACHEABLE.contains(&method) => Some(Kind::Cacheable),
            _ => None,
        }
    }

    /// On the reader, first for every inbound request: learns the era and our side, and
    /// answers the requests served on the reader, in order with the cancels around them:
    /// `tasks/get` and `tasks/cancel` (quick, and `tasks/cancel` must take effect before
    /// anything read after it), and the requests a 2026-07-28 connection refuses outright.
    pub(crate) fn answer_now(&self, method: &str, params: Option<&RawValue>) -> Option<Reply> {
        let era = &self.era;
        era.learn_role(true);
        era.detect(method, params);
        let undecided_or_2026 = matches!(era.current(), None | Some(McpRevision::V2026_07_28));
        let no_handshake = matches!(method, INITIALIZE | era::PING) && era.is_2026();
        if (no_handshake || (method == era::DISCOVER && undecided_or_2026))
            && let Err(refused) = era.check_request(method, params)
        {
            return Some(Err(refused));
        }
        let tasks = self.tasks.as_ref()?;
        let extension = self.is_2026();
        if !matches!(method, tasks::GET | tasks::CANCEL) {
            return None;
        }
        if extension && let Err(refused) = era.check_request(method, params) {
            // The tasks extension's requests carry `_meta` like every other.
            return Some(Err(refused));
        }
        Some(match method {
            tasks::GET => tasks.get(params, extension),
            _ => tasks.cancel(params, extension),
        })
    }

    /// In the request's task, before its handler: 2026-07-28 requests must carry their `_meta`
    /// in a version we speak (the methods that do not exist in that era are refused on the
    /// reader, by [`answer_now`](Self::answer_now)).
    pub(crate) fn admit(
        &self,
        params: Option<&RawValue>,
    ) -> Result<Admission, crate::JsonRpcError> {
        if !self.is_2026() {
            return Ok(Admission::default());
        }
        Ok(Admission {
            declares_tasks: self.era.check_meta(params)?,
        })
    }

    /// The answer to `server/discover` when the application has no route for it. A negotiated
    /// (or 2026-07-28) server must answer it, and a client that is told "method not found"
    /// takes the server for a legacy one and falls back to `initialize` — which the discover
    /// already ruled out on this connection. So the runtime answers with what it knows (the
    /// supported versions, no capabilities beyond the tasks extension) and says so in the log.
    pub(crate) fn default_discover(&self, method: &str) -> Option<Reply> {
        if method != era::DISCOVER || !self.is_2026() {
            return None;
        }
        tracing::warn!(
            "no server/discover route: answered with the supported versions and no capabilities; add a route that declares the server's capabilities"
        );
        let empty = RawValue::from_string("{}".to_owned()).expect("valid JSON");
        Some(Ok(result::complete(empty, self.discover_completion())))
    }

    fn discover_completion(&self) -> Completion<'static> {
        Completion::Discover {
            supported: self.era.supported(),
            tasks: !self.options.task_tools.is_empty(),
        }
    }

    /// 2026-07-28: whether a `tools/call` (with these params) runs as a task.
    pub(crate) fn runs_as_extension_task(
        &self,
        admission: Admission,
        params: Option<&RawValue>,
    ) -> bool {
        admission.declares_tasks
            && self.is_2026()
            && !self.options.task_tools.is_empty()
            && tool_name(params).is_some_and(|name| self.options.task_tools.contains(&*name))
    }

    /// 2025-11-25: a task-augmented `tools/call` (with these params) of a tool that is not one
    /// of the declared task tools, which the server refuses (-32601, as the specification asks
    /// of a tool whose `taskSupport` is `forbidden`).
    pub(crate) fn refuses_legacy_task(&self, params: Option<&RawValue>) -> Option<String> {
        if !self.options.task_tools_declared {
            return None;
        }
        let name = tool_name(params)?;
        (!self.options.task_tools.contains(&*name)).then(|| name.into_owned())
    }

    /// 2025-11-25 task-augmented requests: possible on this connection now.
    pub(crate) fn legacy_tasks(&self) -> bool {
        self.era.may_be_2025()
    }

    /// 2026-07-28: a `subscriptions/listen` request started (`true`) or ended.
    pub(crate) fn track_listen(&self, id: &RequestId, open: bool) {
        let mut listens = crate::sync::lock(&self.listens);
        if open {
            listens.insert(id.clone());
        } else {
            listens.remove(id);
        }
    }

    /// The tasks that serve `tasks/result`, if `method` is that and this era has it.
    pub(crate) fn task_result(&self, method: &str) -> Option<&Arc<tasks::Tasks>> {
        self.tasks
            .as_ref()
            .filter(|_| method == tasks::RESULT && !self.is_2026())
    }

    /// A result as sent: a 2025-11-25 `initialize` result declares the tasks' cancel; every
    /// 2026-07-28 result is completed ([`result`]).
    pub(crate) fn edit_result(&self, kind: Kind, result: Box<RawValue>) -> Box<RawValue> {
        if kind == Kind::Initialize
            && self.tasks.is_some()
            && self.era.current() == Some(McpRevision::V2025_11_25)
        {
            return super::edit_json(result, tasks::declare_task_cancellation);
        }
        if !self.is_2026() {
            return result;
        }
        let completion = match kind {
            Kind::Discover => self.discover_completion(),
            Kind::Cacheable => Completion::Cacheable,
            _ => Completion::Plain,
        };
        result::complete(result, completion)
    }
}

/// The `name` of a `tools/call`'s params, borrowed unless it holds escapes.
fn tool_name(params: Option<&RawValue>) -> Option<std::borrow::Cow<'_, str>> {
    #[derive(Deserialize)]
    struct Call<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
    }
    params
        .and_then(|p| serde_json::from_str::<Call<'_>>(p.get()).ok())
        .map(|call| call.name)
}
