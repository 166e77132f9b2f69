//! One ACP connection of `cancelkit check acp`: the handshake (`initialize`, then `session/new`),
//! the requests the scenarios make, and the part of a client the agent may need while they wait:
//! it notes the agent's own requests to the client (`session/request_permission`, `fs/*`,
//! `terminal/*`), answers those the agent cancels, and answers the rest when told to, as a
//! well-behaved client does after it cancelled a turn.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::{Client, Pending};
use super::{Evidence, Unreachable, shown};

/// The ACP protocol version the check speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The shipped per-request cancel.
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// The seed's per-request cancel.
pub const CANCEL_REQUEST_SEED: &str = "$/cancelRequest";
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
    /// The ids the agent named in its own `$/cancel_request` (or `$/cancelRequest`).
    pub cancelled_by_agent: Vec<Value>,
    /// Frames that were neither routed responses, agent requests nor agent cancels.
    pub seen: VecDeque<Value>,
    /// How many `session/update` notifications came.
    pub updates: usize,
    next_id: u64,
}

/// The client's side of `initialize`: protocol version 1, the seed's cancellation capability,
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
            cancelled_by_agent: Vec::new(),
            seen: VecDeque::new(),
            updates: 0,
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

    /// Whether the agent declared the seed's `cancellation.request` in its capabilities.
    pub fn declares_seed_cancel(&self) -> bool {
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
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let step = left.min(POLL);
            let started = Instant::now();
            if let Some(frame) = pending.wait(step).await {
                self.pump(ev).await;
                return Some(frame);
            }
            // A response that can never come (a failed write) ends the wait at once: keep pace.
            tokio::time::sleep(step.saturating_sub(started.elapsed())).await;
            self.pump(ev).await;
            if left.is_zero() || self.client.closed() {
                return pending.now();
            }
        }
    }

    /// Looks after the agent's frames for `duration`.
    pub async fn idle(&mut self, duration: Duration, ev: &mut Evidence) {
        self.wait(&mut Pending::never(), duration, ev).await;
    }

    /// Takes the agent's unrouted frames: notes its requests, answers those it cancels, keeps
    /// the rest in [`AcpSession::seen`].
    pub async fn pump(&mut self, ev: &mut Evidence) {
        for frame in self.client.others() {
            let method = frame
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match (method.as_deref(), frame.get("id")) {
                (Some("session/update"), None) => self.updates += 1,
                (Some(method), Some(id)) => {
                    ev.got(&frame);
                    let request = AgentRequest {
                        id: id.clone(),
                        method: method.to_owned(),
                    };
                    if self.outstanding.len() < MAX_OUTSTANDING {
                        self.outstanding.push(request);
                    }
                }
                (Some(CANCEL_REQUEST | CANCEL_REQUEST_SEED), None) => {
                    ev.got(&frame);
                    let params = &frame["params"];
                    let named = params.get("requestId").or_else(|| params.get("id"));
                    if let Some(id) = named.cloned() {
                        if self.cancelled_by_agent.len() < MAX_OUTSTANDING {
                            self.cancelled_by_agent.push(id.clone());
                        }
                        self.answer(&id, ev).await;
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

    /// Answers the agent's request `id`, if it is outstanding, as cancelled: a permission
    /// request with outcome `cancelled`, anything else with -32800.
    async fn answer(&mut self, id: &Value, ev: &mut Evidence) {
        let Some(at) = self.outstanding.iter().position(|r| &r.id == id) else {
            return;
        };
        let request = self.outstanding.remove(at);
        let frame = if request.method == "session/request_permission" {
            json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}})
        } else {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32800, "message": "Request cancelled"}})
        };
        self.send(frame, ev).await;
    }

    /// Answers every outstanding agent request as cancelled.
    pub async fn answer_outstanding(&mut self, ev: &mut Evidence) {
        let ids: Vec<Value> = self.outstanding.iter().map(|r| r.id.clone()).collect();
        for id in ids {
            self.answer(&id, ev).await;
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
