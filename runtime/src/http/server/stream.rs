//! One response stream of the server: the events a request (or a session's `GET` stream) has
//! produced, the live connection they go out on, and the replay buffer that lets a 2025-11-25
//! client resume the stream after it was cut.
//!
//! Nothing here waits for a client: events are handed to the live connection with `try_send`,
//! and a connection that cannot take them (its client stopped reading: [`LIVE_QUEUE`] events
//! or [`StreamLimits::unread_bytes`] bytes waiting) is dropped. What a dropped connection
//! missed is still in the replay buffer, for a `GET` with `Last-Event-ID`.
//!
//! The replay buffer is bounded in events and in bytes, per stream and per session
//! ([`SessionBytes`]): the oldest events go first, never the response that ends the stream —
//! it is owed, and kept even when it alone is over the bounds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

pub(super) use super::body::{BodyOptions, body, parse_event_id};

/// Events a live connection may have waiting before it is dropped as not reading.
pub(super) const LIVE_QUEUE: usize = 256;

/// The bounds on what a connection's streams hold.
#[derive(Debug, Clone)]
pub(super) struct StreamLimits {
    /// Events each resumable stream keeps for replay (0: streams are not resumable).
    pub(super) replay_events: usize,
    /// Bytes each resumable stream keeps for replay.
    pub(super) replay_bytes: usize,
    /// Bytes a live connection may have waiting before it is dropped as not reading (an event
    /// larger than this still goes to a connection with nothing waiting).
    pub(super) unread_bytes: usize,
    /// The bytes the replay buffers of all the connection's streams hold together.
    pub(super) session: Arc<SessionBytes>,
}

/// The bytes held by the replay buffers of one session's streams, and their bound: when they
/// are over it, a stream that gets an event drops its own oldest events (never its response)
/// until they are not, or it has none left to drop.
#[derive(Debug)]
pub(super) struct SessionBytes {
    held: AtomicUsize,
    max: usize,
}

impl SessionBytes {
    /// A session's share, bounded by `max` bytes.
    pub(super) fn new(max: usize) -> Arc<SessionBytes> {
        Arc::new(SessionBytes {
            held: AtomicUsize::new(0),
            max,
        })
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.held.load(Ordering::Relaxed) > self.max
    }

    fn add(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// What one event carries.
#[derive(Debug, Clone)]
pub(super) struct Event {
    /// Its number on its stream, from 1 (0 is the priming event).
    pub(super) seq: u64,
    /// The JSON-RPC message.
    pub(super) data: Bytes,
    /// Whether it is the response that ends the stream.
    pub(super) last: bool,
}

/// A stream's state; see the [module documentation](self).
#[derive(Debug)]
pub(super) struct ResponseStream {
    /// Its number within the session: the first part of its event ids.
    pub(super) id: u64,
    replay_events: usize,
    replay_bytes: usize,
    unread_bytes: usize,
    session: Arc<SessionBytes>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    next_seq: u64,
    /// The newest events, oldest first; `None` when the stream is not resumable.
    replay: Option<VecDeque<Event>>,
    /// The bytes of the events in `replay` (counted in the session's too).
    replay_held: usize,
    live: Option<Live>,
    /// The newest event handed to a live connection.
    sent_up_to: u64,
    /// The response was sent: nothing follows.
    finished: bool,
    /// Its request was cancelled: it ended without a response, and owes nothing.
    cancelled: bool,
}

/// Why an attach failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AttachError {
    /// The events after the one asked for are no longer all in the buffer.
    Evicted,
    /// The stream has ended and owes nothing after the event asked for: its request was
    /// cancelled, or its response is that event or one before it.
    Ended,
}

/// The sending side of a live connection, with the bytes of the events it has waiting.
#[derive(Debug)]
struct Live {
    tx: mpsc::Sender<Event>,
    queued: Arc<AtomicUsize>,
}

impl Live {
    /// Hands `event` to the connection; `false` if the connection must be dropped (with a
    /// warning when it is because its client does not read).
    fn offer(&self, event: Event, unread_bytes: usize, stream: u64) -> bool {
        let size = event.data.len();
        // Counted before it is sent, so the reader never takes away more than was added.
        let before = self.queued.fetch_add(size, Ordering::Relaxed);
        let not_reading = if before > 0 && before.saturating_add(size) > unread_bytes {
            true
        } else {
            match self.tx.try_send(event) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        };
        self.queued.fetch_sub(size, Ordering::Relaxed);
        if not_reading {
            tracing::warn!(
                stream,
                unread_bytes = before,
                "a client is not reading its event stream; dropped the connection"
            );
        }
        false
    }
}

/// The receiving side of a live connection: its events, as they come.
#[derive(Debug)]
pub(super) struct Events {
    rx: mpsc::Receiver<Event>,
    queued: Arc<AtomicUsize>,
}

impl Events {
    fn new() -> (Live, Events) {
        let (tx, rx) = mpsc::channel(LIVE_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let live = Live {
            tx,
            queued: Arc::clone(&queued),
        };
        (live, Events { rx, queued })
    }

    /// A connection that gets nothing: it ends at once.
    fn ended() -> Events {
        Events::new().1
    }

    fn took(&self, event: Option<Event>) -> Option<Event> {
        let event = event?;
        self.queued.fetch_sub(event.data.len(), Ordering::Relaxed);
        Some(event)
    }

    /// The next event; `None` once the stream has ended for this connection.
    pub(super) async fn recv(&mut self) -> Option<Event> {
        let event = self.rx.recv().await;
        self.took(event)
    }

    /// The next event if one is waiting.
    pub(super) fn try_recv(&mut self) -> Option<Event> {
        let event = self.rx.try_recv().ok();
        self.took(event)
    }
}

impl ResponseStream {
    /// A stream within `limits`; `resumable`: it keeps events for replay.
    pub(super) fn new(id: u64, limits: &StreamLimits, resumable: bool) -> ResponseStream {
        let replay_events = if resumable { limits.replay_events } else { 0 };
        ResponseStream {
            id,
            replay_events,
            replay_bytes: limits.replay_bytes,
            unread_bytes: limits.unread_bytes,
            session: Arc::clone(&limits.session),
            state: Mutex::new(State {
                next_seq: 1,
                replay: (replay_events > 0).then(VecDeque::new),
                replay_held: 0,
                live: None,
                sent_up_to: 0,
                finished: false,
                cancelled: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether its response has been sent.
    #[cfg(test)]
    pub(super) fn finished(&self) -> bool {
        self.lock().finished
    }

    /// The bytes its replay buffer holds.
    #[cfg(test)]
    pub(super) fn replay_held(&self) -> usize {
        self.lock().replay_held
    }

    /// Whether a client is connected to it now.
    pub(super) fn attached(&self) -> bool {
        self.lock().live.as_ref().is_some_and(|l| !l.tx.is_closed())
    }

    /// Sends `data` on the stream (`last`: it is the response, and the stream ends after it).
    /// Returns whether a live connection took it; if not, it waits in the replay buffer (when
    /// the stream is resumable) or is lost with the connection.
    pub(super) fn push(&self, data: Bytes, last: bool) -> bool {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.finished {
            return false;
        }
        let event = Event {
            seq: state.next_seq,
            data,
            last,
        };
        state.next_seq += 1;
        state.finished = last;
        if let Some(replay) = state.replay.as_mut() {
            let size = event.data.len();
            replay.push_back(event.clone());
            state.replay_held += size;
            self.session.add(size);
            // The oldest events go while the stream or its session is over its bounds; the
            // response is never evicted: it is the newest, so it is the front only when it is
            // the only event left.
            while let Some(oldest) = replay.front()
                && !oldest.last
                && (replay.len() > self.replay_events
                    || state.replay_held > self.replay_bytes
                    || self.session.over())
            {
                let size = oldest.data.len();
                replay.pop_front();
                state.replay_held -= size;
                self.session.sub(size);
            }
        }
        let Some(live) = state.live.as_ref() else {
            return false;
        };
        let seq = event.seq;
        if live.offer(event, self.unread_bytes, self.id) {
            state.sent_up_to = seq;
            true
        } else {
            state.live = None;
            false
        }
    }

    /// Empties the replay buffer, giving its bytes back to the session.
    fn clear_replay(&self, state: &mut State) {
        if let Some(replay) = state.replay.as_mut() {
            replay.clear();
        }
        self.session.sub(std::mem::take(&mut state.replay_held));
    }

    /// Connects a client to the stream, first giving it the buffered events after `after`
    /// (`None`: a new stream, nothing to replay). A connection already attached is replaced.
    pub(super) fn attach(&self, after: Option<u64>) -> Result<Events, AttachError> {
        let mut state = self.lock();
        let (live, events) = Events::new();
        if let Some(after) = after {
            if state.cancelled || (state.finished && after.saturating_add(1) >= state.next_seq) {
                return Err(AttachError::Ended);
            }
            let replay = state.replay.as_ref().ok_or(AttachError::Evicted)?;
            let first = replay.front().map_or(state.next_seq, |e| e.seq);
            if after + 1 < first {
                return Err(AttachError::Evicted);
            }
            for event in replay.iter().filter(|e| e.seq > after) {
                // The channel is new and the buffer is at most LIVE_QUEUE long; its bytes are
                // bounded by the replay bounds, so they are counted, never refused.
                live.queued.fetch_add(event.data.len(), Ordering::Relaxed);
                if live.tx.try_send(event.clone()).is_err() {
                    return Err(AttachError::Evicted);
                }
            }
        }
        if !state.finished {
            state.live = Some(live);
        }
        Ok(events)
    }

    /// Connects a client that gives no `Last-Event-ID`: it gets what no connection took yet.
    pub(super) fn attach_fresh(&self) -> Events {
        let after = {
            let state = self.lock();
            state.replay.as_ref().map(|replay| {
                // Events evicted meanwhile are gone: start from what is left.
                let oldest = replay.front().map_or(state.next_seq, |e| e.seq);
                state.sent_up_to.max(oldest.saturating_sub(1))
            })
        };
        self.attach(after).unwrap_or_else(|_| Events::ended())
    }

    /// Drops the live connection, if any (the session ended: nothing more is sent, and
    /// nothing is kept for replay).
    pub(super) fn detach(&self) {
        let mut state = self.lock();
        state.live = None;
        state.finished = true;
        self.clear_replay(&mut state);
    }

    /// Its request was cancelled: as [`detach`](Self::detach), and a client resuming it is
    /// told it has ended ([`AttachError::Ended`]) whatever event it names.
    pub(super) fn cancel(&self) {
        self.detach();
        self.lock().cancelled = true;
    }

    /// The event after which it owes nothing: 0 once cancelled, its response's number once
    /// answered, `u64::MAX` while it runs.
    pub(super) fn owes_nothing_after(&self) -> u64 {
        let state = self.lock();
        if state.cancelled {
            0
        } else if state.finished {
            state.next_seq - 1
        } else {
            u64::MAX
        }
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        let held = self
            .state
            .get_mut()
            .map_or_else(|e| e.into_inner().replay_held, |s| s.replay_held);
        self.session.sub(held);
    }
}

#[cfg(test)]
mod tests;
