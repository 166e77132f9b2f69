//! A `tools/call`'s response stream on `/mcp`: Server-Sent Events carrying the call's progress
//! notifications, then its response, then the end.
//!
//! What happens when the client closes the stream first depends on the era: at 2026-07-28 the
//! closed stream is the cancel (the run is cancelled, source client); at 2025-11-25 it is not
//! (the run goes on and its response is sent on the session's GET stream if one is open; the
//! client cancels with `notifications/cancelled`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::response::sse::Event;
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::mpsc;

use super::session::Session;
use crate::calls::{Call, Outcome};
use crate::runs::record::CancelSource;

/// The body of a `tools/call` answered over SSE.
pub struct CallStream {
    call: Option<Call>,
    progress: mpsc::Receiver<Value>,
    /// 2025-11-25: where an orphaned response goes. `None` at 2026-07-28.
    session: Option<Arc<Session>>,
    /// Applied to every response before it is sent (2026-07-28 adds `resultType`).
    finish: fn(Value) -> Value,
    /// The response, sent once the progress that raced it is out.
    last: Option<Event>,
    ended: bool,
}

impl CallStream {
    /// A stream for `call`. At 2026-07-28 (`session` is `None`) a closed stream cancels the
    /// run.
    pub fn new(
        mut call: Call,
        progress: mpsc::Receiver<Value>,
        session: Option<Arc<Session>>,
        finish: fn(Value) -> Value,
    ) -> CallStream {
        if session.is_none() {
            call.cancel_on_drop(CancelSource::Client);
        }
        CallStream {
            call: Some(call),
            progress,
            session,
            finish,
            last: None,
            ended: false,
        }
    }
}

fn event(message: &Value) -> Event {
    Event::default().event("message").data(message.to_string())
}

impl Stream for CallStream {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            // Progress first, so none arrives after the response.
            if let Poll::Ready(Some(note)) = self.progress.poll_recv(cx) {
                return Poll::Ready(Some(Ok(event(&note))));
            }
            if let Some(last) = self.last.take() {
                self.ended = true;
                return Poll::Ready(Some(Ok(last)));
            }
            let Some(call) = self.call.as_mut() else {
                return Poll::Ready(None);
            };
            let outcome = std::task::ready!(call.poll_outcome(cx));
            match &outcome {
                // MCP: a request the client cancelled gets no response.
                Outcome::Cancelled {
                    source: CancelSource::Client,
                    ..
                } => self.ended = true,
                _ => {
                    let response = call.response(&outcome);
                    let response = (self.finish)(response);
                    self.last = Some(event(&response));
                }
            }
        }
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        let Some(mut call) = self.call.take() else {
            return;
        };
        if call.is_done() {
            return;
        }
        // 2025-11-25: the stream closing is not a cancel; the run goes on, and its response is
        // delivered on the session's GET stream if the client keeps one.
        if let Some(session) = self.session.take() {
            let finish = self.finish;
            tokio::spawn(async move {
                let outcome = call.outcome().await;
                if matches!(
                    outcome,
                    Outcome::Cancelled {
                        source: CancelSource::Client,
                        ..
                    }
                ) {
                    return;
                }
                let response = finish(call.response(&outcome));
                if !session.push(response) {
                    tracing::debug!(session = %session.id, "a response whose stream closed had no GET stream to go to");
                }
            });
        }
        // 2026-07-28: dropping `call` cancels the run (set in `new`).
    }
}
