//! MCP 2025-11-25 sessions of `/mcp`: created by `initialize`, named by `Mcp-Session-Id`,
//! owned by the user who created them, ended by `DELETE` or after an hour unused.
//!
//! Bound: at most `max_sessions` at once. At the bound, sessions unused for
//! [`IDLE_EXPIRY`] are ended first; if none is, `initialize` is refused with 429 (retry later)
//! rather than ending a session in use.
//!
//! A session also remembers, briefly, the `notifications/cancelled` that named a request it has
//! not seen yet: on Streamable HTTP the notification and the request travel in separate POSTs,
//! so the cancel can overtake the call it cancels (the TypeScript SDK's immediate abort does).
//! At most [`EARLY_CANCELS`] are kept, each for [`EARLY_CANCEL_TTL`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cancelkit::protocol::jsonrpc::RequestId;
use serde_json::Value;
use tokio::sync::mpsc;

/// A session unused this long is ended.
pub const IDLE_EXPIRY: Duration = Duration::from_secs(3600);
/// How many messages wait for a session's GET stream; beyond, the oldest undelivered result is
/// dropped with a warning (its client did not keep a stream open to receive it).
pub const GET_STREAM_BUFFER: usize = 256;
/// How long a cancel for a request the session has not seen yet waits for it.
pub const EARLY_CANCEL_TTL: Duration = Duration::from_secs(10);
/// How many such cancels a session keeps (the oldest are forgotten first).
pub const EARLY_CANCELS: usize = 64;

/// How many of its latest `tools/call` ids a session remembers, so a cancel for a call that
/// already came (and finished) is not kept for a later call that reuses the id.
pub const SEEN_CALLS: usize = 256;

/// The cancels waiting for their call, and the ids of the calls that came.
#[derive(Debug, Default)]
struct Early {
    cancels: VecDeque<EarlyCancel>,
    seen: VecDeque<RequestId>,
}

/// A `notifications/cancelled` whose request has not arrived (yet).
#[derive(Debug)]
struct EarlyCancel {
    at: Instant,
    id: RequestId,
    reason: Option<String>,
}

/// One session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub id: Arc<str>,
    /// The subject of the token that created it; nobody else may use it.
    pub owner: Arc<str>,
    /// The protocol version agreed at `initialize`.
    pub version: String,
    last_seen: Mutex<Instant>,
    get_stream: Mutex<Option<mpsc::Sender<Value>>>,
    early_cancels: Mutex<Early>,
}

impl Session {
    fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// Opens the session's GET stream (replacing an earlier one, which ends).
    pub fn open_stream(&self) -> mpsc::Receiver<Value> {
        let (tx, rx) = mpsc::channel(GET_STREAM_BUFFER);
        *self.get_stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        rx
    }

    /// A client's cancel of request `id`: `cancel` tries the run; if there is none (yet), and
    /// no call with that id came lately (then it has ended: MCP ignores the cancel), the cancel
    /// is kept for [`Session::take_early_cancel`]. Serialized with it, so a call that
    /// registers while the cancel is being handled sees it one way or the other.
    pub fn cancel_or_remember(
        &self,
        id: &RequestId,
        reason: Option<String>,
        cancel: impl FnOnce(Option<String>) -> bool,
    ) {
        let mut early = self.early_cancels.lock().unwrap_or_else(|e| e.into_inner());
        if cancel(reason.clone()) || early.seen.contains(id) {
            return;
        }
        let early = &mut early.cancels;
        early.retain(|c| c.at.elapsed() < EARLY_CANCEL_TTL);
        if early.len() >= EARLY_CANCELS {
            early.pop_front();
        }
        early.push_back(EarlyCancel {
            at: Instant::now(),
            id: id.clone(),
            reason,
        });
    }

    /// The cancel that arrived for `id` before its call did, if any (call it once the call's run
    /// is registered; the id is remembered as one that came): `Some(reason)`.
    pub fn take_early_cancel(&self, id: &RequestId) -> Option<Option<String>> {
        let mut early = self.early_cancels.lock().unwrap_or_else(|e| e.into_inner());
        if early.seen.len() >= SEEN_CALLS {
            early.seen.pop_front();
        }
        early.seen.push_back(id.clone());
        let cancels = &mut early.cancels;
        cancels.retain(|c| c.at.elapsed() < EARLY_CANCEL_TTL);
        let index = cancels.iter().position(|c| c.id == *id)?;
        cancels.remove(index).map(|c| c.reason)
    }

    /// Sends a message on the GET stream, if one is open; returns whether it was queued.
    pub fn push(&self, message: Value) -> bool {
        let stream = self
            .get_stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        stream.is_some_and(|s| s.try_send(message).is_ok())
    }
}

/// Why a session could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManySessions;

/// Every session on this worker.
#[derive(Debug)]
pub struct Sessions {
    map: Mutex<HashMap<Arc<str>, Arc<Session>>>,
    max: usize,
}

impl Sessions {
    /// At most `max` sessions at once.
    pub fn new(max: usize) -> Sessions {
        Sessions {
            map: Mutex::new(HashMap::new()),
            max,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a session for `owner`.
    pub fn create(&self, owner: &Arc<str>, version: &str) -> Result<Arc<Session>, TooManySessions> {
        let mut map = self.lock();
        if map.len() >= self.max {
            map.retain(|_, s| s.idle_for() < IDLE_EXPIRY);
            if map.len() >= self.max {
                return Err(TooManySessions);
            }
        }
        let id: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string());
        let session = Arc::new(Session {
            id: Arc::clone(&id),
            owner: Arc::clone(owner),
            version: version.to_owned(),
            last_seen: Mutex::new(Instant::now()),
            get_stream: Mutex::new(None),
            early_cancels: Mutex::new(Early::default()),
        });
        map.insert(id, Arc::clone(&session));
        Ok(session)
    }

    /// The session `id` if `user` owns it (another user's session is not found, so nothing
    /// about it is revealed).
    pub fn get(&self, id: &str, user: &str) -> Option<Arc<Session>> {
        let map = self.lock();
        let session = map.get(id)?;
        if *session.owner != *user || session.idle_for() >= IDLE_EXPIRY {
            return None;
        }
        session.touch();
        Some(Arc::clone(session))
    }

    /// Ends the session `id` if `user` owns it.
    pub fn remove(&self, id: &str, user: &str) -> Option<Arc<Session>> {
        let mut map = self.lock();
        if map.get(id).is_some_and(|s| *s.owner == *user) {
            map.remove(id)
        } else {
            None
        }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_belong_to_their_owner_and_are_bounded() {
        let sessions = Sessions::new(2);
        let alice: Arc<str> = Arc::from("alice");
        let a = sessions.create(&alice, "2025-11-25").unwrap();
        assert!(sessions.get(&a.id, "alice").is_some());
        assert!(sessions.get(&a.id, "bob").is_none());
        assert!(sessions.remove(&a.id, "bob").is_none());
        sessions.create(&alice, "2025-11-25").unwrap();
        assert_eq!(
            sessions.create(&alice, "2025-11-25").unwrap_err(),
            TooManySessions
        );
        assert!(sessions.remove(&a.id, "alice").is_some());
        assert!(sessions.create(&alice, "2025-11-25").is_ok());
    }

    #[test]
    fn a_cancel_that_overtakes_its_call_waits_for_it() {
        let sessions = Sessions::new(1);
        let session = sessions.create(&Arc::from("alice"), "2025-11-25").unwrap();
        session.cancel_or_remember(&RequestId::Number(7), Some("stop".into()), |_| false);
        // Typed: "7" is another request.
        assert_eq!(
            session.take_early_cancel(&RequestId::String("7".into())),
            None
        );
        assert_eq!(
            session.take_early_cancel(&RequestId::Number(7)),
            Some(Some("stop".into()))
        );
        assert_eq!(session.take_early_cancel(&RequestId::Number(7)), None);
        // A cancel that found its run is not kept.
        session.cancel_or_remember(&RequestId::Number(8), None, |_| true);
        assert_eq!(session.take_early_cancel(&RequestId::Number(8)), None);
        // A cancel for a call that already came (and ended) is not kept for a reuse of its id.
        assert_eq!(session.take_early_cancel(&RequestId::Number(9)), None);
        session.cancel_or_remember(&RequestId::Number(9), None, |_| false);
        assert_eq!(session.take_early_cancel(&RequestId::Number(9)), None);
        for n in 0..(EARLY_CANCELS as i64 + 1) {
            session.cancel_or_remember(&RequestId::Number(100 + n), None, |_| false);
        }
        assert_eq!(session.take_early_cancel(&RequestId::Number(100)), None);
        assert!(session.take_early_cancel(&RequestId::Number(101)).is_some());
    }
}
