//! Each user's share of the one peer that serves every 2026-07-28 request: the server's
//! `session_owner` hook names the user of each request, and the builder's
//! `max_in_flight_per_owner` bounds what one user holds — requests in flight and running
//! handlers — while the other users are still served.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::http::server::McpHttpServer;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use serde_json::{Value, json};

use crate::harness::{WAIT, answer, client, stamped, text, tool};
use crate::mcp_post;

/// `wait` runs until cancelled (counting the handlers running); `count` answers at once.
fn router(running: Arc<AtomicUsize>) -> Router {
    Router::new().request("tools/call", move |params: Value, _cx: Context| {
        let running = Arc::clone(&running);
        async move {
            if params["name"] == "wait" {
                running.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok::<_, JsonRpcError>(text("done"))
        }
    })
}

/// A server whose users are named by the `x-user` header, each with `per_owner` as its share.
async fn start(requests: usize, concurrency: Option<usize>) -> (String, Arc<AtomicUsize>) {
    let running = Arc::new(AtomicUsize::new(0));
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router(Arc::clone(&running)))
        .max_in_flight_per_owner(requests, 1 << 20, concurrency);
    let app = McpHttpServer::new(builder)
        .session_owner(|parts| {
            let user = parts.headers.get("x-user")?.to_str().ok()?;
            Some(user.to_owned())
        })
        .into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/mcp"), running)
}

/// A 2026-07-28 call of `name` as `user`, in a task of its own; its answer.
fn call(url: &str, user: &str, id: i64, name: &str) -> tokio::task::JoinHandle<Value> {
    let request = mcp_post::post(
        &client(),
        url,
        None,
        &stamped(tool(json!(id), name, json!({}))),
    )
    .header("x-user", user);
    tokio::spawn(async move { answer(request.send().await.unwrap()).await })
}

async fn until_running(running: &AtomicUsize, count: usize) {
    tokio::time::timeout(WAIT, async {
        while running.load(Ordering::SeqCst) < count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the handlers start in time");
}

#[tokio::test]
async fn a_user_at_their_share_of_requests_in_flight_is_refused_while_another_is_served() {
    let (url, running) = start(2, None).await;
    let held = [
        call(&url, "alice", 1, "wait"),
        call(&url, "alice", 2, "wait"),
    ];
    until_running(&running, 2).await;
    let refused = call(&url, "alice", 3, "count").await.unwrap();
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    let why = refused["error"]["data"].as_str().unwrap_or_default();
    assert!(
        why.contains("2 requests in flight, the most one user may"),
        "{refused}"
    );
    // The same id as one of alice's, from another user: served.
    let served = call(&url, "bob", 1, "count").await.unwrap();
    assert_eq!(
        served["result"]["content"],
        text("done")["content"],
        "{served}"
    );
    for call in held {
        call.abort();
    }
}

#[tokio::test]
async fn a_user_at_their_share_of_running_handlers_waits_while_another_runs() {
    let (url, running) = start(16, Some(1)).await;
    let first = call(&url, "alice", 1, "wait");
    until_running(&running, 1).await;
    let queued = call(&url, "alice", 2, "wait");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        running.load(Ordering::SeqCst),
        1,
        "alice's second call waits for her slot"
    );
    let bob = call(&url, "bob", 1, "wait");
    until_running(&running, 2).await;
    // Alice's first call ends (its stream closed, which cancels it): her second one runs.
    first.abort();
    until_running(&running, 3).await;
    for call in [queued, bob] {
        call.abort();
    }
}
