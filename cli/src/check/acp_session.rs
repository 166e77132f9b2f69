//! One ACP connection of `cancelkit check acp`: the handshake (`initialize`, then `session/new`),
//! the requests the scenarios make, and the part of a client the agent may need while they wait.
//!
//! What the check does with the agent's own requests to the client (`session/request_permission`,
//! `fs/*`, `terminal/*`) is an explicit choice, [`Answering`], set by each scenario: answer at
//! once as a user would (`--permission reject` or `allow`; `fs/*` and `terminal/*`, which the
//! check does not declare, with -32601), hold them unanswered (a user who has not decided yet), or
//! answer them `cancelled`, which ACP asks of a client only after it sent `session/cancel`. A
//! request the agent cancels itself is answered at once, as cancelled, whatever the choice.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::{Client, Pending, Timed};
use super::{Evidence, Unreachable, shown};

/// The ACP protocol version the check speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The shipped per-request cancel.
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// The draft's per-request cancel.
pub const CANCEL_REQUEST_DRAFT: &str = "$/cancelRequest";
/// How often a wait looks at the agent's other frames.
const POLL: Duration = Duration::from_millis(20);
/// At most this many unrouted frames (responses nobody waited for, notifications) are kept.
const MAX_SEEN: usize = 1024;
/// At most this many of the agent's requests to the client are kept unanswered.
const MAX_OUTSTANDING: usize = 256;

/// A request the agent sent to the client.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    /// Its id.
    pub id: Value,
    /// Its method.
    pub method: String,
    /// The permission options it offers (`session/request_permission`): (`optionId`, `kind`).
    pub options: Vec<(Value, String)>,
    /// When it came (to within one look at the agent's frames).
    pub at: Instant,
}

impl AgentRequest {
    /// `method id`, for evidence and details.
    pub fn name(&self) -> String {
        format!("{} {}", self.method, self.id)
    }
}

/// How the check answers a permission request when no `session/cancel` is involved: the user's
/// decision it plays (`--permission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Permission {
    /// Pick the agent's `reject_once` option (else `reject_always`).
    Reject,
    /// Pick the agent's `allow_once` option (else `allow_always`).
    Allow,
}

impl Permission {
    /// The option kinds it picks, in order of preference.
    fn kinds(self) -> [&'static str; 2] {
        match self {
            Permission::Reject => ["reject_once", "reject_always"],
            Permission::Allow => ["allow_once", "allow_always"],
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Reject => "reject",
            Permission::Allow => "allow",
        }
    }
}

/// An answer the check gives to one of the agent's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// A user's decision: the chosen permission option; -32601 for `fs/*` and `terminal/*`.
    Decide(Permission),
    /// Cancelled: outcome `cancelled` for a permission request, -32800 for anything else.
    Cancelled,
}

/// What the check does with the agent's requests as they come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// Answer each at once.
    Now(Reply),
    /// Keep each unanswered in [`AcpSession::outstanding`] until a scenario answers it (or the
    /// agent cancels it).
    Hold,
}

/// A started agent, after `initialize`.
pub struct AcpSession {
    /// The raw client.
    pub client: Client,
    /// How long each wait lasts.
    pub timeout: Duration,
    /// The `initialize` result.
    pub init: Value,
    /// The agent's requests to the client not answered yet, oldest first.
    pub outstanding: Vec<AgentRequest>,
    /// Every request the agent sent to the client (the last 256), oldest first.
    pub asked: VecDeque<AgentRequest>,
    /// The ids the agent named in its own `$/cancel_request` (or `$/cancelRequest`).
    pub cancelled_by_agent: Vec<Value>,
    /// Frames that were neither routed responses, agent requests nor agent cancels.
    pub seen: VecDeque<Value>,
    /// What is done with the agent's requests as they come.
    pub answering: Answering,
    /// The user's decision the check plays (`--permission`).
    pub permission: Permission,
    next_id: u64,
}

/// The client's side of `initialize`: protocol version 1, the draft's cancellation capability,
/// no file system and no terminal.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {
            "fs": {"readTextFile": false, "writeTextFile": false},
            "terminal": false,
            "cancellation": {"request": true}
        },
        "clientInfo": {"name": "cancelkit-check", "version": env!("CARGO_PKG_VERSION")}
    })
}

impl AcpSession {
    /// Starts `command` without a handshake.
    pub fn spawn(command: &[OsString], timeout: Duration) -> Result<AcpSession, Unreachable> {
        let client = Client::spawn(command)
            .map_err(|e| Unreachable(format!("cannot start `{}`: {e}", shown(command))))?;
        Ok(AcpSession {
            client,
            timeout,
            init: Value::Null,
            outstanding: Vec::new(),
            asked: VecDeque::new(),
            cancelled_by_agent: Vec::new(),
            seen: VecDeque::new(),
            answering: Answering::Hold,
            permission: Permission::Reject,
            next_id: 0,
        })
    }

    /// Starts `command` and completes `initialize`, or says why not.
    pub async fn open(command: &[OsString], timeout: Duration) -> Result<AcpSession, Unreachable> {
        let mut s = AcpSession::spawn(command, timeout)?;
        let mut ev = Evidence::default();
        let (_, mut pending) = s.call("initialize", initialize_params(), &mut ev).await;
        let answer = s.wait(&mut pending, timeout, &mut ev).await;
        let answer = answer.ok_or_else(|| {
            Unreachable(if s.client.closed() {
                "the agent closed its stdout before answering initialize".into()
            } else {
                format!("no answer to initialize within {timeout:?}")
            })
        })?;
        if answer["result"]["protocolVersion"].as_u64().is_none() {
            return Err(Unreachable(format!(
                "initialize was not accepted: {answer}"
            )));
        }
        s.init = answer["result"].clone();
        Ok(s)
    }

    /// Whether the agent declared the draft's `cancellation.request` in its capabilities.
    pub fn declares_draft_cancel(&self) -> bool {
        self.init["agentCapabilities"]["cancellation"]["request"] == json!(true)
    }

    /// Sends a request with a fresh id; its id and its response to come. A failed write is
    /// noted and gives a response that never comes.
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        ev: &mut Evidence,
    ) -> (Value, Pending) {
        self.next_id += 1;
        let id = json!(self.next_id);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        ev.sent(&frame);
        let pending = match self.client.request(&id, &frame).await {
            Ok(pending) => pending,
            Err(e) => {
                ev.note(format!("cannot send {method}: {e}"));
                Pending::never()
            }
        };
        (id, pending)
    }

    /// Sends a frame that is not a request (a notification or a response).
    pub async fn send(&self, frame: Value, ev: &mut Evidence) {
        ev.sent(&frame);
        if let Err(e) = self.client.send(&frame).await {
            ev.note(format!("cannot send: {e}"));
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value, ev: &mut Evidence) {
        let frame = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(frame, ev).await;
    }

    /// `session/new` in a fresh temporary directory; the session id, if the agent gave one.
    pub async fn new_session(&mut self, ev: &mut Evidence) -> Option<String> {
        let cwd = std::env::temp_dir();
        let params = json!({"cwd": cwd, "mcpServers": []});
        let (_, mut pending) = self.call("session/new", params, ev).await;
        let answer = self.wait(&mut pending, self.timeout, ev).await;
        match &answer {
            Some(frame) => ev.got(frame),
            None => ev.note(format!(
                "no answer to session/new within {:?}",
                self.timeout
            )),
        }
        answer?["result"]["sessionId"].as_str().map(str::to_owned)
    }

    /// Sends `session/prompt` with `text` in `session`.
    pub async fn prompt(
        &mut self,
        session: &str,
        text: &str,
        ev: &mut Evidence,
    ) -> (Value, Pending) {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        self.call("session/prompt", params, ev).await
    }

    /// Waits up to `timeout` for `pending`, looking after the agent's other frames meanwhile.
    /// `None` when it did not come (or the agent has gone).
    pub async fn wait(
        &mut self,
        pending: &mut Pending,
        timeout: Duration,
        ev: &mut Evidence,
    ) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        self.wait_until(pending, deadline, ev)
            .await
            .map(|(frame, _)| frame)
    }

    /// Like [`AcpSession::wait`], until `deadline`, with when the response came.
    pub async fn wait_until(
        &mut self,
        pending: &mut Pending,
        deadline: Instant,
        ev: &mut Evidence,
    ) -> Option<Timed> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let step = left.min(POLL);
            let started = Instant::now();
            if let Some(timed) = pending.wait_timed(step).await {
                self.pump(ev).await;
                return Some(timed);
            }
            // A response that can never come (a failed write) ends the wait at once: keep pace.
            tokio::time::sleep(step.saturating_sub(started.elapsed())).await;
            self.pump(ev).await;
            if left.is_zero() || self.client.closed() {
                return pending.now_timed();
            }
        }
    }

    /// Looks after the agent's frames for `duration`.
    pub async fn idle(&mut self, duration: Duration, ev: &mut Evidence) {
        self.wait(&mut Pending::never(), duration, ev).await;
    }

    /// Takes the agent's unrouted frames: answers or holds its requests (as
    /// [`AcpSession::answering`] says), answers those it cancels, keeps the rest in
    /// [`AcpSession::seen`]. (`session/update` is logged by the client, with its time.)
    pub async fn pump(&mut self, ev: &mut Evidence) {
        for frame in self.client.others() {
            let method = frame
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match (method.as_deref(), frame.get("id")) {
                (Some(method), Some(id)) => {
                    ev.got(&frame);
                    let options = frame["params"]["options"]
                        .as_array()
                        .map(|options| {
                            options
                                .iter()
                                .map(|o| {
                                    (
                                        o["optionId"].clone(),
                                        o["kind"].as_str().unwrap_or("").to_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let request = AgentRequest {
                        id: id.clone(),
                        method: method.to_owned(),
                        options,
                        at: Instant::now(),
                    };
                    self.asked.push_back(request.clone());
                    if self.asked.len() > MAX_OUTSTANDING {
                        self.asked.pop_front();
                    }
                    match self.answering {
                        Answering::Now(reply) => self.reply(request, reply, ev).await,
                        Answering::Hold if self.outstanding.len() < MAX_OUTSTANDING => {
                            self.outstanding.push(request);
                        }
                        // beyond the bound a held request is answered as the user decides
                        Answering::Hold => {
                            let reply = Reply::Decide(self.permission);
                            self.reply(request, reply, ev).await;
                        }
                    }
                }
                (Some(CANCEL_REQUEST | CANCEL_REQUEST_DRAFT), None) => {
                    ev.got(&frame);
                    let params = &frame["params"];
                    let named = params.get("requestId").or_else(|| params.get("id"));
                    if let Some(id) = named.cloned() {
                        if self.cancelled_by_agent.len() < MAX_OUTSTANDING {
                            self.cancelled_by_agent.push(id.clone());
                        }
                        self.answer(&id, Reply::Cancelled, ev).await;
                    }
                }
                _ => {
                    ev.got(&frame);
                    if self.seen.len() == MAX_SEEN {
                        self.seen.pop_front();
                    }
                    self.seen.push_back(frame);
                }
            }
        }
    }

    /// Answers the agent's request `id` with `reply`, if it is outstanding.
    async fn answer(&mut self, id: &Value, reply: Reply, ev: &mut Evidence) {
        let Some(at) = self.outstanding.iter().position(|r| &r.id == id) else {
            return;
        };
        let request = self.outstanding.remove(at);
        self.reply(request, reply, ev).await;
    }

    /// Sends `reply` to `request`.
    async fn reply(&mut self, request: AgentRequest, reply: Reply, ev: &mut Evidence) {
        let id = &request.id;
        let permission = request.method == "session/request_permission";
        let frame = match reply {
            Reply::Cancelled if permission => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}})
            }
            Reply::Cancelled => json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32800, "message": "Request cancelled"}}),
            Reply::Decide(choice) if permission => {
                let kinds = choice.kinds();
                let picked = kinds
                    .iter()
                    .find_map(|kind| request.options.iter().find(|(_, k)| k == kind));
                match picked {
                    Some((option, _)) => json!({"jsonrpc": "2.0", "id": id,
                        "result": {"outcome": {"outcome": "selected", "optionId": option}}}),
                    None => {
                        ev.note(format!(
                            "{} offers no {} option: the client answers it cancelled",
                            request.name(),
                            choice.name()
                        ));
                        json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}})
                    }
                }
            }
            Reply::Decide(_) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
                "message": "cancelkit check declares no file system or terminal capability"}}),
        };
        self.send(frame, ev).await;
    }

    /// Answers every outstanding agent request with `reply`.
    pub async fn answer_outstanding(&mut self, reply: Reply, ev: &mut Evidence) {
        let ids: Vec<Value> = self.outstanding.iter().map(|r| r.id.clone()).collect();
        for id in ids {
            self.answer(&id, reply, ev).await;
        }
    }

    /// Takes the kept frames that are responses (no `method`): replies nobody waited for.
    pub fn take_replies(&mut self) -> Vec<Value> {
        let (replies, rest): (VecDeque<Value>, VecDeque<Value>) = self
            .seen
            .drain(..)
            .partition(|frame| frame.get("method").is_none());
        self.seen = rest;
        replies.into()
    }
}
