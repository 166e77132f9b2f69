//! The checks of what crossed the wire between an SDK client and the gateway, below the SDK:
//! how each cancelled call ended, and that no progress of a cancelled call reached the client
//! after its cancel.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::scenarios::Era;
use super::script::Report;

/// How long after the gateway acknowledged a cancel a progress notification of the call may
/// still reach the client: it may have been written before (the upstreams report progress every
/// 100 to 200 ms, so a gateway that forwarded progress after the cancel shows here).
pub const QUIET_MARGIN_MS: f64 = 250.0;

/// Now, in Unix epoch milliseconds: the client scripts' clock for `...At` times.
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs_f64()
        * 1000.0
}

/// A cancelled call, to check that its progress stopped reaching the client at its cancel.
pub struct Quiet {
    /// For failure messages.
    pub what: &'static str,
    /// The JSON-RPC id the client gave it.
    pub id: Value,
    /// When it was cancelled (the client's abort, or the admin's request sent), Unix ms.
    pub cancelled_at: f64,
    /// When the gateway acknowledged the cancel, where it does (the API's answer), Unix ms; a
    /// client's `notifications/cancelled` is acknowledged by its 202, read from the report.
    pub acknowledged_at: Option<f64>,
    /// How many progress notifications the SDK's callback got for it.
    pub progress_seen: usize,
}

impl Quiet {
    /// Every progress notification of the call the gateway sent, on any stream, arrived before
    /// the cancel's acknowledgement (or the cancel, where there is none) plus
    /// [`QUIET_MARGIN_MS`], and at least one arrived before the cancel (so the check is not
    /// empty). What was seen, for the test's printed report.
    pub fn check(&self, report: &Report) -> String {
        let all = &report.transcript;
        let notice_answered = report
            .exchanges
            .iter()
            .filter(|e| {
                e["request"]["method"] == "notifications/cancelled"
                    && e["request"]["params"]["requestId"] == self.id
            })
            .find_map(|e| e["endedAt"].as_f64());
        let acknowledged = self
            .acknowledged_at
            .or(notice_answered)
            .unwrap_or(self.cancelled_at)
            .max(self.cancelled_at);
        let post = report.post_of(&self.id);
        let token = &post["request"]["params"]["_meta"]["progressToken"];
        assert!(
            !token.is_null(),
            "{} asked for progress: {post}\n{all}",
            self.what
        );
        let times: Vec<f64> = report
            .timed_messages()
            .filter(|(m, _)| {
                m["method"] == "notifications/progress" && m["params"]["progressToken"] == *token
            })
            .map(|(_, at)| at.unwrap_or(f64::INFINITY))
            .collect();
        let before = times.iter().filter(|t| **t <= self.cancelled_at).count();
        let late: Vec<String> = times
            .iter()
            .map(|t| t - acknowledged)
            .filter(|after| *after > QUIET_MARGIN_MS)
            .map(|after| format!("{after:.0}"))
            .collect();
        assert!(
            before >= 1 && self.progress_seen >= 1,
            "{}: progress reached the client before its cancel ({before} on the wire, {} in \
             the SDK's callback)\n{all}",
            self.what,
            self.progress_seen
        );
        assert!(
            late.is_empty(),
            "{}: progress reached the client {late:?} ms after the gateway acknowledged its \
             cancel ({:.0} ms after the cancel; the margin is {QUIET_MARGIN_MS} ms)\n{all}",
            self.what,
            acknowledged - self.cancelled_at
        );
        let after: Vec<String> = times
            .iter()
            .map(|t| t - self.cancelled_at)
            .filter(|after| *after > 0.0)
            .map(|after| format!("{after:.0} ms"))
            .collect();
        format!(
            "{before} progress before the cancel, {} after it [{}], the gateway's \
             acknowledgement {:.0} ms after it",
            after.len(),
            after.join(", "),
            acknowledged - self.cancelled_at
        )
    }
}

/// What crossed the wire, below the SDK.
pub fn check_wire(report: &Report, era: Era, aborted_id: &Value, api_id: &Value) {
    let all = &report.transcript;
    // No response for the call the client aborted, on any stream.
    assert_eq!(
        report.responses_to(aborted_id),
        Vec::<&Value>::new(),
        "a call the client cancelled gets no response\n{all}"
    );
    let aborted_post = report.post_of(aborted_id);
    match era {
        Era::V2025 => {
            // The SDK POSTed notifications/cancelled (202); the gateway then ended the call's
            // stream without a response.
            let notices: Vec<&Value> = report
                .exchanges
                .iter()
                .filter(|e| {
                    e["request"]["method"] == "notifications/cancelled"
                        && e["request"]["params"]["requestId"] == *aborted_id
                })
                .collect();
            assert_eq!(notices.len(), 1, "{all}");
            let notice = notices[0];
            assert_eq!(notice["status"], 202, "{notice}");
            assert_eq!(aborted_post["ended"], "eof", "{aborted_post}");
            let session = &report.exchanges[1]["session"];
            assert!(session.is_string(), "{all}");
            for exchange in &report.exchanges[1..] {
                assert_eq!(exchange["session"], *session, "{exchange}");
            }
        }
        Era::V2026 => {
            // The SDK closed the call's stream (no notification: 2026-07-28 HTTP has none).
            assert_eq!(
                report.notifications_sent("notifications/cancelled"),
                Vec::<&Value>::new(),
                "{all}"
            );
            assert_eq!(aborted_post["ended"], "client", "{aborted_post}");
            for exchange in &report.exchanges {
                assert!(exchange["session"].is_null(), "no sessions: {exchange}");
                assert_ne!(exchange["method"], "GET", "no GET stream: {exchange}");
            }
        }
    }
    // The API-cancelled call: its progress, then one response, the -32800 error, then the end.
    let api_post = report.post_of(api_id);
    let messages = api_post["messages"].as_array().expect("messages");
    let (last, progress) = messages.split_last().expect("messages on the stream");
    assert!(
        !progress.is_empty()
            && progress
                .iter()
                .all(|m| m["method"] == "notifications/progress"),
        "{api_post}"
    );
    assert_eq!(last["error"]["code"], -32800, "{api_post}");
    assert_eq!(report.responses_to(api_id).len(), 1, "{all}");
    // Results are written in the client's era: 2026-07-28's resultType only for 2026-07-28.
    for message in report.messages() {
        if let Some(result) = message.get("result") {
            assert_eq!(
                result.get("resultType").is_some(),
                era == Era::V2026,
                "{message}"
            );
        }
    }
}
