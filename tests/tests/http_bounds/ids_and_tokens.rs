//! Request ids and progress tokens over `max_id_len` are refused and their handlers never run
//! (in a session, at 2026-07-28 and on stdio); ones at the bound are served.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cancelkit::peer::{McpRevision, Peer, Protocol};
use cancelkit::wire::meta;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::harness::{
    MAX_ID, V2026, WAIT, answer, assert_id_refused, assert_token_refused, events, post, router,
    session, stamped, start, tool, with_token,
};

#[tokio::test]
async fn an_over_long_request_id_is_refused_and_its_handler_never_runs() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let long = json!("i".repeat(MAX_ID + 1));
    for message in [
        tool(long.clone(), "count", json!({})),
        stamped(tool(long.clone(), "count", json!({}))),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 400, "{message}");
        assert_id_refused(&response.json().await.unwrap());
    }
    // A cancel naming such an id names nothing: accepted, and the session goes on.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": long, "reason": "r"}});
    let response = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "count", json!({})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        answer(response).await["result"]["content"][0]["text"],
        "counted"
    );
    assert_eq!(
        server.runs.load(Ordering::SeqCst),
        1,
        "only the last call ran"
    );
}

#[tokio::test]
async fn an_id_at_the_bound_is_served() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let id = json!("i".repeat(MAX_ID));
    for message in [
        tool(id.clone(), "count", json!({})),
        stamped(tool(id.clone(), "count", json!({}))),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 200, "{message}");
        let answer = answer(response).await;
        assert_eq!(answer["id"], id);
        assert_eq!(
            answer["result"]["content"][0]["text"], "counted",
            "{answer}"
        );
    }
    assert_eq!(server.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_over_long_progress_token_is_refused_and_one_at_the_bound_is_served() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let long = "t".repeat(MAX_ID + 1);
    let call = tool(
        json!(7),
        "burst",
        json!({"count": 2, "size": 1, "answer": 1}),
    );
    for message in [
        with_token(call.clone(), &long),
        stamped(with_token(call.clone(), &long)),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 400, "{message}");
        assert_token_refused(&response.json().await.unwrap(), &json!(7));
    }
    assert_eq!(server.runs.load(Ordering::SeqCst), 0, "no handler ran");
    // At the bound: the call runs and its progress carries the token.
    let token = "t".repeat(MAX_ID);
    let response = post(&server.url, Some(&session), &with_token(call, &token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let got = events(response, false).await;
    let progress: Vec<Value> = got
        .iter()
        .filter(|e| e.data.contains("notifications/progress"))
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(progress.len(), 2, "{got:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == token)
    );
    assert_eq!(server.runs.load(Ordering::SeqCst), 1);
}

/// One line of the peer's output.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut R) -> Value {
    let mut line = String::new();
    tokio::time::timeout(WAIT, lines.read_line(&mut line))
        .await
        .expect("an answer in time")
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn on_stdio_an_over_long_id_or_token_is_refused_and_its_handler_never_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (client, server) = tokio::io::duplex(1024 * 1024);
    let (read, write) = tokio::io::split(server);
    let _peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
        .router(router(Arc::clone(&runs)))
        .connect(read, write);
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read);
    let mut send = async |message: Value| {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        write.write_all(&line).await.unwrap();
    };
    send(tool(json!("i".repeat(MAX_ID + 1)), "count", json!({}))).await;
    assert_id_refused(&read_line(&mut lines).await);
    let call = tool(
        json!(2),
        "burst",
        json!({"count": 1, "size": 1, "answer": 1}),
    );
    send(with_token(call, &"t".repeat(MAX_ID + 1))).await;
    assert_token_refused(&read_line(&mut lines).await, &json!(2));
    // A cancel naming an over-long id is ignored; an id at the bound is served.
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "i".repeat(MAX_ID + 1)}}),
    )
    .await;
    let id = json!("i".repeat(MAX_ID));
    send(tool(id.clone(), "count", json!({}))).await;
    let answer = read_line(&mut lines).await;
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "counted");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the last call ran");
}
