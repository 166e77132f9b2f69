//! The rate limit's budget of failed authentications, through the router: only a wrong or
//! missing token spends it; a throttled client gets 429 for every request, the right token
//! included, and its authentic cancels are still applied behind the 429.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use futures_util::future::join_all;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::layers::{ORIGIN, TOKEN, builder, cancel, invocation, request, send};
use crate::rap::{ToolCall, ToolError, ToolOutput, ToolServer};
use crate::{CancelReason, Scope};

/// The address [`cancel`] and [`invoke`] send from.
const ADDRESS: &str = "192.0.2.1:4000";

/// A tool server with the token and `rate_limit(per_second, burst)`, two more operations, and
/// what they report: `watch` hands its call's scope to the receiver and runs until cancelled;
/// `mark` counts its runs.
fn watched(per_second: u32, burst: u32) -> (ToolServer, mpsc::Receiver<Scope>, Arc<AtomicUsize>) {
    // One scope per watched call; no test starts more than a few hundred (the largest
    // burst is 500), so this bound is never reached: a send beyond it fails the test.
    let (scopes, watching) = mpsc::channel(super::super::DEFAULT_MAX_RUNNING);
    let marks = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&marks);
    let server = builder()
        .bearer_token(TOKEN)
        .rate_limit(per_second, burst)
        .operation(
            "watch",
            "Shows its scope",
            json!({}),
            move |_: Value, _: ToolCall| {
                let scopes = scopes.clone();
                async move {
                    scopes
                        .try_send(crate::scope::current_scope().unwrap())
                        .expect("at most DEFAULT_MAX_RUNNING watched calls");
                    std::future::pending::<Result<ToolOutput, ToolError>>().await
                }
            },
        )
        .operation(
            "mark",
            "Counts its runs",
            json!({}),
            move |_: Value, _: ToolCall| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok(ToolOutput::from("marked")) }
            },
        )
        .build();
    (server, watching, marks)
}

/// `/invoke` of `operation` as call `id`, from [`ADDRESS`] with `token`.
fn invoke(operation: &str, id: &str, token: Option<&str>) -> Request<Body> {
    let body = json!({
        "group_id": "thread",
        "id": id,
        "operation": operation,
        "arguments": {},
        "callback_url": format!("{ORIGIN}/results"),
    });
    let body = Body::from(body.to_string());
    request(Method::POST, "/invoke", Some(ADDRESS), token, body)
}

/// The body of a `/cancel_tool_call` for call `id`.
fn cancel_of(id: &str) -> Body {
    Body::from(json!({"thread_id": "thread", "tool_call_id": id}).to_string())
}

/// Sends wrong tokens from [`ADDRESS`] until one is answered 429 (at most `bound` tries);
/// returns how many were answered 401 first.
async fn throttle(router: &axum::Router, bound: usize) -> usize {
    for tries in 0..bound {
        match send(router, cancel(Some("nope"), cancel_of("x"))).await.0 {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::TOO_MANY_REQUESTS => return tries,
            other => panic!("a wrong token got {other}"),
        }
    }
    panic!("no 429 within {bound} wrong tokens");
}

/// Waits (up to 2 s) until `scope` is cancelled.
async fn cancelled(scope: &Scope) -> bool {
    for _ in 0..200 {
        if scope.token().is_cancelled() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn a_thousand_authenticated_cancels_at_once_spend_nothing() {
    // The defaults: 50 a second, bursts of 100.
    let (server, _, _) = watched(50, 100);
    let router = server.router();
    let burst = (0..1000).map(|n| send(&router, cancel(Some(TOKEN), cancel_of(&format!("c{n}")))));
    let statuses = join_all(burst).await;
    let ok = statuses
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .count();
    assert_eq!(
        ok, 1000,
        "1,000 authenticated cancels at once: {ok} answered 200"
    );
    // Invocations with the token spend nothing either.
    let invocations =
        (0..150).map(|n| send(&router, invoke("watch", &format!("i{n}"), Some(TOKEN))));
    let statuses = join_all(invocations).await;
    assert!(statuses.iter().all(|(s, _)| *s == StatusCode::OK));
    assert_eq!(server.rate_limited_clients(), 0, "nobody spent anything");
    // The whole budget is still there for wrong tokens: about a burst of 401s, then 429.
    let refused = throttle(&router, 200).await;
    assert!(
        (100..=110).contains(&refused),
        "{refused} wrong tokens got 401"
    );
}

#[tokio::test]
async fn once_throttled_the_right_token_gets_the_same_429_and_its_cancel_is_still_applied() {
    // One request a second refills: nothing refills while the test runs.
    let (server, mut watching, _) = watched(1, 3);
    let router = server.router();
    for id in ["c1", "c2"] {
        assert_eq!(
            send(&router, invoke("watch", id, Some(TOKEN))).await.0,
            StatusCode::OK
        );
    }
    let (c1, c2) = (
        watching.recv().await.unwrap(),
        watching.recv().await.unwrap(),
    );
    assert_eq!(
        throttle(&router, 10).await,
        3,
        "the burst of wrong tokens got 401"
    );

    let wrong = send(&router, cancel(Some("nope"), cancel_of("c2"))).await;
    let missing = send(&router, cancel(None, cancel_of("c2"))).await;
    let right = send(&router, cancel(Some(TOKEN), cancel_of("c1"))).await;
    let refused = (StatusCode::TOO_MANY_REQUESTS, Bytes::new());
    assert_eq!(
        right, refused,
        "the right token gets 429 too, and the same one"
    );
    assert_eq!((wrong, missing), (refused.clone(), refused));
    assert!(
        cancelled(&c1).await,
        "the throttled authentic cancel was applied"
    );
    assert_eq!(
        c1.cancel_reason(),
        Some(CancelReason::Peer(Some("/cancel_tool_call".into())))
    );
    assert!(
        !c2.token().is_cancelled(),
        "a cancel without the token is not applied"
    );
    // Another address is not throttled.
    let other = request(
        Method::POST,
        "/cancel_tool_call",
        Some("192.0.2.2:4000"),
        Some(TOKEN),
        cancel_of("c2"),
    );
    assert_eq!(send(&router, other).await.0, StatusCode::OK);
    assert!(cancelled(&c2).await);
}

#[tokio::test]
async fn a_throttled_invoke_with_the_right_token_is_not_run() {
    let (server, _, marks) = watched(1, 2);
    let router = server.router();
    throttle(&router, 10).await;
    for id in ["m1", "m2", "m3"] {
        let (status, body) = send(&router, invoke("mark", id, Some(TOKEN))).await;
        assert_eq!(
            (status, body),
            (StatusCode::TOO_MANY_REQUESTS, Bytes::new())
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(marks.load(Ordering::SeqCst), 0, "a throttled invoke ran");
    assert_eq!(server.running(), 0);
}

#[tokio::test]
async fn without_a_bearer_token_the_limiter_never_refuses() {
    let server = builder().rate_limit(1, 1).build();
    let router = server.router();
    let cancels = (0..300).map(|n| send(&router, cancel(Some("any"), cancel_of(&format!("c{n}")))));
    let statuses = join_all(cancels).await;
    assert!(statuses.iter().all(|(s, _)| *s == StatusCode::OK));
    for n in 0..20 {
        let wait = request(
            Method::POST,
            "/invoke",
            Some(ADDRESS),
            None,
            invocation(&format!("w{n}")),
        );
        assert_eq!(send(&router, wait).await.0, StatusCode::OK, "invoke {n}");
    }
    assert_eq!(server.rate_limited_clients(), 0);

    // The per-client share of running calls still bounds /invoke.
    let router = builder()
        .rate_limit(1, 1)
        .max_running_per_client(2)
        .build()
        .router();
    for id in ["a", "b"] {
        let wait = request(Method::POST, "/invoke", Some(ADDRESS), None, invocation(id));
        assert_eq!(send(&router, wait).await.0, StatusCode::OK);
    }
    let third = request(
        Method::POST,
        "/invoke",
        Some(ADDRESS),
        None,
        invocation("c"),
    );
    let (status, body) = send(&router, third).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["limit"], "max_running_per_client");
}

/// Sets its flag when dropped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Behind the 429 the server reads no body of a wrong token, and waits for no body of the
/// right one: it takes what arrived with the request and lets the rest go, so the connection
/// of a right guess is held no longer than a wrong one's.
#[tokio::test]
async fn a_throttled_request_reads_no_wrong_body_and_waits_for_no_right_one() {
    let (server, mut watching, _) = watched(1, 2);
    let router = server.router();
    assert_eq!(
        send(&router, invoke("watch", "c1", Some(TOKEN))).await.0,
        StatusCode::OK
    );
    let c1 = watching.recv().await.unwrap();
    throttle(&router, 10).await;

    let read = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&read);
    let chunks = stream::repeat_with(move || {
        flag.store(true, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from_static(b"12345678"))
    });
    let endless = Body::from_stream(chunks.take(1 << 16));
    let (status, _) = send(&router, cancel(Some("nope"), endless)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);

    // A body that never comes, and says when it is let go.
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = Dropped(Arc::clone(&dropped));
    let never = stream::once(async move {
        let _guard = guard;
        std::future::pending::<Result<Bytes, std::io::Error>>().await
    });
    let answer = tokio::time::timeout(
        Duration::from_secs(1),
        send(&router, cancel(Some(TOKEN), Body::from_stream(never))),
    );
    assert_eq!(
        answer.await.expect("answered at once").0,
        StatusCode::TOO_MANY_REQUESTS
    );
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "the server waited for a withheld body"
    );
    assert!(
        !read.load(Ordering::SeqCst),
        "a throttled wrong token's body was read"
    );
    assert!(!c1.token().is_cancelled());
}
