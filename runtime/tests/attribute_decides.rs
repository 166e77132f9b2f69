//! The handler's own `#[cancellable]` attribute decides what a cancel does to it, whatever route
//! it is on: a client `Peer` cancels requests of a server `Peer` (ACP, which answers a cancelled
//! request) and sees what comes back.

mod common;

use std::time::{Duration, Instant};

use cancelkit::peer::{Context, Peer, PeerHandle, Protocol, RequestError, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use common::{Event, Events, events_channel, next_event};

/// Drops after its `await` report `Dropped`; a body that gets past its `await` reports `Finished`.
struct Guard(Events, &'static str, bool);

impl Drop for Guard {
    fn drop(&mut self) {
        let event = if self.2 {
            Event::Finished(self.1.into())
        } else {
            Event::Dropped(self.1.into())
        };
        let _ = self.0.0.send(event);
    }
}

/// Waits for its cancel, then takes a while to wind down (more `.await`s after the cancel) and
/// answers with a partial result.
#[cancellable(cooperative)]
async fn cooperative(events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.0.send(Event::Started("cooperative".into()));
    cancelkit::cancelled().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(json!({"partial": true}))
}

/// Ignores its cancel; the grace drops it.
#[cancellable(cooperative, grace = "300ms")]
async fn graceful(events: Events) -> Result<Value, JsonRpcError> {
    let mut guard = Guard(events.clone(), "graceful", false);
    let _ = events.0.send(Event::Started("graceful".into()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    guard.2 = true;
    Ok(json!("slept"))
}

/// Abort mode: dropped at the `await` it waits on.
#[cancellable]
async fn abort(events: Events) -> Result<Value, JsonRpcError> {
    let mut guard = Guard(events.clone(), "abort", false);
    let _ = events.0.send(Event::Started("abort".into()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    guard.2 = true;
    Ok(json!("slept"))
}

fn stopped() -> Value {
    json!({"stopped": true})
}

/// Abort mode with a value for the cancel.
#[cancellable(on_cancel = stopped)]
async fn valued(events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.0.send(Event::Started("valued".into()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(json!("slept"))
}

/// Every route is `Router::request`; only the handlers differ.
fn router(events: Events) -> Router {
    let (a, b, c, d, e, f) = (
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events,
    );
    Router::new()
        .request("cooperative", move |_: Value, _cx: Context| {
            cooperative(a.clone())
        })
        .request("graceful", move |_: Value, _cx: Context| {
            graceful(b.clone())
        })
        .request("abort", move |_: Value, _cx: Context| abort(c.clone()))
        .request("valued", move |_: Value, _cx: Context| valued(d.clone()))
        // A closure that awaits a cooperative function takes its mode.
        .request("forwarding", move |_: Value, _cx: Context| {
            let events = e.clone();
            async move {
                let partial = cooperative(events).await?;
                Ok::<_, JsonRpcError>(json!({"forwarded": partial}))
            }
        })
        // A closure that declares nothing is dropped at its next `.await`.
        .request("plain", move |_: Value, _cx: Context| {
            let events = f.clone();
            async move {
                let mut guard = Guard(events.clone(), "plain", false);
                let _ = events.0.send(Event::Started("plain".into()));
                tokio::time::sleep(Duration::from_secs(60)).await;
                guard.2 = true;
                Ok::<_, JsonRpcError>(json!("slept"))
            }
        })
}

struct Served {
    _server: Peer,
    _client: Peer,
    client: PeerHandle,
    events: mpsc::UnboundedReceiver<Event>,
}

fn served() -> Served {
    let (events, rx) = events_channel();
    let (server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router(events)),
        Peer::builder(Protocol::Acp),
    );
    Served {
        client: client.handle(),
        _server: server,
        _client: client,
        events: rx,
    }
}

/// Sends `method`, cancels it once its handler has started, and returns the answer and how
/// long after the cancel it came.
async fn cancel_after_start(
    s: &mut Served,
    method: &str,
) -> (Result<Value, RequestError>, Duration) {
    let mut call = s.client.request::<_, Value>(method, json!({}));
    let answer = tokio::select! {
        answer = &mut call => panic!("{method} answered before its cancel: {answer:?}"),
        started = next_event(&mut s.events) => started,
    };
    assert_eq!(answer, Event::Started(method.into()));
    let cancelled = Instant::now();
    call.cancel();
    let answer = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("an answer within 5 s of the cancel");
    (answer, cancelled.elapsed())
}

fn code(answer: &Result<Value, RequestError>) -> Option<i64> {
    match answer {
        Err(RequestError::Rpc(error)) => Some(error.code.into()),
        _ => None,
    }
}

#[tokio::test]
async fn a_cooperative_handlers_partial_result_reaches_the_peer() {
    let mut s = served();
    let (answer, _) = cancel_after_start(&mut s, "cooperative").await;
    assert_eq!(answer.expect("a result"), json!({"partial": true}));
}

#[tokio::test]
async fn a_closure_awaiting_a_cooperative_function_is_cooperative() {
    let mut s = served();
    let mut call = s.client.request::<_, Value>("forwarding", json!({}));
    tokio::select! {
        answer = &mut call => panic!("answered before its cancel: {answer:?}"),
        started = next_event(&mut s.events) => assert_eq!(started, Event::Started("cooperative".into())),
    }
    call.cancel();
    let answer = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("an answer");
    assert_eq!(
        answer.expect("a result"),
        json!({"forwarded": {"partial": true}})
    );
}

#[tokio::test]
async fn an_abort_handler_is_dropped_at_its_next_await() {
    let mut s = served();
    let (answer, _) = cancel_after_start(&mut s, "abort").await;
    assert_eq!(code(&answer), Some(-32800), "{answer:?}");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("abort".into())
    );
}

#[tokio::test]
async fn an_abort_handlers_on_cancel_value_reaches_the_peer() {
    let mut s = served();
    let (answer, _) = cancel_after_start(&mut s, "valued").await;
    assert_eq!(answer.expect("a result"), json!({"stopped": true}));
}

#[tokio::test]
async fn a_grace_keeps_the_handler_until_it_runs_out() {
    let mut s = served();
    let (answer, after) = cancel_after_start(&mut s, "graceful").await;
    assert_eq!(code(&answer), Some(-32800), "{answer:?}");
    assert!(
        after >= Duration::from_millis(250),
        "answered {after:?} after the cancel"
    );
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("graceful".into())
    );
}

#[tokio::test]
async fn a_handler_that_declares_nothing_is_dropped() {
    let mut s = served();
    let (answer, _) = cancel_after_start(&mut s, "plain").await;
    assert_eq!(code(&answer), Some(-32800), "{answer:?}");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("plain".into())
    );
}
