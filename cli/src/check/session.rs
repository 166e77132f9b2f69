//! One MCP session of `cancelkit check`: the handshake (`server/discover`, else `initialize`),
//! the era's wire forms (2026-07-28 stamps `_meta` on every request and has no `ping`), the
//! requests the scenarios make, and the slow calls in flight: each carries a progress token, and
//! the session knows until when the server may still be busy with them
//! ([`Session::quiesce`]) and which of them are watched until the run ends ([`super::watch`]).

use std::ffi::OsString;
use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;
use cancelkit_wire::meta::{CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION};
use serde_json::{Value, json};

use super::calibrate::{Calibration, Measured};
use super::watch::Watched;
use super::wire::{Client, Pending};
use super::{Evidence, Options, Unreachable};

/// The revision without a handshake.
pub const V2026: &str = McpRevision::V2026_07_28.text();
/// The legacy revision tried when `server/discover` gets no 2026-07-28 answer.
pub const V2025: &str = McpRevision::LATEST_LEGACY.text();

/// A started server, after the handshake.
pub struct Session {
    /// The raw client.
    pub client: Client,
    /// The revision spoken.
    pub version: String,
    /// Whether it is a legacy (handshake) revision.
    pub legacy: bool,
    /// How the revision was chosen.
    pub by: &'static str,
    /// The id of `initialize` (legacy eras).
    pub init_id: Option<Value>,
    /// The server's capabilities, from its `server/discover` or `initialize` answer.
    pub capabilities: Value,
    /// The options.
    pub options: Options,
    /// What the calibration found (set before the scenarios run).
    pub calibration: Option<Calibration>,
    /// Until when the server may still be working on a slow call already sent: each one's
    /// natural end, plus its slack.
    pub busy_until: Instant,
    /// The calls watched until the run ends: cancelled ones that must never be answered, and
    /// kept ones that must be.
    pub watched: Vec<Watched>,
    /// Whether slow calls were sent since the server was last seen quiet.
    busy: bool,
    next_id: u64,
}

/// A slow call sent.
pub struct SlowCall {
    /// Its request id.
    pub id: Value,
    /// Its response to come.
    pub pending: Pending,
    /// When it was sent.
    pub sent: Instant,
    /// Its `_meta.progressToken`.
    pub token: Value,
}

fn client_info() -> Value {
    json!({"name": "cancelkit-check", "version": env!("CARGO_PKG_VERSION")})
}

/// How long one HTTP request's exchange may last: as long as the calibration may wait for the
/// slow call, twice (an answer that comes late is still read), and the wait.
fn request_timeout(options: &Options) -> Duration {
    super::calibrate::LIMIT * 2 + options.timeout
}

impl Session {
    /// Starts `command` (or, with `--url`, connects to the Streamable HTTP endpoint) and
    /// completes the handshake, or says why not.
    pub async fn open(options: &Options, command: &[OsString]) -> Result<Session, Unreachable> {
        let (client, shown) = match &options.url {
            Some(url) => {
                let client = Client::connect(
                    url,
                    request_timeout(options),
                    &options.headers,
                    options.ca_file.as_deref(),
                )
                .map_err(|e| Unreachable(format!("cannot use {e}")))?;
                (client, url.clone())
            }
            None => {
                let shown = super::shown(command);
                let client = Client::spawn(command)
                    .map_err(|e| Unreachable(format!("cannot start `{shown}`: {e}")))?;
                (client, shown)
            }
        };
        let mut session = Session {
            client,
            version: String::new(),
            legacy: false,
            by: "server/discover",
            init_id: None,
            capabilities: Value::Null,
            options: options.clone(),
            calibration: None,
            busy_until: Instant::now(),
            watched: Vec::new(),
            busy: false,
            // ids 1 to 4, as numbers and strings, are left for the scenario that needs them
            next_id: 100,
        };
        match options.revision.as_deref() {
            None if session.discover().await? => {}
            None => session.initialize(V2025, "initialize").await?,
            Some(V2026) if session.discover().await? => session.by = "forced",
            Some(V2026) => {
                return Err(Unreachable(format!(
                    "`{shown}` does not answer server/discover with {V2026}"
                )));
            }
            Some(revision) => session.initialize(revision, "forced").await?,
        }
        Ok(session)
    }

    /// `server/discover`: whether the server speaks 2026-07-28.
    async fn discover(&mut self) -> Result<bool, Unreachable> {
        self.legacy = false;
        let mut ev = Evidence::default();
        let (_, mut pending) = self.call("server/discover", json!({}), &mut ev).await;
        let answer = pending.wait(self.options.timeout).await;
        if answer.is_none() && self.client.closed() {
            return Err(Unreachable(match self.client.failure() {
                Some(why) => why,
                None => "the server closed its stdout before answering".into(),
            }));
        }
        let speaks = answer.as_ref().is_some_and(|a| {
            a["result"]["supportedVersions"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v == V2026))
        });
        if let Some(answer) = answer.filter(|_| speaks) {
            self.version = V2026.into();
            self.capabilities = answer["result"]["capabilities"].clone();
        }
        Ok(speaks)
    }

    /// `initialize` with `revision`, then `notifications/initialized`; the server's answer
    /// names the revision spoken.
    async fn initialize(&mut self, revision: &str, by: &'static str) -> Result<(), Unreachable> {
        self.legacy = true;
        self.by = by;
        let mut ev = Evidence::default();
        let params =
            json!({"protocolVersion": revision, "capabilities": {}, "clientInfo": client_info()});
        let (id, mut pending) = self.call("initialize", params, &mut ev).await;
        let answer = pending.wait(self.options.timeout).await.ok_or_else(|| {
            Unreachable(match self.client.failure() {
                Some(why) => format!("no answer to initialize: {why}"),
                None => format!("no answer to initialize within {:?}", self.options.timeout),
            })
        })?;
        let version = answer["result"]["protocolVersion"]
            .as_str()
            .ok_or_else(|| Unreachable(format!("initialize was not accepted: {answer}")))?;
        self.version = version.to_owned();
        self.capabilities = answer["result"]["capabilities"].clone();
        self.init_id = Some(id);
        self.notify("notifications/initialized", json!({}), &mut ev)
            .await;
        Ok(())
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> Value {
        self.next_id += 1;
        json!(self.next_id)
    }

    /// Sends a request with a fresh id; its id and its response to come.
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        ev: &mut Evidence,
    ) -> (Value, Pending) {
        let id = self.next_id();
        let pending = self.call_as(id.clone(), method, params, ev).await;
        (id, pending)
    }

    /// Sends a request with the id given (a 2026-07-28 request gets its `_meta`). A failed
    /// write is noted and gives a response that never comes.
    pub async fn call_as(
        &self,
        id: Value,
        method: &str,
        mut params: Value,
        ev: &mut Evidence,
    ) -> Pending {
        if !self.legacy
            && let Some(object) = params.as_object_mut()
        {
            let meta = object.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(PROTOCOL_VERSION.into(), json!(V2026));
                // a scenario may declare capabilities (the tasks extension) for one request
                meta.entry(CLIENT_CAPABILITIES).or_insert_with(|| json!({}));
                meta.insert(CLIENT_INFO.into(), client_info());
            }
        }
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        ev.sent(&frame);
        match self.client.request(&id, &frame).await {
            Ok(pending) => pending,
            Err(e) => {
                ev.note(format!("cannot send {method}: {e}"));
                Pending::never()
            }
        }
    }

    /// Sends a notification (a failed write is noted, and over HTTP how the POST was
    /// answered).
    pub async fn notify(&self, method: &str, params: Value, ev: &mut Evidence) {
        let frame = json!({"jsonrpc": "2.0", "method": method, "params": params});
        ev.sent(&frame);
        match self.client.deliver(&frame).await {
            Ok(Some(how)) => ev.note(format!("{method} answered {how}")),
            Ok(None) => {}
            Err(e) => ev.note(format!("cannot send {method}: {e}")),
        }
    }

    /// Cancels with these params: sends `notifications/cancelled`, except over Streamable
    /// HTTP at 2026-07-28, where closing an in-flight request's response stream is its
    /// cancellation. A cancel naming no open stream there (an unknown, completed or malformed
    /// id) is still POSTed as the notification, to see that the server ignores it. True when
    /// the cancel closed a stream (nothing more of the request can be seen).
    pub async fn cancel(&self, params: Value, ev: &mut Evidence) -> bool {
        if !self.legacy
            && let Some(id) = params.get("requestId")
            && self.client.close_stream(id)
        {
            ev.note(format!(
                "closed the response stream of request {id} (2026-07-28 over HTTP: the cancel)"
            ));
            return true;
        }
        self.notify("notifications/cancelled", params, ev).await;
        false
    }

    /// The slow `tools/call`'s params, with `token` as its progress token if given.
    pub fn slow(&self, token: Option<&Value>) -> Value {
        let mut params = json!({"name": self.options.tool, "arguments": self.options.args});
        if let Some(token) = token {
            params["_meta"] = json!({ "progressToken": token });
        }
        params
    }

    /// Sends the slow call with `id` (a fresh one if `None`) and a progress token of its own;
    /// the server counts as busy until its natural end plus its slack.
    pub async fn call_slow_as(&mut self, id: Option<Value>, ev: &mut Evidence) -> SlowCall {
        let id = id.unwrap_or_else(|| self.next_id());
        let token = json!(format!("cancelkit-{id}"));
        let sent = Instant::now();
        let pending = self
            .call_as(id.clone(), "tools/call", self.slow(Some(&token)), ev)
            .await;
        if let Ok(m) = self.usable() {
            let end = sent + m.duration + m.slack();
            self.busy_until = self.busy_until.max(end);
        }
        self.busy = true;
        SlowCall {
            id,
            pending,
            sent,
            token,
        }
    }

    /// Sends the slow call with a fresh id.
    pub async fn call_slow(&mut self, ev: &mut Evidence) -> SlowCall {
        self.call_slow_as(None, ev).await
    }

    /// The slow call as calibrated, or why there is none to use.
    pub fn usable(&self) -> Result<Measured, String> {
        match &self.calibration {
            Some(c) => c.slow.clone(),
            None => Err("the slow call was not calibrated".into()),
        }
    }

    /// Waits until the server is quiet, so that a scenario starts from there: past every slow
    /// call's natural end and slack, and then, if slow calls were sent since it was last seen
    /// quiet, until it answers the fast call (a server that works through a backlog, such as a
    /// bounded pool still running calls whose cancels it ignored, answers it only once the
    /// backlog has gone; at most the calibration's limit).
    pub async fn quiesce(&mut self) {
        tokio::time::sleep_until(self.busy_until.into()).await;
        if std::mem::take(&mut self.busy) {
            let (method, params) = self.fast();
            let (_, mut probe) = self.call(method, params, &mut Evidence::default()).await;
            probe.wait(super::calibrate::LIMIT).await;
        }
    }

    /// Watches `call` until the run ends: a cancelled call (`expect_answer` false) must never
    /// be answered; a kept one must be. Judged against check `check` by [`super::watch`].
    pub fn watch(&mut self, check: &'static str, call: SlowCall, expect_answer: bool) {
        if self.watched.len() < super::watch::MAX_WATCHED {
            self.watched.push(Watched {
                check,
                call,
                expect_answer,
            });
        }
    }

    /// The fast call: the `--fast-tool`, or `tools/list`.
    pub fn fast(&self) -> (&'static str, Value) {
        match &self.options.fast_tool {
            Some(tool) => (
                "tools/call",
                json!({"name": tool, "arguments": self.options.fast_args}),
            ),
            None => ("tools/list", json!({})),
        }
    }

    /// Sends the fast call and waits for its answer.
    pub async fn fast_call(&mut self, ev: &mut Evidence) -> Option<Value> {
        let (method, params) = self.fast();
        let (_, mut pending) = self.call(method, params, ev).await;
        let answer = pending.wait(self.options.timeout).await;
        match &answer {
            Some(frame) => ev.got(frame),
            None => ev.note(format!("no answer within {:?}", self.options.timeout)),
        }
        answer
    }

    /// Whether the server still serves: a `ping` (legacy eras) and the fast call are answered.
    pub async fn alive(&mut self, ev: &mut Evidence) -> Result<(), String> {
        if self.legacy {
            let (_, mut ping) = self.call("ping", json!({}), ev).await;
            match ping.wait(self.options.timeout).await {
                Some(frame) => ev.got(&frame),
                None => return Err("the ping got no answer".into()),
            }
        }
        match self.fast_call(ev).await {
            Some(_) => Ok(()),
            None => Err(format!("the fast call ({}) got no answer", self.fast().0)),
        }
    }
}
