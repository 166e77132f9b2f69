//! `acp.cancel_request.*` and `acp.cancel_request_draft.*`: a running prompt turn cancelled by
//! id, with the shipped `$/cancel_request {requestId}` or the draft's `$/cancelRequest {id}`.
//!
//! ACP v1 lets a receiver ignore `$/cancel_request`, as long as the request is still answered
//! once, with a result or -32800; so `answered_once` (MUST) asks exactly that, and `honoured`
//! (MAY) says what the agent did with the cancel, judged against the uncancelled turn: an
//! answer -32800 or `stopReason: "cancelled"`, or one that came sooner than the turn ends by
//! itself (for a turn that asks the client something: while the client still held that
//! request). The draft form is a MUST for an agent that declared `cancellation.request`, so
//! there the cancel must have had its effect for `answered_once` to pass.

use std::time::Instant;

use serde_json::{Value, json};

use super::acp::{self, AcpOptions, KEEPS_SERVING, QUIET, Running, check, not_applicable};
use super::acp_calibrate::Turn;
use super::acp_session::{AcpSession, Answering, CANCEL_REQUEST, CANCEL_REQUEST_DRAFT, Reply};
use super::ms;
use super::{Check, Evidence, Outcome, Word};

const ANSWERED_ONCE: &str = "ACP 1a ($/cancel_request, shipped v1): the receiver MUST answer the cancelled request with a valid result or error -32800; JSON-RPC 2.0: exactly one response per request";
const HONOURED: &str = "ACP 1a: on $/cancel_request the receiver MAY cancel the request and its nested activity; '$/' notifications may be ignored";
const DRAFT_ANSWERED: &str = "ACP 1b (draft $/cancelRequest): a recipient that declared cancellation.request MUST cancel and answer with -32800 or a valid (partial) result";

/// What came of one cancelled prompt.
struct Answered {
    /// When the prompt was sent.
    sent: Instant,
    /// The answer, and when it came.
    answer: Option<(Value, Instant)>,
    /// Whether the client answered a request it held only after the cancel (the agent still
    /// waited for it).
    held: bool,
    /// More answers to the same id.
    again: usize,
    /// Replies to the cancel notification itself (frames without the prompt's id).
    to_notification: Vec<Value>,
}

/// Runs the scenario: `acp.cancel_request.{answered_once,honoured,keeps_serving}`, or with
/// `draft` `acp.cancel_request_draft.{answered_once,keeps_serving}` (only when the agent declared
/// the draft form). Returns the session to use next.
pub async fn cancel_request(
    s: &mut AcpSession,
    options: &AcpOptions,
    turn: &Result<Turn, String>,
    session: Option<String>,
    draft: bool,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let (answered_id, serving_id) = if draft {
        (
            "acp.cancel_request_draft.answered_once",
            "acp.cancel_request_draft.keeps_serving",
        )
    } else {
        (
            "acp.cancel_request.answered_once",
            "acp.cancel_request.keeps_serving",
        )
    };
    let mut ids = vec![(
        answered_id,
        Word::Must,
        if draft { DRAFT_ANSWERED } else { ANSWERED_ONCE },
    )];
    if !draft {
        ids.push(("acp.cancel_request.honoured", Word::May, HONOURED));
    }
    let why = match (draft && !s.declares_draft_cancel(), &session, turn) {
        (true, _, _) => Some(
            "the agent did not declare agentCapabilities.cancellation.request: true".to_owned(),
        ),
        (_, None, _) => Some("no session to prompt in (session/new was not answered)".to_owned()),
        (_, _, Err(why)) => Some(why.clone()),
        _ => None,
    };
    let (Some(session), Ok(turn), None) = (session.as_deref(), turn, why.as_ref()) else {
        let why = why.unwrap_or_default();
        ids.push((serving_id, Word::Must, KEEPS_SERVING));
        not_applicable(checks, &ids, &why);
        return session;
    };
    let mut ev = Evidence::default();
    let run = match acp::start(s, session, &options.prompt, turn, &mut ev).await {
        Ok(run) => run,
        Err(why) => {
            let early = check(
                ids[0].0,
                ids[0].1,
                ids[0].2,
                Outcome::NotApplicable,
                &why,
                ev,
            );
            checks.push(early);
            not_applicable(checks, &ids[1..], &why);
            return acp::keeps_serving(s, serving_id, checks).await;
        }
    };
    let (method, params) = if draft {
        (CANCEL_REQUEST_DRAFT, json!({"id": run.id}))
    } else {
        (CANCEL_REQUEST, json!({"requestId": run.id}))
    };
    s.take_replies();
    s.notify(method, params, &mut ev).await;
    let cancelled = Instant::now();
    let answered = follow(s, options, turn, run, cancelled, &mut ev).await;
    let (once, honoured) = judge(turn, &answered, cancelled, &mut ev);
    // the draft form makes cancelling a MUST for an agent that declared it
    let once = if draft && once.0 == Outcome::Pass && honoured.0 != Outcome::Pass {
        let detail = format!(
            "the agent declared cancellation.request, but the cancel had no effect: {}",
            honoured.1
        );
        (Outcome::Fail, detail)
    } else {
        once
    };
    checks.push(check(
        ids[0].0,
        ids[0].1,
        ids[0].2,
        once.0,
        once.1,
        ev.clone(),
    ));
    if !draft {
        checks.push(check(
            ids[1].0, ids[1].1, ids[1].2, honoured.0, honoured.1, ev,
        ));
    }
    acp::keeps_serving(s, serving_id, checks).await
}

/// Follows a cancelled prompt to its answer: for `--timeout` the agent's requests stay held;
/// a request the agent still waits for then is answered as `--permission` says (and later ones
/// at once), and the answer is waited for until the turn's natural end has passed.
async fn follow(
    s: &mut AcpSession,
    options: &AcpOptions,
    turn: &Turn,
    mut run: Running,
    cancelled: Instant,
    ev: &mut Evidence,
) -> Answered {
    let mut answer = s
        .wait_until(&mut run.pending, cancelled + options.timeout, ev)
        .await;
    let mut held = false;
    if answer.is_none() && !s.outstanding.is_empty() {
        let waiting: Vec<String> = s
            .outstanding
            .iter()
            .map(super::acp_session::AgentRequest::name)
            .collect();
        ev.note(format!(
            "{} ms after the cancel the agent still waits for the client's answer to {}: the \
             client answers as --permission {} says, as it would without a cancel",
            ms(cancelled.elapsed()),
            waiting.join(", "),
            s.permission.name()
        ));
        held = true;
        s.answer_outstanding(Reply::Decide(s.permission), ev).await;
    }
    if answer.is_none() {
        s.answering = Answering::Now(Reply::Decide(s.permission));
        let last = acp::last_chance(turn, &run, cancelled, options.timeout);
        answer = s.wait_until(&mut run.pending, last, ev).await;
    }
    s.answering = Answering::Hold;
    if let Some((frame, _)) = &answer {
        ev.got(frame);
        s.idle(QUIET, ev).await;
    }
    let replies = s.take_replies();
    let id = &run.id;
    let again = replies.iter().filter(|r| r.get("id") == Some(id)).count();
    let to_notification: Vec<Value> = replies
        .into_iter()
        .filter(|r| r.get("id") != Some(id))
        .collect();
    Answered {
        sent: run.sent,
        answer,
        held,
        again,
        to_notification,
    }
}

/// `answered_once` and `honoured`, each with its detail.
fn judge(
    turn: &Turn,
    answered: &Answered,
    cancelled: Instant,
    ev: &mut Evidence,
) -> ((Outcome, String), (Outcome, String)) {
    let replied = if answered.to_notification.is_empty() {
        String::new()
    } else {
        for frame in &answered.to_notification {
            ev.note(format!("a reply to the cancel notification: {frame}"));
        }
        let codes: Vec<String> = answered
            .to_notification
            .iter()
            .map(|f| f["error"]["code"].to_string())
            .collect();
        format!(
            "; it replied to the cancel notification ({}), which JSON-RPC forbids",
            codes.join(", ")
        )
    };
    let Some((answer, at)) = &answered.answer else {
        let why = "the prompt got no answer after the cancel".to_owned();
        let detail = format!(
            "no answer, although the client answered every request of the agent's and waited \
             past the turn's natural end ({} ms uncancelled){replied}",
            ms(turn.natural)
        );
        return ((Outcome::Fail, detail), (Outcome::NotApplicable, why));
    };
    let after = ms(at.saturating_duration_since(cancelled));
    if answered.again > 0 {
        let detail = format!("answered {} times", answered.again + 1);
        let why = "the prompt was answered more than once (see answered_once)".to_owned();
        return ((Outcome::Fail, detail), (Outcome::NotApplicable, why));
    }
    let code = answer["error"]["code"].as_i64();
    let stop = answer["result"]["stopReason"].as_str().unwrap_or("none");
    let once = match (answer.get("result"), code) {
        (Some(_), _) => (
            Outcome::Pass,
            format!("answered once with a result (stopReason {stop}), {after} ms after the cancel"),
        ),
        (None, Some(-32800)) => (
            Outcome::Pass,
            format!("answered once with -32800, {after} ms after the cancel"),
        ),
        (None, Some(code)) => (
            Outcome::Fail,
            format!("answered with error {code}, neither -32800 nor a result"),
        ),
        (None, None) => (
            Outcome::Fail,
            "answered with neither a result nor an error".into(),
        ),
    };
    if once.0 != Outcome::Pass {
        let why = "the prompt was not answered with a result or -32800 (see answered_once)";
        return (once, (Outcome::NotApplicable, why.into()));
    }
    let elapsed = at.saturating_duration_since(answered.sent);
    // `cancelled` is the cancel's mark only if the turn does not end that way by itself (with
    // the same decisions from the client, some agents end a refused turn `cancelled`)
    let marked = code == Some(-32800) || (stop == "cancelled" && turn.stop_reason != "cancelled");
    let honoured = if answered.held {
        (
            Outcome::Info,
            format!(
                "the cancel had no effect: the agent went on waiting for the client's answer to \
                 its request, then ended the turn with {}{replied}",
                if code.is_some() {
                    "-32800".to_owned()
                } else {
                    format!("stopReason {stop}")
                }
            ),
        )
    } else if marked {
        let how = if code.is_some() {
            "-32800"
        } else {
            "stopReason cancelled"
        };
        (
            Outcome::Pass,
            format!("the cancel ended the turn: answered {how} {after} ms after it{replied}"),
        )
    } else if turn.ended_early(elapsed) {
        let how = if turn.asks() {
            "while the client still held its request".to_owned()
        } else {
            format!("sooner than uncancelled ({} ms)", ms(turn.natural))
        };
        (
            Outcome::Pass,
            format!(
                "the cancel ended the turn: answered with stopReason {stop} {after} ms after it, \
                 {how}{replied}"
            ),
        )
    } else {
        (
            Outcome::Info,
            format!(
                "the cancel had no effect: the turn ran to its end (stopReason {stop} {} ms after \
                 the prompt; uncancelled it took {} ms){replied}",
                ms(elapsed),
                ms(turn.natural)
            ),
        )
    };
    (once, honoured)
}
