//! The bytes of a response stream's SSE body: its events as they come, with ids when the
//! stream is resumable, a priming event, and keep-alive comments while idle.

use std::time::Duration;

use bytes::Bytes;
use cancelkit_wire::sse;
use futures_util::Stream;

use super::stream::{Event, Events};

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
    events: Events,
    options: BodyOptions,
    guard: G,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    struct Body<G> {
        first: Option<Event>,
        events: Events,
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
        while let Some(event) = body.first.take().or_else(|| body.events.try_recv()) {
            if write(&mut out, &event) {
                body.done = true;
                break;
            }
        }
        Some((Ok(Bytes::from(out)), body))
    })
}
