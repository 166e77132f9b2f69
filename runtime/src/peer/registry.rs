//! In-flight inbound requests of one connection, keyed by channel and id (plus a generation,
//! since a peer may reuse an id once its request is answered). A byte stream has one channel
//! (0); a transport with channels of its own (one per 2026-07-28 HTTP request) keys each
//! request by its channel, so clients that know nothing of each other may use the same ids.

use std::collections::HashMap;
use std::sync::Mutex;

use cancelkit_protocol::jsonrpc::RequestId;

use crate::sync::lock;
use crate::{CancelReason, Canceller};

#[derive(Debug)]
struct Entry {
    generation: u64,
    canceller: Canceller,
    /// `initialize` can never be cancelled.
    cancellable: bool,
    /// The peer asked to cancel it (a second cancel is ignored).
    peer_cancelled: bool,
    /// ACP `session/prompt`: the session it runs a turn of.
    session: Option<Box<str>>,
    /// ACP: cancelled through `session/cancel` (answered with `stopReason: "cancelled"`).
    session_cancelled: bool,
}

/// What a finished request's entry recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finished {
    /// ACP: ended by `session/cancel`.
    pub session_cancelled: bool,
    /// The peer cancelled it (it is answered all the same: ACP, LSP, MCP gateways).
    pub peer_cancelled: bool,
}

/// The outcome of a cancel notification.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cancel {
    Cancelled,
    AlreadyCancelled,
    NotCancellable,
    Unknown,
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<Entries>,
    generations: std::sync::atomic::AtomicU64,
}

/// The connection's own requests (channel 0) keyed by id alone, as a byte stream has nothing
/// else; requests on the transport's channels keyed by both.
#[derive(Debug, Default)]
struct Entries {
    own: HashMap<RequestId, Entry>,
    channels: HashMap<Key, Entry>,
}

impl Entries {
    // Channel 0 is looked up without copying the id (an owned key only for the others).
    fn get(&self, (channel, id): (u64, &RequestId)) -> Option<&Entry> {
        match channel {
            0 => self.own.get(id),
            _ => self.channels.get(&(channel, id.clone())),
        }
    }

    fn get_mut(&mut self, (channel, id): (u64, &RequestId)) -> Option<&mut Entry> {
        match channel {
            0 => self.own.get_mut(id),
            _ => self.channels.get_mut(&(channel, id.clone())),
        }
    }

    fn remove(&mut self, (channel, id): (u64, &RequestId)) -> Option<Entry> {
        match channel {
            0 => self.own.remove(id),
            _ => self.channels.remove(&(channel, id.clone())),
        }
    }

    fn contains(&self, (channel, id): (u64, &RequestId)) -> bool {
        match channel {
            0 => self.own.contains_key(id),
            _ => self.channels.contains_key(&(channel, id.clone())),
        }
    }

    fn insert(&mut self, key: Key, entry: Entry) {
        match key.0 {
            0 => self.own.insert(key.1, entry),
            _ => self.channels.insert(key, entry),
        };
    }
}

/// A request's key: its channel and its id.
pub(crate) type Key = (u64, RequestId);

/// A request whose id is already in flight.
#[derive(Debug)]
pub(crate) struct Duplicate;

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        lock(&self.entries)
    }

    /// Registers a request before its handler starts; returns its generation.
    pub(crate) fn insert(
        &self,
        id: Key,
        canceller: Canceller,
        cancellable: bool,
        session: Option<String>,
    ) -> Result<u64, Duplicate> {
        let mut entries = self.lock();
        if entries.contains((id.0, &id.1)) {
            return Err(Duplicate);
        }
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        entries.insert(
            id,
            Entry {
                generation,
                canceller,
                cancellable,
                peer_cancelled: false,
                session: session.map(String::into_boxed_str),
                session_cancelled: false,
            },
        );
        Ok(generation)
    }

    /// Cancels the request `id` at the peer's request.
    ///
    /// With `forget`, for protocols where a cancelled request gets no response (MCP), the entry
    /// goes at once: the peer considers the id free again, and its handler, finishing later,
    /// finds no entry and sends nothing.
    pub(crate) fn cancel(
        &self,
        id: (u64, &RequestId),
        reason: CancelReason,
        forget: bool,
    ) -> Cancel {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id) else {
            return Cancel::Unknown;
        };
        if !entry.cancellable {
            return Cancel::NotCancellable;
        }
        if entry.peer_cancelled {
            return Cancel::AlreadyCancelled;
        }
        entry.peer_cancelled = true;
        entry.canceller.cancel(reason);
        if forget {
            entries.remove(id);
        }
        Cancel::Cancelled
    }

    /// Cancels the request `id` from our side (an operator, an HTTP API): recorded with
    /// `reason`, never forgotten, since the peer still expects an answer.
    pub(crate) fn cancel_ours(&self, id: (u64, &RequestId), reason: CancelReason) -> Cancel {
        let entries = self.lock();
        let Some(entry) = entries.get(id) else {
            return Cancel::Unknown;
        };
        if !entry.cancellable {
            return Cancel::NotCancellable;
        }
        if entry.canceller.is_cancelled() {
            return Cancel::AlreadyCancelled;
        }
        entry.canceller.cancel(reason);
        Cancel::Cancelled
    }

    /// Cancels every prompt turn of `session` (ACP `session/cancel`); returns how many.
    pub(crate) fn cancel_session(&self, session: &str) -> usize {
        let mut entries = self.lock();
        let entries = &mut *entries;
        let mut cancelled = 0;
        for entry in entries
            .own
            .values_mut()
            .chain(entries.channels.values_mut())
        {
            if entry.session.as_deref() == Some(session) && !entry.session_cancelled {
                entry.session_cancelled = true;
                entry
                    .canceller
                    .cancel(CancelReason::Peer(Some("session/cancel".into())));
                cancelled += 1;
            }
        }
        cancelled
    }

    /// Removes a finished request; `None` if its entry is already gone (cancelled with
    /// `forget`, its id possibly reused since): then no response is owed.
    pub(crate) fn finish(&self, id: (u64, &RequestId), generation: u64) -> Option<Finished> {
        let mut entries = self.lock();
        match entries.get(id) {
            Some(entry) if entry.generation == generation => {
                let entry = entries.remove(id).expect("present");
                Some(Finished {
                    session_cancelled: entry.session_cancelled,
                    peer_cancelled: entry.peer_cancelled,
                })
            }
            _ => None,
        }
    }

    /// How many requests are in flight (registered and not yet answered).
    pub(crate) fn len(&self) -> usize {
        let entries = self.lock();
        entries.own.len() + entries.channels.len()
    }
}
