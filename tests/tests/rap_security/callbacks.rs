//! Callbacks bound to their invocation by a per-call secret: forged, misdirected and replayed
//! results are refused and change nothing, the genuine one completes its call.

use std::time::Duration;

use cancelkit::rap::Delivered;
use serde_json::Value;

use crate::harness::{post, result, rig, within};

/// Results posted without the call's secret, with a wrong one, with another call's, or again
/// after the call finished are refused with 403 and change nothing; the genuine result, posted
/// by the tool server to the URL it was given, completes the call.
#[tokio::test]
async fn forged_callbacks_are_refused_and_the_genuine_one_completes_the_call() {
    let rig = rig().await;
    let first = rig.start("call-1").await;
    let second = rig.start("call-2").await;
    let (url_1, url_2) = (rig.callback_of("call-1"), rig.callback_of("call-2"));
    let base = rig.invoker.callback_url();
    assert!(
        url_1.starts_with(&format!("{base}/")) && url_1.len() == base.len() + 33,
        "a call's URL is the callback URL plus its secret: {url_1}"
    );
    assert_ne!(url_1, url_2, "each call has its own secret");

    let forged = result("call-1", "forged");
    let wrong_secret = format!("{base}/{}", "0123456789abcdef".repeat(2));
    let attempts = [
        ("no secret", base.to_owned()),
        ("a wrong secret", wrong_secret),
        ("a malformed secret", format!("{base}/not-a-secret")),
        ("the secret of call-2", url_2.clone()),
    ];
    for (what, url) in &attempts {
        let (status, body) = post(url, &forged).await;
        assert_eq!(status, 403, "{what}: {body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert!(error["error"].is_string(), "{what}: {body}");
    }
    assert_eq!(
        rig.invoker.deliver("", forged.clone()),
        Delivered::Refused,
        "the in-process entry checks the secret too"
    );
    // Nothing completed or cancelled: both calls still wait and still run.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!first.is_finished() && !second.is_finished());
    assert_eq!(rig.invoker.pending(), 2);
    assert_eq!(rig.invoker.tracker().len(), 2);
    assert_eq!(rig.server.running(), 2);

    // The genuine result completes call-1 with the tool's own text.
    rig.gates.open("call-1");
    let result_1 = within(first).await.unwrap().unwrap();
    assert_eq!(result_1.text.as_deref(), Some("genuine result of call-1"));

    // A replay of a result for call-1, to its own URL, after it finished: refused.
    let (status, body) = post(&url_1, &result("call-1", "replayed")).await;
    assert_eq!(status, 403, "a replay: {body}");
    assert_eq!(rig.invoker.pending(), 1);
    assert!(!second.is_finished());

    rig.gates.open("call-2");
    let result_2 = within(second).await.unwrap().unwrap();
    assert_eq!(result_2.text.as_deref(), Some("genuine result of call-2"));
    assert_eq!(rig.invoker.pending(), 0);
    assert!(rig.invoker.tracker().is_empty());
}
