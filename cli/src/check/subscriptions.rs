//! The subscriptions scenarios of 2026-07-28.
//!
//! * A `subscriptions/listen` stream, if the server offers one: it is acknowledged
//!   (`notifications/subscriptions/acknowledged` carrying the listen request's id as
//!   `io.modelcontextprotocol/subscriptionId`), then the client cancels it with
//!   `notifications/cancelled`: the stream ends with no response, and the server keeps serving.
//! * Over the whole run, the server sends `notifications/cancelled` only to end a
//!   `subscriptions/listen` stream, never for anything else (every such frame is recorded by the
//!   wire client, whoever took it, and judged at the end).

use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;
use serde_json::{Value, json};

use super::mcp::{NO_RESPONSE, QUIET};
use super::session::{Session, V2026};
use super::{Check, Evidence, Outcome, Word};
use super::{check, pass_if};

/// The revision with `subscriptions/listen`.
const R2026: &[&str] = &[McpRevision::V2026_07_28.text()];
/// The `_meta` key naming the subscription a frame belongs to.
use cancelkit_wire::meta::SUBSCRIPTION_ID;
/// How often the frames are looked at while waiting for the acknowledgement.
const LOOK: Duration = Duration::from_millis(20);

const ACKNOWLEDGED: &str = "MCP 2026-07-28: notifications/subscriptions/acknowledged MUST be the first message the server sends carrying the subscription's id";
const ONLY_LISTEN: &str = "MCP 2026-07-28: a server sends notifications/cancelled only to end a subscriptions/listen stream and MUST NOT use it to cancel any other request";

/// The check ids, in the order they are reported.
pub const IDS: [&str; 3] = [
    "mcp.subscriptions.listen_acknowledged",
    "mcp.subscriptions.listen_cancel",
    "mcp.subscriptions.server_cancels_only_listen",
];

/// The frame's subscription id, if it carries one.
fn subscription_of(frame: &Value) -> Option<&Value> {
    frame.get("params")?.get("_meta")?.get(SUBSCRIPTION_ID)
}

/// Opens a `subscriptions/listen` stream and cancels it; returns the ids of the listen requests
/// sent (the only ones a server may send `notifications/cancelled` for).
pub async fn listen(s: &mut Session, checks: &mut Vec<Check>) -> Vec<Value> {
    let na = |checks: &mut Vec<Check>, why: &str, ev: Evidence| {
        let outcome = Outcome::NotApplicable;
        let (a, b) = (IDS[0], IDS[1]);
        checks.push(check(
            a,
            Word::Must,
            R2026,
            ACKNOWLEDGED,
            outcome,
            why,
            ev.clone(),
        ));
        checks.push(check(b, Word::Should, R2026, NO_RESPONSE, outcome, why, ev));
    };
    if s.version != V2026 {
        let why = format!("{} has no subscriptions/listen", s.version);
        na(checks, &why, Evidence::default());
        return Vec::new();
    }
    let mut ev = Evidence::default();
    s.client.others();
    let filter = json!({"notifications": {"toolsListChanged": true}});
    let (id, mut pending) = s.call("subscriptions/listen", filter, &mut ev).await;
    // The acknowledgement, or an answer (a refusal), whichever comes first.
    let deadline = Instant::now() + s.options.timeout;
    let (mut ack, mut first, mut answer) = (None, None, None);
    while ack.is_none() && answer.is_none() && Instant::now() < deadline {
        tokio::time::sleep(LOOK).await;
        answer = pending.now();
        for frame in s.client.others() {
            if subscription_of(&frame) == Some(&id) {
                first.get_or_insert_with(|| frame.clone());
                if frame["method"] == "notifications/subscriptions/acknowledged" {
                    ev.got(&frame);
                    ack.get_or_insert(frame);
                }
            }
        }
    }
    if let (Some(answer), None) = (&answer, &ack) {
        ev.got(answer);
        let why = match answer["error"]["code"].as_i64() {
            Some(code) => format!("the server does not offer subscriptions/listen ({code})"),
            None => "subscriptions/listen was answered at once, with no stream".to_owned(),
        };
        na(checks, &why, ev);
        return vec![id];
    }
    let first_is_ack = first.is_some() && first == ack;
    let detail = match (&ack, first_is_ack) {
        (Some(_), true) => format!(
            "acknowledged: {}",
            ack.as_ref()
                .map_or(Value::Null, |a| a["params"]["notifications"].clone())
        ),
        (Some(_), false) => {
            "acknowledged, but another frame of the subscription came first".to_owned()
        }
        (None, _) => format!(
            "neither acknowledged nor answered within {:?}",
            s.options.timeout
        ),
    };
    checks.push(check(
        IDS[0],
        Word::Must,
        R2026,
        ACKNOWLEDGED,
        pass_if(first_is_ack),
        detail,
        ev,
    ));

    let mut ev = Evidence::default();
    s.cancel(
        json!({"requestId": id, "reason": "cancelkit check"}),
        &mut ev,
    )
    .await;
    let response = pending.wait(QUIET).await;
    let after: Vec<Value> = s
        .client
        .others()
        .into_iter()
        .filter(|f| subscription_of(f) == Some(&id) || f["params"]["requestId"] == id)
        .collect();
    after.iter().for_each(|f| ev.got(f));
    let alive = s.alive(&mut ev).await;
    let detail = match (&response, &alive) {
        (Some(frame), _) => {
            ev.got(frame);
            let what = if frame.get("error").is_some() {
                "an error"
            } else {
                "a result"
            };
            format!("the cancelled subscriptions/listen was answered with {what}")
        }
        (None, Err(why)) => format!("no response to the cancelled stream, but {why}"),
        (None, Ok(())) if after.is_empty() => {
            "the stream ended silently: no response, no more frames, and the server still serves"
                .into()
        }
        (None, Ok(())) => {
            let echoed = after
                .iter()
                .filter(|f| f["method"] == "notifications/cancelled")
                .count();
            format!(
                "no response, the server still serves; after the cancel: {} notifications/cancelled \
                 for the stream and {} other frame(s) of it",
                echoed,
                after.len() - echoed
            )
        }
    };
    let ok = response.is_none() && alive.is_ok();
    checks.push(check(
        IDS[1],
        Word::Should,
        R2026,
        NO_RESPONSE,
        pass_if(ok),
        detail,
        ev,
    ));
    vec![id]
}

/// Judges every `notifications/cancelled` the server sent during the run: at 2026-07-28 each
/// must name one of the `listens` (the `subscriptions/listen` requests sent).
pub fn server_cancels(s: &Session, listens: &[Value], checks: &mut Vec<Check>) {
    let mut ev = Evidence::default();
    if s.version != V2026 {
        let why = format!("at {} a server may cancel its own requests", s.version);
        let na = Outcome::NotApplicable;
        checks.push(check(IDS[2], Word::Must, R2026, ONLY_LISTEN, na, why, ev));
        return;
    }
    let cancels = s.client.cancels();
    let wrong: Vec<&Value> = cancels
        .iter()
        .filter(|f| !listens.contains(&f["params"]["requestId"]))
        .collect();
    wrong.iter().for_each(|f| ev.got(f));
    let detail = match (cancels.len(), wrong.len()) {
        (0, _) => "the server sent no notifications/cancelled during the run".to_owned(),
        (n, 0) => {
            format!("all {n} notifications/cancelled from the server ended a subscriptions/listen")
        }
        (n, w) => {
            format!("{w} of the server's {n} notifications/cancelled named no subscriptions/listen")
        }
    };
    checks.push(check(
        IDS[2],
        Word::Must,
        R2026,
        ONLY_LISTEN,
        pass_if(wrong.is_empty()),
        detail,
        ev,
    ));
}
