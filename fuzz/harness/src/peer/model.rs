//! The model of what the peer must write for an input: which ids are owed answers, which may
//! get one, how many `null`-id errors, and the MCP era in force.

use super::reading::{id_over_bound, stamped, token_over_bound};
use super::*;

/// Where a request id stands in the registry, as far as the model can tell.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum State {
    /// Certainly not registered.
    Free,
    /// Maybe registered by a request that answers at once (gone by the next pause unless
    /// the concurrency limit holds it).
    Short,
    /// Maybe registered by a request that may never finish.
    Unsure,
    /// Certainly registered by a slow request.
    Held {
        peer_cancelled: bool,
        session: Option<String>,
        session_cancelled: bool,
    },
}

#[derive(Debug)]
pub(super) struct Expect {
    /// Responses certainly owed.
    pub(super) owed: u64,
    /// Further responses that may come.
    pub(super) maybe: u64,
    pub(super) state: State,
}

impl Default for Expect {
    fn default() -> Self {
        Expect {
            owed: 0,
            maybe: 0,
            state: State::Free,
        }
    }
}

/// How the peer treats a request method.
pub(super) enum Kind {
    /// Answered on the reader, never registered (unknown methods, `tasks/get`, `tasks/cancel`).
    Quick,
    /// Registered; its handler answers at once.
    Short,
    /// Registered; refused in its task before its handler (MCP 2026-07-28 without `_meta`):
    /// answered at once even under the concurrency limit.
    Refused,
    /// Registered; its handler never finishes by itself.
    Slow { session: Option<String> },
    /// Registered; may or may not finish (`tasks/result`).
    Unsure,
}

pub(super) struct Model {
    pub(super) protocol: Protocol,
    pub(super) answers: bool,
    pub(super) limited: bool,
    pub(super) ids: HashMap<RequestId, Expect>,
    /// `null`-id errors owed.
    pub(super) null_owed: u64,
    /// Params of the `note` and `note/slow` notifications sent, in order.
    pub(super) notes: Vec<Value>,
    /// The MCP era in force (fixed unless the protocol is negotiated).
    pub(super) era: Era,
    /// Slow requests registered in the current chunk while the era was undecided: their tasks
    /// may start after a later frame of the chunk decides 2026-07-28.
    pub(super) undecided_held: Vec<RequestId>,
    /// Ids of requests read at 2026-07-28, and of those read before it (or in another era).
    pub(super) modern_ids: HashSet<RequestId>,
    pub(super) other_ids: HashSet<RequestId>,
}

/// An MCP connection's era, as the model follows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Era {
    /// Negotiated, nothing decided yet (served as 2025-11-25).
    Undecided,
    /// A handshake revision, fixed or chosen by `initialize` (and every other protocol).
    Legacy,
    /// MCP 2026-07-28.
    Modern,
}

impl Model {
    pub(super) fn new(protocol: Protocol, answers: bool, limited: bool) -> Self {
        Model {
            protocol,
            answers,
            limited,
            ids: HashMap::new(),
            null_owed: 0,
            notes: Vec::new(),
            era: if protocol == Protocol::Mcp(McpRevision::Negotiated) {
                Era::Undecided
            } else {
                Era::Legacy
            },
            undecided_held: Vec::new(),
            modern_ids: HashSet::new(),
            other_ids: HashSet::new(),
        }
    }

    pub(super) fn negotiated(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::Negotiated)
    }

    /// Whether `tasks/get` and `tasks/cancel` are answered on the reader.
    pub(super) fn tasks(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::V2025_11_25) || self.negotiated()
    }

    /// Whether `tasks/result` is served by the tasks (2025-11-25, or maybe so).
    pub(super) fn task_result(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::V2025_11_25)
            || (self.negotiated() && self.era != Era::Modern)
    }

    /// A negotiated connection learns its era from the first telling request (on the reader,
    /// before anything else is done with it).
    pub(super) fn detect(&mut self, method: &str, params: Option<&str>) {
        if self.era != Era::Undecided {
            return;
        }
        if method == "initialize" {
            self.era = Era::Legacy;
        } else if stamped(params) {
            self.era = Era::Modern;
            for id in std::mem::take(&mut self.undecided_held) {
                let Some(expect) = self.ids.get_mut(&id) else {
                    continue;
                };
                if matches!(
                    expect.state,
                    State::Held {
                        peer_cancelled: false,
                        session_cancelled: false,
                        ..
                    }
                ) {
                    // Its task may start now, and be refused for want of `_meta`.
                    expect.maybe += 1;
                    expect.state = State::Unsure;
                }
            }
        }
    }

    pub(super) fn kind(&self, method: &str, params: Option<&str>) -> Kind {
        let routed = matches!(
            method,
            "echo"
                | "initialize"
                | "panic"
                | "tools/call"
                | "server/discover"
                | "slow"
                | "coop"
                | "session/prompt"
        );
        match self.era {
            Era::Modern if matches!(method, "initialize" | "ping") => return Kind::Quick,
            Era::Modern | Era::Undecided if method == "server/discover" && !stamped(params) => {
                return Kind::Quick;
            }
            Era::Modern if routed && !stamped(params) => return Kind::Refused,
            _ => {}
        }
        match method {
            "tasks/get" | "tasks/cancel" if self.tasks() => Kind::Quick,
            "tasks/result" if self.task_result() => Kind::Unsure,
            "echo" | "initialize" | "panic" | "tools/call" | "server/discover" => Kind::Short,
            "slow" | "coop" => Kind::Slow { session: None },
            "session/prompt" => Kind::Slow {
                session: (self.protocol == Protocol::Acp)
                    .then(|| {
                        let params: Value = serde_json::from_str(params?).ok()?;
                        Some(params.get("sessionId")?.as_str()?.to_owned())
                    })
                    .flatten(),
            },
            _ => Kind::Quick,
        }
    }

    pub(super) fn frames(&mut self, frames: &[DecodedFrame]) {
        self.undecided_held.clear();
        for frame in frames {
            match frame {
                Err(_) => self.null_owed += 1,
                Ok(bytes) => self.message(classify(bytes)),
            }
        }
    }

    pub(super) fn message(&mut self, message: Classified) {
        match message {
            // An id over the bound: refused at once to `null`, before anything else looks at it.
            Classified::Request { id, .. } if id_over_bound(&id) => self.null_owed += 1,
            // An MCP progress token over the bound: refused at once under the request's id.
            Classified::Request { id, params, .. }
                if matches!(self.protocol, Protocol::Mcp(_))
                    && token_over_bound(params.as_deref()) =>
            {
                self.ids.entry(id).or_default().owed += 1;
            }
            Classified::Request { id, method, params } => {
                self.detect(&method, params.as_deref());
                if self.era == Era::Modern {
                    self.modern_ids.insert(id.clone());
                } else {
                    self.other_ids.insert(id.clone());
                }
                let kind = self.kind(&method, params.as_deref());
                self.request(id, kind);
            }
            Classified::Notification { method, params } => {
                self.notification(&method, params.as_deref());
            }
            Classified::Invalid { id: Some(id), .. } if id_over_bound(&id) => self.null_owed += 1,
            Classified::Invalid { id: Some(id), .. } => self.ids.entry(id).or_default().owed += 1,
            Classified::Invalid { id: None, .. } => self.null_owed += 1,
            Classified::Response { .. } | Classified::Ignored(_) => {}
        }
    }

    pub(super) fn request(&mut self, id: RequestId, kind: Kind) {
        let limited = self.limited;
        let undecided = self.era == Era::Undecided;
        let expect = self.ids.entry(id.clone()).or_default();
        let held_uncancelled = matches!(
            expect.state,
            State::Held {
                peer_cancelled: false,
                session_cancelled: false,
                ..
            }
        );
        match kind {
            Kind::Quick => expect.owed += 1,
            // A taken id is refused at once (-32600).
            _ if held_uncancelled => expect.owed += 1,
            Kind::Refused => {
                expect.owed += 1;
                expect.state = match expect.state {
                    State::Free | State::Short => State::Short,
                    _ => State::Unsure,
                };
            }
            Kind::Short => {
                // One answer either way: refused, or the handler's (or the created task's).
                if limited {
                    expect.maybe += 1;
                } else {
                    expect.owed += 1;
                }
                expect.state = match expect.state {
                    State::Free | State::Short => State::Short,
                    _ => State::Unsure,
                };
            }
            Kind::Slow { session } if expect.state == State::Free => {
                expect.state = State::Held {
                    peer_cancelled: false,
                    session,
                    session_cancelled: false,
                };
                if undecided {
                    self.undecided_held.push(id);
                }
            }
            Kind::Slow { .. } | Kind::Unsure => {
                expect.maybe += 1;
                expect.state = State::Unsure;
            }
        }
    }

    pub(super) fn notification(&mut self, method: &str, params: Option<&str>) {
        if let Some(cancel) = self.cancel_target(method, params) {
            if let Some(id) = cancel {
                self.cancel(id);
            }
            return;
        }
        if self.protocol == Protocol::Acp && method == acp::SessionCancelParams::METHOD {
            let session =
                serde_json::from_str::<acp::SessionCancelParams>(params.unwrap_or("null"));
            if let Ok(session) = session {
                self.cancel_session(&session.session_id);
            }
        }
        if matches!(method, "note" | "note/slow") {
            let value = params.map_or(Some(Value::Null), |p| serde_json::from_str(p).ok());
            self.notes.extend(value);
        }
    }

    /// `Some` for this protocol's cancel notifications: `Some(id)` when it names a request.
    pub(super) fn cancel_target(
        &self,
        method: &str,
        params: Option<&str>,
    ) -> Option<Option<RequestId>> {
        fn read<T: serde::de::DeserializeOwned>(params: Option<&str>) -> Option<T> {
            serde_json::from_str(params.unwrap_or("null")).ok()
        }
        Some(match (self.protocol, method) {
            (Protocol::Acp, acp::CancelRequestParams::METHOD) => {
                read::<acp::CancelRequestParams>(params).and_then(|p| p.request_id)
            }
            (Protocol::Acp | Protocol::Lsp, acp::DraftCancelRequestParams::METHOD) => {
                read::<acp::DraftCancelRequestParams>(params).map(|p| p.id)
            }
            (Protocol::Mcp(_), mcp::v2025_11_25::CancelledNotificationParams::METHOD) => {
                read::<mcp::v2025_11_25::CancelledNotificationParams>(params)
                    .and_then(|p| p.request_id)
            }
            _ => return None,
        })
    }

    pub(super) fn cancel(&mut self, id: RequestId) {
        let answers = self.answers;
        let Some(expect) = self.ids.get_mut(&id) else {
            return;
        };
        match &mut expect.state {
            State::Free => {}
            State::Short | State::Unsure => {
                // A quick request may be cancelled before it answered; without answers for
                // cancelled requests, its owed answer may not come.
                if !answers && expect.owed > 0 {
                    expect.owed -= 1;
                    expect.maybe += 1;
                }
            }
            State::Held {
                peer_cancelled: true,
                ..
            } => {}
            State::Held {
                peer_cancelled,
                session_cancelled,
                ..
            } => {
                if answers {
                    if !*session_cancelled {
                        expect.owed += 1;
                    }
                    *peer_cancelled = true;
                } else {
                    if *session_cancelled {
                        // Its stopReason answer may or may not have gone out first.
                        expect.owed -= 1;
                        expect.maybe += 1;
                    }
                    // Forgotten at once: never answered.
                    expect.state = State::Free;
                }
            }
        }
    }

    pub(super) fn cancel_session(&mut self, session_id: &str) {
        for expect in self.ids.values_mut() {
            if let State::Held {
                peer_cancelled,
                session: Some(session),
                session_cancelled,
            } = &mut expect.state
                && session == session_id
                && !*session_cancelled
            {
                if !*peer_cancelled {
                    expect.owed += 1;
                }
                *session_cancelled = true;
            }
        }
    }

    /// After a pause: cancelled slow requests have answered and left the registry, and so have
    /// quick ones unless the concurrency limit may hold them.
    pub(super) fn settle(&mut self) {
        for expect in self.ids.values_mut() {
            match expect.state {
                State::Held {
                    peer_cancelled,
                    session_cancelled,
                    ..
                } if peer_cancelled || session_cancelled => expect.state = State::Free,
                State::Short if !self.limited => expect.state = State::Free,
                _ => {}
            }
        }
    }

    /// The connection closes: slow requests are cancelled, and may or may not be answered in
    /// the (zero) grace period.
    pub(super) fn close(&mut self) {
        for expect in self.ids.values_mut() {
            if matches!(
                expect.state,
                State::Held {
                    peer_cancelled: false,
                    session_cancelled: false,
                    ..
                }
            ) {
                expect.maybe += 1;
            }
        }
    }

    pub(super) fn check(&mut self, output: &Output, settle: bool, when: &str) {
        for (id, &count) in &output.responses {
            let (owed, maybe) = self
                .ids
                .get(id)
                .map_or((0, 0), |expect| (expect.owed, expect.maybe));
            assert!(
                count <= owed + maybe,
                "{when}: {count} responses for id {id}, at most {owed} + {maybe} expected"
            );
        }
        for (id, expect) in &self.ids {
            let count = output.responses.get(id).copied().unwrap_or(0);
            assert!(
                count >= expect.owed,
                "{when}: {count} responses for id {id}, {} owed",
                expect.owed
            );
        }
        for id in &output.untyped_results {
            assert!(
                !self.modern_ids.contains(id) || self.other_ids.contains(id),
                "{when}: an MCP 2026-07-28 object result without `resultType`, id {id}"
            );
        }
        assert_eq!(
            output.null_errors, self.null_owed,
            "{when}: null-id errors vs rejected or unreadable frames"
        );
        if settle {
            self.settle();
        }
    }
}
