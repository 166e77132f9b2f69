//! One response stream of the server: the events a request (or a session's `GET` stream) has
//! produced, the live connection they go out on, and the replay buffer that lets a 2025-11-25
//! client resume the stream after it was cut.
//!
//! Nothing here waits for a client: events are handed to the live connection with `try_send`,
//! and a connection that cannot take them (its client stopped reading) is dropped. What a
//! dropped connection missed is still in the replay buffer, for a `GET` with `Last-Event-ID`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use cancelkit_wire::sse;
use futures_util::Stream;
use tokio::sync::mpsc;

/// Events a live connection may have waiting before it is dropped as not reading.
pub(super) const LIVE_QUEUE: usize = 256;

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
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    next_seq: u64,
    /// The newest events, oldest first; `None` when the stream is not resumable.
    replay: Option<VecDeque<Event>>,
    replay_cap: usize,
    live: Option<mpsc::Sender<Event>>,
    /// The newest event handed to a live connection.
    sent_up_to: u64,
    /// The response was sent: nothing follows.
    finished: bool,
}

/// Why an attach failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AttachError {
    /// The events after the one asked for are no longer all in the buffer.
    Evicted,
}

impl ResponseStream {
    /// A stream keeping the newest `replay_cap` events for resumption (0: not resumable).
    pub(super) fn new(id: u64, replay_cap: usize) -> ResponseStream {
        ResponseStream {
            id,
            state: Mutex::new(State {
                next_seq: 1,
                replay: (replay_cap > 0).then(VecDeque::new),
                replay_cap,
                live: None,
                sent_up_to: 0,
                finished: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether its response has been sent.
    #[cfg(test)]
    pub(super) fn finished(&self) -> bool {
        self.lock().finished
    }

    /// Whether a client is connected to it now.
    pub(super) fn attached(&self) -> bool {
        self.lock().live.as_ref().is_some_and(|l| !l.is_closed())
    }

    /// Sends `data` on the stream (`last`: it is the response, and the stream ends after it).
    /// Returns whether a live connection took it; if not, it waits in the replay buffer (when
    /// the stream is resumable) or is lost with the connection.
    pub(super) fn push(&self, data: Bytes, last: bool) -> bool {
        let mut state = self.lock();
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
        let cap = state.replay_cap;
        if let Some(replay) = state.replay.as_mut() {
            if replay.len() == cap {
                // The oldest event that is not the response goes; the response is never
                // evicted (it is always the newest).
                replay.pop_front();
            }
            replay.push_back(event.clone());
        }
        let Some(live) = state.live.as_ref() else {
            return false;
        };
        let seq = event.seq;
        match live.try_send(event) {
            Ok(()) => {
                state.sent_up_to = seq;
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    stream = self.id,
                    "a client is not reading its event stream; dropped the connection"
                );
                state.live = None;
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                state.live = None;
                false
            }
        }
    }

    /// Connects a client to the stream, first giving it the buffered events after `after`
    /// (`None`: a new stream, nothing to replay). A connection already attached is replaced.
    pub(super) fn attach(&self, after: Option<u64>) -> Result<mpsc::Receiver<Event>, AttachError> {
        let mut state = self.lock();
        let (tx, rx) = mpsc::channel(LIVE_QUEUE);
        if let Some(after) = after {
            let replay = state.replay.as_ref().ok_or(AttachError::Evicted)?;
            let first = replay.front().map_or(state.next_seq, |e| e.seq);
            if after + 1 < first {
                return Err(AttachError::Evicted);
            }
            for event in replay.iter().filter(|e| e.seq > after) {
                // The channel is new and the buffer is at most LIVE_QUEUE long.
                if tx.try_send(event.clone()).is_err() {
                    return Err(AttachError::Evicted);
                }
            }
        }
        if !state.finished {
            state.live = Some(tx);
        }
        Ok(rx)
    }

    /// Connects a client that gives no `Last-Event-ID`: it gets what no connection took yet.
    pub(super) fn attach_fresh(&self) -> mpsc::Receiver<Event> {
        let after = {
            let state = self.lock();
            state.replay.as_ref().map(|replay| {
                // Events evicted meanwhile are gone: start from what is left.
                let oldest = replay.front().map_or(state.next_seq, |e| e.seq);
                state.sent_up_to.max(oldest.saturating_sub(1))
            })
        };
        self.attach(after).unwrap_or_else(|_| mpsc::channel(1).1)
    }

    /// Drops the live connection, if any (the request was cancelled: nothing more is sent).
    pub(super) fn detach(&self) {
        let mut state = self.lock();
        state.live = None;
        state.finished = true;
    }
}

/// The id of event `seq` on stream `stream`: `stream/seq`.
pub(super) fn event_id(stream: u64, seq: u64) -> String {
    format!("{stream}/{seq}")
}

/// Reads an event id made by [`event_id`].
pub(super) fn parse_event_id(text: &str) -> Option<(u64, u64)> {
    let (stream, seq) = text.split_once('/')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// How an SSE body writes its events.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyOptions {
    /// Give every event an id (resumable streams).
    pub(super) ids: bool,
    /// Start with a priming event: an id and no data, so a client can resume even before
    /// the first message.
    pub(super) prime: bool,
    /// The keep-alive comment interval.
    pub(super) keep_alive: Option<Duration>,
}

/// The bytes of an SSE response body: the events of `events` as they come, keep-alive comments
/// while idle, and the end of the body after the response. `guard` lives as long as the body:
/// dropping it is how the server learns the client went away.
pub(super) fn body<G: Send + 'static>(
    stream_id: u64,
    first: Option<Event>,
    events: mpsc::Receiver<Event>,
    options: BodyOptions,
    guard: G,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    struct Body<G> {
        first: Option<Event>,
        events: mpsc::Receiver<Event>,
        primed: bool,
        done: bool,
        _guard: G,
    }
    let start = Body {
        first,
        events,
        primed: !options.prime,
        done: false,
        _guard: guard,
    };
    // Each chunk carries every event ready at that moment (the priming event with the first
    // one), so a short call's answer leaves in one write.
    let write = move |out: &mut Vec<u8>, event: &Event| {
        let id = options.ids.then(|| event_id(stream_id, event.seq));
        // The data is one JSON text: its line breaks are escaped, so it is one `data:` line.
        sse::write_event(
            out,
            id.as_deref(),
            "",
            std::str::from_utf8(&event.data).unwrap_or_default(),
        );
        event.last
    };
    futures_util::stream::unfold(start, move |mut body| async move {
        if body.done {
            return None;
        }
        let mut out = Vec::new();
        if !body.primed {
            body.primed = true;
            sse::write_event(&mut out, Some(&event_id(stream_id, 0)), "", "");
        }
        if out.is_empty() && body.first.is_none() {
            let next = match options.keep_alive {
                Some(every) => match tokio::time::timeout(every, body.events.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        sse::write_comment(&mut out, "keep-alive");
                        return Some((Ok(Bytes::from(out)), body));
                    }
                },
                None => body.events.recv().await,
            };
            body.first = Some(next?);
        }
        while let Some(event) = body.first.take().or_else(|| body.events.try_recv().ok()) {
            if write(&mut out, &event) {
                body.done = true;
                break;
            }
        }
        Some((Ok(Bytes::from(out)), body))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_after_the_last_event_seen_and_refuses_evicted_ones() {
        let stream = ResponseStream::new(3, 2);
        let _first = stream.attach(None).unwrap();
        drop(_first);
        assert!(!stream.push(Bytes::from_static(b"1"), false));
        assert!(!stream.push(Bytes::from_static(b"2"), false));
        assert!(!stream.push(Bytes::from_static(b"3"), true));
        assert_eq!(stream.attach(Some(0)).unwrap_err(), AttachError::Evicted);
        let mut rx = stream.attach(Some(1)).unwrap();
        let got: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.seq)
            .collect();
        assert_eq!(got, [2, 3]);
        assert!(stream.finished());
    }

    #[test]
    fn a_stream_without_replay_cannot_be_resumed() {
        let stream = ResponseStream::new(1, 0);
        assert!(!stream.push(Bytes::from_static(b"1"), false));
        assert_eq!(stream.attach(Some(0)).unwrap_err(), AttachError::Evicted);
    }

    #[test]
    fn a_client_that_does_not_read_is_dropped_not_waited_for() {
        let stream = ResponseStream::new(1, 4);
        let _rx = stream.attach(None).unwrap();
        for _ in 0..LIVE_QUEUE {
            assert!(stream.push(Bytes::from_static(b"x"), false));
        }
        assert!(!stream.push(Bytes::from_static(b"x"), false));
        assert!(!stream.attached());
    }

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(parse_event_id(&event_id(7, 42)), Some((7, 42)));
        assert_eq!(parse_event_id("7-42"), None);
        assert_eq!(parse_event_id("x/1"), None);
    }
}
