//! The replay buffers: an unread stream's within `replay_bytes` (always with the response), a
//! session's streams within `session_replay_bytes` together.

use cancelkit::wire::{headers, sse};
use serde_json::{Value, json};

use crate::harness::{
    BURST, MAX_ID, REPLAY_BYTES, Server, client, events, post, session, start, tool, with_token,
};

/// Calls `burst` in `session` with a token at the bound, reads only the priming event (the
/// stream is left unread), then waits until the response is in the stream's replay buffer
/// (resuming after the last progress event). The stream's number.
async fn unread_burst(server: &Server, session: &str, id: u64, answer_bytes: usize) -> u64 {
    let call = tool(
        json!(id),
        "burst",
        json!({"count": BURST, "size": 1000, "answer": answer_bytes}),
    );
    let call = with_token(call, &"t".repeat(MAX_ID));
    let response = post(&server.url, Some(session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let primed = events(response, true).await;
    let (stream, seq) = primed[0]
        .id
        .as_deref()
        .and_then(|id| id.split_once('/'))
        .expect("a priming event with an id");
    assert_eq!(seq, "0");
    let stream: u64 = stream.parse().unwrap();
    let resumed = resume(server, session, stream, BURST).await;
    assert_eq!(resumed.status(), 200, "the response is kept");
    let got = events(resumed, false).await;
    let response: Value = serde_json::from_str(&got.last().expect("the response").data).unwrap();
    assert_eq!(response["id"], id, "{response}");
    stream
}

async fn resume(server: &Server, session: &str, stream: u64, after: u64) -> reqwest::Response {
    client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, session)
        .header(headers::LAST_EVENT_ID, format!("{stream}/{after}"))
        .send()
        .await
        .unwrap()
}

/// What the replay buffer of finished stream `stream` holds: resumes after each event in
/// turn until a resumption is accepted (those before are refused: their events are gone).
/// The first event kept, and the events replayed.
async fn replay_of(server: &Server, session: &str, stream: u64) -> (u64, Vec<sse::Event>) {
    for after in 0..=BURST {
        let response = resume(server, session, stream, after).await;
        if response.status() == 200 {
            return (after + 1, events(response, false).await);
        }
        assert_eq!(response.status(), 400);
    }
    panic!("stream {stream} cannot be resumed at all");
}

fn bytes(events: &[sse::Event]) -> usize {
    events.iter().map(|e| e.data.len()).sum()
}

#[tokio::test]
async fn an_unread_stream_keeps_its_newest_events_within_its_replay_bytes_and_the_response() {
    let server = start(|s| s.replay_bytes(REPLAY_BYTES)).await;
    let session = session(&server).await;
    let stream = unread_burst(&server, &session, 3, 10).await;
    let (first, replayed) = replay_of(&server, &session, stream).await;
    assert!(first > 1, "the oldest events went");
    let seqs: Vec<String> = replayed.iter().filter_map(|e| e.id.clone()).collect();
    let expected: Vec<String> = (first..=BURST + 1)
        .map(|s| format!("{stream}/{s}"))
        .collect();
    assert_eq!(
        seqs, expected,
        "the newest events, in order, to the response"
    );
    let response: Value = serde_json::from_str(&replayed.last().unwrap().data).unwrap();
    assert_eq!(response["id"], 3);
    assert_eq!(response["result"]["content"][0]["text"], "a".repeat(10));
    let kept = bytes(&replayed);
    assert!(kept <= REPLAY_BYTES, "{kept} bytes kept");
    // It keeps as much as fits: one more event would not have.
    let event = replayed[0].data.len();
    assert!(kept + event > REPLAY_BYTES, "{kept} + {event} bytes");
    assert!(
        replayed[0].data.len() > 1000 + MAX_ID,
        "each event carries the token"
    );
}

#[tokio::test]
async fn a_response_larger_than_the_replay_bound_is_kept_alone() {
    let server = start(|s| s.replay_bytes(REPLAY_BYTES)).await;
    let session = session(&server).await;
    let stream = unread_burst(&server, &session, 4, 2 * REPLAY_BYTES).await;
    let (first, replayed) = replay_of(&server, &session, stream).await;
    assert_eq!(first, BURST + 1, "every progress event went");
    assert_eq!(replayed.len(), 1);
    assert!(bytes(&replayed) > REPLAY_BYTES);
    let response: Value = serde_json::from_str(&replayed[0].data).unwrap();
    assert_eq!(response["id"], 4);
}

#[tokio::test]
async fn the_streams_of_a_session_keep_at_most_its_replay_bytes_together() {
    let session_bytes = REPLAY_BYTES * 3 / 2;
    let server = start(|s| {
        s.replay_bytes(REPLAY_BYTES)
            .session_replay_bytes(session_bytes)
    })
    .await;
    let session = session(&server).await;
    let first = unread_burst(&server, &session, 5, 10).await;
    let second = unread_burst(&server, &session, 6, 10).await;
    let (_, first) = replay_of(&server, &session, first).await;
    let (_, second) = replay_of(&server, &session, second).await;
    let (first, second) = (bytes(&first), bytes(&second));
    assert!(first + second <= session_bytes, "{first} + {second} bytes");
    assert!(
        second < first,
        "the stream that came later kept less: {first}, {second}"
    );
}
