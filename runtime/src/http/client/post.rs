//! One request's task: wait for a `POST` slot, `POST` it, read its answer (JSON, or an event
//! stream resumed when it breaks), and follow the bridge's signals — the cancel, or its
//! response arriving elsewhere. A request that gets no response from the server gets an error
//! response from here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use cancelkit_protocol::jsonrpc::RequestId;
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, oneshot, watch};

use super::bridge::{Shared, Signal};
use super::deliver::{Awaited, Delivered};
use super::failure::{self, Failure};
use super::session::{Era, INITIALIZE};
use super::stream::{self, Cursor, End, Reopened};

/// How much of a non-2xx answer's body is read (to find a JSON-RPC error in it).
const ERROR_BODY_BYTES: usize = 64 << 10;

/// A request to send.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) id: RequestId,
    pub(super) method: String,
    pub(super) era: Era,
    /// The message as the peer wrote it.
    pub(super) body: Bytes,
    /// 2026-07-28: `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
    pub(super) routing: Vec<(HeaderName, HeaderValue)>,
    /// Its room in the queued-bytes budget, given back once its `POST` starts.
    pub(super) queued: u32,
}

/// Where the request's `POST` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Waiting for a `POST` slot: nothing sent.
    Queued,
    /// Sent; the server has not answered (status and headers) yet.
    Sent,
    /// The server answered; its body is being read.
    Answered,
}

/// The task of one request; holds its in-flight `slot` until done.
pub(super) async fn run(
    shared: Arc<Shared>,
    job: Job,
    signal: oneshot::Receiver<Signal>,
    _slot: OwnedSemaphorePermit,
) {
    let (phase, _) = watch::channel(Phase::Queued);
    let resume = AtomicBool::new(true);
    let exchange = exchange(&shared, &job, &phase, &resume);
    tokio::pin!(exchange);
    let signal = tokio::select! {
        biased;
        () = shared.stop.cancelled() => return give_back(&shared, &job, &phase),
        outcome = &mut exchange => {
            shared.untrack(&job.id);
            if let Err(failure) = outcome {
                finish(&shared, &job, &failure).await;
            }
            return;
        }
        // The sender is dropped only with the entry, once answered elsewhere.
        signal = signal => signal.unwrap_or(Signal::Answered),
    };
    match signal {
        Signal::Answered => {}
        Signal::Abort => {
            tracing::debug!(request_id = %job.id, "cancelled: its stream is closed");
        }
        Signal::Cancel(message) => {
            resume.store(false, Ordering::Relaxed);
            cancel(&shared, &job, message, &phase, exchange).await;
        }
    }
    give_back(&shared, &job, &phase);
}

/// Gives back the queued-bytes room of a request that never got its `POST` slot.
fn give_back(shared: &Shared, job: &Job, phase: &watch::Sender<Phase>) {
    if *phase.borrow() == Phase::Queued {
        shared.queued.give_back(job.queued);
    }
}

/// Answers the peer with the failure, unless the bridge is stopping; an expired session then
/// closes the connection.
async fn finish(shared: &Shared, job: &Job, failure: &Failure) {
    tracing::debug!(request_id = %job.id, method = job.method, ?failure, "the request failed");
    shared.answer_peer(failure.response(&job.id)).await;
    if matches!(failure, Failure::SessionExpired) {
        shared.expire();
    }
}

/// A legacy request cancelled by the peer: `notifications/cancelled` goes to the server —
/// again once the request's `POST` is answered if it was not yet (the first may have overtaken
/// it) — and then its stream is dropped. Nothing is sent for a request never sent.
async fn cancel<F>(
    shared: &Arc<Shared>,
    job: &Job,
    message: Bytes,
    phase: &watch::Sender<Phase>,
    exchange: std::pin::Pin<&mut F>,
) where
    F: Future<Output = Result<(), Failure>>,
{
    let at_cancel = *phase.borrow();
    tracing::debug!(request_id = %job.id, phase = ?at_cancel, "cancelled: sending notifications/cancelled");
    match at_cancel {
        Phase::Queued => {}
        Phase::Answered => {
            shared.send(message, "notifications/cancelled").await;
        }
        Phase::Sent if !shared.learned.has_session() => {
            // A stateless server relates nothing across connections: the dropped stream is
            // what stops it, so it is dropped at once (on return) while the notification goes.
            let shared = Arc::clone(shared);
            tokio::spawn(async move { shared.send(message, "notifications/cancelled").await });
        }
        Phase::Sent => {
            // The first notification goes out while the request's POST is driven on, until the
            // server answers it (or the POST ends, or the send timeout).
            let first = shared.send(message.clone(), "notifications/cancelled");
            let mut phases = phase.subscribe();
            let post_answered = async {
                tokio::select! {
                    _ = exchange => false,
                    seen = phases.wait_for(|p| *p == Phase::Answered) => seen.is_ok(),
                }
            };
            let both = async { tokio::join!(first, post_answered).1 };
            let answered_later = tokio::select! {
                () = shared.stop.cancelled() => false,
                answered = tokio::time::timeout(shared.options.send_timeout, both) => {
                    answered.unwrap_or(false)
                }
            };
            if answered_later {
                tracing::debug!(request_id = %job.id, "the server answered the cancelled request's POST: sending notifications/cancelled again");
                shared.send(message, "notifications/cancelled").await;
            }
        }
    }
}

/// Sends the request and reads its answer, delivering every message to the peer; `Ok` once
/// the response was delivered.
async fn exchange(
    shared: &Shared,
    job: &Job,
    phase: &watch::Sender<Phase>,
    resume: &AtomicBool,
) -> Result<(), Failure> {
    let Ok(_post) = shared.posts.acquire().await else {
        return Ok(()); // never closed
    };
    shared.queued.give_back(job.queued);
    phase.send_replace(Phase::Sent);
    let initialize = job.method == INITIALIZE;
    let mut headers = shared.post_headers(Some(job.era), initialize);
    headers.extend(job.routing.iter().cloned());
    let carried_session = headers.contains_key(cancelkit_wire::headers::SESSION_ID);
    let response = shared
        .http
        .post(shared.url.clone())
        .headers(headers)
        .body(job.body.clone())
        .send()
        .await
        .map_err(|e| Failure::of_send(&shared.url, &e))?;
    phase.send_replace(Phase::Answered);
    let status = response.status();
    if initialize && status.is_success() {
        shared.learned.open_session(
            response
                .headers()
                .get(cancelkit_wire::headers::SESSION_ID)
                .cloned(),
        );
    }
    if status == StatusCode::NOT_FOUND && carried_session {
        return Err(Failure::SessionExpired);
    }
    if !status.is_success() {
        let body = read_body(response, ERROR_BODY_BYTES, true).await?;
        return Err(failure::from_status(status, &body));
    }
    let awaited = Awaited {
        id: &job.id,
        method: &job.method,
    };
    if stream::is_event_stream(&response) {
        return read_stream(shared, job, response, awaited, resume).await;
    }
    let body = read_body(response, shared.event_limit, false).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Failure::BadAnswer(format!(
            "the server answered HTTP {status} without a response to request {}",
            job.id
        )));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| Failure::BadAnswer("the server's answer is not UTF-8 text".into()))?;
    match shared.deliver(text, Some(awaited)).await {
        Delivered::Passed { answered: true } | Delivered::Closed => Ok(()),
        Delivered::Passed { answered: false } => Err(Failure::BadAnswer(format!(
            "the server's answer holds no response to request {}",
            job.id
        ))),
        Delivered::Invalid(why) => Err(Failure::BadAnswer(why)),
    }
}

/// Reads a request's event stream to its response, reopening it with `Last-Event-ID` when it
/// ends or breaks first (see the module documentation of [`super`]).
async fn read_stream(
    shared: &Shared,
    job: &Job,
    mut response: reqwest::Response,
    awaited: Awaited<'_>,
    resume: &AtomicBool,
) -> Result<(), Failure> {
    let mut cursor = Cursor::default();
    let mut failures = 0u32;
    loop {
        let why = match stream::read_events(shared, response, &mut cursor, Some(awaited)).await {
            End::Answered | End::Closed => return Ok(()),
            End::Failed(failure) => return Err(failure),
            End::Ended => format!(
                "the server's event stream ended before the response to request {}",
                job.id
            ),
            End::Broke(e) => format!(
                "the server's event stream broke before the response to request {}: {e}",
                job.id
            ),
        };
        if cursor.take_progress() {
            failures = 0;
        }
        response = loop {
            let Some(last_id) = cursor.last_id.clone() else {
                return Err(Failure::Lost(format!(
                    "{why}; the server gave no event id to resume it from"
                )));
            };
            if !resume.load(Ordering::Relaxed) {
                return Err(Failure::Lost(why));
            }
            failures += 1;
            if failures > shared.options.resume_attempts {
                return Err(Failure::Lost(format!(
                    "{why}; resuming it failed {} times in a row",
                    failures - 1
                )));
            }
            let wait = stream::delay(
                cursor.retry,
                failures,
                shared.options.retry_delay,
                shared.options.max_retry_delay,
            );
            tracing::debug!(request_id = %job.id, last_id, ?wait, "resuming the request's event stream");
            tokio::time::sleep(wait).await;
            match stream::open(shared, job.era, Some(&last_id)).await {
                Reopened::Stream(response) => break response,
                Reopened::Retry(e) => tracing::debug!(request_id = %job.id, "resuming: {e}"),
                Reopened::Refused(Failure::SessionExpired) => return Err(Failure::SessionExpired),
                Reopened::Refused(refused) => {
                    return Err(Failure::Lost(format!(
                        "{why}; the server refused to resume it: {}",
                        refused.to_error().message
                    )));
                }
            }
        };
    }
}

/// Reads a body up to `limit` bytes: beyond, the rest is left unread when `truncate`, else
/// the answer is refused.
async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, Failure> {
    let too_large = || {
        Failure::TooLarge(format!(
            "the server's answer exceeds the client's limit of {limit} bytes"
        ))
    };
    if !truncate && response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok(body),
            Err(_) if truncate => return Ok(body),
            Err(e) => {
                return Err(Failure::Lost(format!(
                    "the server's answer broke off: {}",
                    cancelkit_wire::chain(&e)
                )));
            }
        };
        if body.len() + chunk.len() > limit {
            if truncate {
                body.extend_from_slice(&chunk[..limit - body.len()]);
                return Ok(body);
            }
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
}
