//! The ACP scenarios of `cancelkit check acp` that need no prompt: cancels that must be ignored
//! (`acp.ignore.*`) and `initialize`, which is never cancelled (`acp.initialize.not_cancelled`).

use std::ffi::OsString;
use std::time::Duration;

use serde_json::json;

use super::acp::check;
use super::acp_session::{AcpSession, CANCEL_REQUEST, CANCEL_REQUEST_DRAFT, initialize_params};
use super::pass_if;
use super::{Check, Evidence, Outcome, Unreachable, Word};

const IGNORED: &str = "JSON-RPC 2.0: a notification is never answered; ACP 1a: a cancel for a completed or unknown request is ignored";
const NEVER_INITIALIZE: &str =
    "ACP 1a/1b: initialize cannot be cancelled; it is answered with its result";

/// How long an ignored cancel is watched for a reply before the liveness check.
const IGNORE_QUIET: Duration = Duration::from_millis(300);

/// `acp.ignore.*`: cancels for an unknown id, a completed request, and malformed cancels get no
/// reply of any kind, and the agent still answers `session/new`.
pub async fn ignored(s: &mut AcpSession, serving: bool, checks: &mut Vec<Check>) {
    let mut done_ev = Evidence::default();
    let (done, mut pending) = s
        .call(
            "session/new",
            json!({"cwd": std::env::temp_dir(), "mcpServers": []}),
            &mut done_ev,
        )
        .await;
    let completed = match s.wait(&mut pending, s.timeout, &mut done_ev).await {
        Some(frame) => {
            done_ev.got(&frame);
            vec![
                (CANCEL_REQUEST, json!({"requestId": done})),
                (CANCEL_REQUEST_DRAFT, json!({"id": done})),
            ]
        }
        None => vec![],
    };
    let unknown = vec![
        (
            CANCEL_REQUEST,
            json!({"requestId": "cancelkit-check-never-sent"}),
        ),
        (
            CANCEL_REQUEST_DRAFT,
            json!({"id": "cancelkit-check-never-sent"}),
        ),
    ];
    let malformed = vec![
        (CANCEL_REQUEST, json!({})),
        (CANCEL_REQUEST, json!({"requestId": {}})),
        (CANCEL_REQUEST, json!({"requestId": true})),
        (CANCEL_REQUEST_DRAFT, json!({})),
    ];
    let cases = [
        ("acp.ignore.unknown_id", unknown, Evidence::default()),
        ("acp.ignore.completed_id", completed, done_ev),
        ("acp.ignore.malformed", malformed, Evidence::default()),
    ];
    for (id, cancels, mut ev) in cases {
        if cancels.is_empty() || !serving {
            let why = "the agent did not answer session/new, so there is nothing to compare with";
            checks.push(check(
                id,
                Word::Must,
                IGNORED,
                Outcome::NotApplicable,
                why,
                ev,
            ));
            continue;
        }
        s.take_replies();
        for (method, params) in cancels {
            s.notify(method, params, &mut ev).await;
        }
        s.idle(IGNORE_QUIET, &mut ev).await;
        let alive = s.new_session(&mut ev).await.is_some();
        let replies = s.take_replies();
        let detail = match (alive, replies.len()) {
            (_, n @ 1..) => format!("{n} reply frame(s) to the cancels"),
            (true, _) => "ignored: no reply, and a session/new is still answered".to_owned(),
            (false, _) => "no reply, but a session/new afterwards got no sessionId".to_owned(),
        };
        checks.push(check(
            id,
            Word::Must,
            IGNORED,
            pass_if(alive && replies.is_empty()),
            detail,
            ev,
        ));
    }
}

/// `acp.initialize.not_cancelled`: on a second connection, `$/cancel_request` for `initialize`
/// sent right after it; `initialize` is answered with its result, not -32800.
pub async fn initialize_not_cancelled(command: &[OsString], timeout: Duration) -> Check {
    let mut ev = Evidence::default();
    let (result, detail) = match AcpSession::spawn(command, timeout) {
        Err(Unreachable(why)) => (Outcome::Fail, format!("the second connection: {why}")),
        Ok(mut s) => {
            let (id, mut pending) = s.call("initialize", initialize_params(), &mut ev).await;
            s.notify(CANCEL_REQUEST, json!({"requestId": id}), &mut ev)
                .await;
            let answer = s.wait(&mut pending, timeout, &mut ev).await;
            let outcome = match &answer {
                None => (
                    Outcome::Fail,
                    format!("initialize got no answer within {timeout:?}"),
                ),
                Some(a) if a["result"]["protocolVersion"].is_u64() => (
                    Outcome::Pass,
                    "initialize was answered with its result".to_owned(),
                ),
                Some(a) => match a["error"]["code"].as_i64() {
                    Some(-32800) => (
                        Outcome::Fail,
                        "initialize was cancelled (-32800)".to_owned(),
                    ),
                    Some(code) => (
                        Outcome::Fail,
                        format!("initialize was answered with error {code}"),
                    ),
                    None => (
                        Outcome::Fail,
                        "initialize was answered without a protocolVersion".to_owned(),
                    ),
                },
            };
            if let Some(a) = &answer {
                ev.got(a);
            }
            s.client.shutdown().await;
            outcome
        }
    };
    check(
        "acp.initialize.not_cancelled",
        Word::Must,
        NEVER_INITIALIZE,
        result,
        detail,
        ev,
    )
}
