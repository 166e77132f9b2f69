//! Event streams: reading one into messages for the peer, where a stream is resumed from
//! (its last event id and `retry:` time), reopening one with `GET`, and the legacy session's
//! own `GET` stream.

use std::sync::Arc;
use std::time::Duration;

use cancelkit_wire::sse;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use tokio::sync::oneshot;

use super::bridge::Shared;
use super::deliver::{Awaited, Delivered};
use super::failure::Failure;
use super::session::Era;

/// Where a stream stands across its reopenings.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    /// The last event id seen: what `Last-Event-ID` resumes from.
    pub(super) last_id: Option<String>,
    /// The server's last `retry:` time, in milliseconds.
    pub(super) retry: Option<u64>,
    /// Something new arrived since this was last taken (an event, or a new id).
    pub(super) progress: bool,
}

impl Cursor {
    /// Takes the progress flag.
    pub(super) fn take_progress(&mut self) -> bool {
        std::mem::take(&mut self.progress)
    }

    fn update(&mut self, parser: &sse::Parser) {
        if let Some(id) = parser.last_event_id()
            && self.last_id.as_deref() != Some(id)
        {
            self.last_id = Some(id.to_owned());
            self.progress = true;
        }
        if let Some(retry) = parser.retry() {
            self.retry = Some(retry);
        }
    }
}

/// How reading a stream ended.
#[derive(Debug)]
pub(super) enum End {
    /// The awaited response came (the rest of the stream is left).
    Answered,
    /// The body ended.
    Ended,
    /// The body broke off.
    Broke(String),
    /// The stream cannot be read on: too large an event, or (on a request's stream) a message
    /// that is not JSON-RPC.
    Failed(Failure),
    /// The bridge is stopping.
    Closed,
}

/// Whether a response's body is an event stream.
pub(super) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(sse::CONTENT_TYPE))
}

/// Reads an event stream, delivering each event's message to the peer, until the response
/// `awaited` is among them or the stream ends. On the `GET` stream (`awaited` is `None`) an
/// event that is not a JSON-RPC message is skipped with a log line.
pub(super) async fn read_events(
    shared: &Shared,
    mut response: reqwest::Response,
    cursor: &mut Cursor,
    awaited: Option<Awaited<'_>>,
) -> End {
    let mut parser = sse::Parser::new(sse::Limits::new(shared.event_limit));
    let mut events = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return End::Ended,
            Err(e) => return End::Broke(cancelkit_wire::chain(&e).to_string()),
        };
        let fed = parser.feed(&chunk, &mut events);
        cursor.update(&parser);
        for event in events.drain(..) {
            if event.data.trim().is_empty() {
                continue; // a priming event: an id (and a retry time), no message
            }
            cursor.progress = true;
            match shared.deliver(&event.data, awaited).await {
                Delivered::Passed { answered: true } => return End::Answered,
                Delivered::Passed { answered: false } => {}
                Delivered::Closed => return End::Closed,
                Delivered::Invalid(why) if awaited.is_some() => {
                    return End::Failed(Failure::BadAnswer(why));
                }
                Delivered::Invalid(why) => tracing::warn!("skipped an event: {why}"),
            }
        }
        if let Err(e) = fed {
            return End::Failed(Failure::TooLarge(format!("{e} (the client's limit)")));
        }
    }
}

/// The wait before reopening a stream after `failures` failed attempts in a row: the server's
/// `retry:` time (else the default), doubled for each failure after the first, at most the
/// maximum.
pub(super) fn delay(
    retry: Option<u64>,
    failures: u32,
    default: Duration,
    max: Duration,
) -> Duration {
    let base = retry.map_or(default, Duration::from_millis);
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    base.saturating_mul(factor).min(max)
}

/// What reopening a stream gave.
pub(super) enum Reopened {
    /// The stream, to read on.
    Stream(reqwest::Response),
    /// The server will not give it (with why): do not try again.
    Refused(Failure),
    /// Try again (with why).
    Retry(String),
}

/// `GET` for an event stream, from `last_event_id` on if given.
pub(super) async fn open(shared: &Shared, era: Era, last_event_id: Option<&str>) -> Reopened {
    let headers = shared.get_headers(era, last_event_id);
    let carried_session = headers.contains_key(cancelkit_wire::headers::SESSION_ID);
    let request = shared.http.get(shared.url.clone()).headers(headers).send();
    let response = match tokio::time::timeout(shared.options.send_timeout, request).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => return Reopened::Retry(Failure::of_send(&shared.url, &e).to_error().message),
        Err(_) => return Reopened::Retry("the server did not answer the GET in time".into()),
    };
    let status = response.status();
    if status == StatusCode::NOT_FOUND && carried_session {
        return Reopened::Refused(Failure::SessionExpired);
    }
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return Reopened::Retry(format!("the server answered the GET with HTTP {status}"));
    }
    if !status.is_success() {
        return Reopened::Refused(Failure::Status {
            status,
            excerpt: "the server would not reopen the stream".into(),
        });
    }
    if !is_event_stream(&response) {
        return Reopened::Refused(Failure::BadAnswer(format!(
            "the server answered the GET with HTTP {status} but no event stream"
        )));
    }
    Reopened::Stream(response)
}

/// The legacy session's `GET` stream: its messages go to the peer; it is reopened with
/// `Last-Event-ID` whenever it ends, until a 405 (the server has none), an expired session,
/// too many failed attempts in a row, or the bridge stops.
pub(super) async fn listen(shared: Arc<Shared>, answered: oneshot::Sender<()>) {
    // Told once the first `GET` is answered (or failed): see `Shared::start_listening`.
    let mut answered = Some(answered);
    let mut cursor = Cursor::default();
    let mut failures = 0u32;
    let mut first = true;
    loop {
        if !first {
            let wait = delay(
                cursor.retry,
                failures.max(1),
                shared.options.retry_delay,
                shared.options.max_retry_delay,
            );
            tokio::select! {
                () = shared.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
        first = false;
        let opened = tokio::select! {
            () = shared.stop.cancelled() => return,
            opened = open(&shared, Era::Legacy, cursor.last_id.as_deref()) => opened,
        };
        if let Some(answered) = answered.take() {
            let _ = answered.send(());
        }
        match opened {
            Reopened::Stream(response) => {
                let end = tokio::select! {
                    () = shared.stop.cancelled() => return,
                    end = read_events(&shared, response, &mut cursor, None) => end,
                };
                match end {
                    End::Closed => return,
                    End::Failed(failure) => {
                        tracing::warn!("the GET stream: {}", failure.to_error().message);
                    }
                    End::Broke(why) => tracing::debug!("the GET stream broke: {why}"),
                    End::Ended | End::Answered => tracing::debug!("the GET stream ended"),
                }
                if cursor.take_progress() {
                    failures = 0;
                } else {
                    failures += 1;
                }
            }
            Reopened::Refused(Failure::Status {
                status: StatusCode::METHOD_NOT_ALLOWED,
                ..
            }) => {
                tracing::debug!("the server offers no GET stream");
                return;
            }
            Reopened::Refused(Failure::SessionExpired) => {
                shared.expire();
                return;
            }
            Reopened::Refused(failure) => {
                tracing::warn!("no GET stream: {}", failure.to_error().message);
                return;
            }
            Reopened::Retry(why) => {
                tracing::debug!("the GET stream: {why}");
                failures += 1;
            }
        }
        if failures > shared.options.resume_attempts {
            tracing::warn!(
                failures,
                "the GET stream failed too often in a row; given up"
            );
            return;
        }
    }
}
