//! At 2026-07-28 every client of `/mcp` is served by one peer, each request on a channel of its
//! own; each user has a share of that peer's in-flight bounds (`limits.max_in_flight_bytes`,
//! `limits.max_in_flight_bytes_per_user`). One user at their share is refused with -32050
//! while another user is still served — where, with one shared bound, the first user's calls
//! would have taken the whole peer. Real gateway processes on loopback.

mod support;

use serde_json::{Value, json};
use std::time::Duration;

use support::http::{eventually, join, mcp_post, spawn_mcp, stamped, until_stderr_count};
use support::{Gateway, Options, config};

const STARTED: &str = "demo-upstream: started tools/call sleep";
const V2026: &str = "2026-07-28";

/// A 2026-07-28 `demo-sleep` call whose params carry `padding` bytes (in `_meta`, where the
/// schema allows anything): what it holds of its user's share while it runs.
fn padded_sleep(id: i64, seconds: f64, padding: usize) -> Value {
    let mut call = stamped(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "demo-sleep", "arguments": {"seconds": seconds}}}),
        V2026,
    );
    call["params"]["_meta"]["padding"] = json!("x".repeat(padding));
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_at_their_share_of_the_peer_is_refused_while_another_is_served() {
    // Twelve of alice's calls would fill the peer's bound (1,000,000 bytes), and her runs'
    // share (50) does not stop them: only her share of the peer's bytes (300,000) does.
    let gateway = Gateway::with(Options {
        config: config(
            "[limits]\nmax_runs = 100\nmax_runs_per_user = 50\n\
             max_in_flight_bytes = 1000000\nmax_in_flight_bytes_per_user = 300000\n",
        ),
        ..Options::default()
    });
    let alice: Vec<_> = (0..12)
        .map(|i| spawn_mcp(&gateway, "alice", None, padded_sleep(100 + i, 30.0, 90_000)))
        .collect();
    // Three fit in her share; the other nine are answered at once.
    until_stderr_count(&gateway, STARTED, 3).await;
    eventually(
        Duration::from_secs(10),
        "nine of alice's calls answered",
        || {
            let finished = alice.iter().filter(|call| call.is_finished()).count();
            async move { (finished >= 9).then_some(()) }
        },
    )
    .await;
    let (refused, running): (Vec<_>, Vec<_>) = alice
        .into_iter()
        .partition(tokio::task::JoinHandle::is_finished);
    assert_eq!(running.len(), 3, "three of alice's calls run");
    for call in refused {
        let reply = join(call).await;
        let error = &reply.response()["error"];
        assert_eq!(error["code"], -32050, "{}", reply.text);
        let why = error["data"].as_str().unwrap_or_default();
        assert!(why.contains("the most one user may"), "{}", reply.text);
    }
    // Bob's call of the same size runs.
    let bob = mcp_post(&gateway, "bob", None, &padded_sleep(1, 0.1, 90_000)).await;
    assert_eq!(bob.status, 200, "{}", bob.text);
    let result = &bob.response()["result"];
    assert!(result["content"].is_array(), "bob is served: {}", bob.text);
    assert!(
        gateway.stderr().matches(STARTED).count() >= 4,
        "bob's call reached the upstream"
    );
    for call in running {
        call.abort();
    }
}
