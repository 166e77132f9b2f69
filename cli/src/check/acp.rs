//! The ACP cancellation scenarios of `cancelkit check acp`, each yielding checks with a stable
//! id. The check plays an ACP client: `initialize` (protocol version 1, declaring the seed's
//! `cancellation: {request: true}`), `session/new`, then slow `session/prompt` turns (the
//! `--prompt` text) that it cancels in the ways ACP allows.

use std::ffi::OsString;
use std::time::Duration;

use serde_json::{Value, json};

use super::acp_ignore;
use super::acp_session::{AcpSession, CANCEL_REQUEST, CANCEL_REQUEST_SEED};
use super::{Check, Evidence, Outcome, Report, Unreachable, Word, pass_if};

/// The protocol versions the checks apply to.
const V1: &[&str] = &["1"];

/// The prompt text sent when `--prompt` is not given: cancelkit's example agent streams an
/// update each second for N seconds when told `sleep N`.
pub const DEFAULT_PROMPT: &str = "sleep 5";

const ANSWERED_ONCE: &str = "ACP 1a ($/cancel_request, shipped v1): the receiver MUST answer the cancelled request with a valid result or error -32800; JSON-RPC 2.0: exactly one response per request";
const SEED_ANSWERED: &str = "ACP 1b (seed $/cancelRequest): a recipient that declared cancellation.request MUST cancel and answer with -32800 or a valid (partial) result";
const STOP_REASON: &str = "ACP 1c (session/cancel): the pending session/prompt MUST be answered with a result whose stopReason is \"cancelled\" (schema: StopReason cancelled MUST be returned)";
const CASCADE: &str = "ACP 1a: on cancellation the receiver MAY cancel all nested activity; the cascading example of 1c shows the agent sending $/cancel_request for its own outstanding requests, but no MUST/SHOULD asks for it (the client MUST answer pending permission requests with outcome cancelled anyway), so MAY";
const KEEPS_SERVING: &str =
    "JSON-RPC 2.0: every request gets a response; a cancel ends one request, not the connection";

/// How long a prompt runs before it is cancelled.
const SETTLE: Duration = Duration::from_millis(300);
/// How long after a cancel the agent may take to cancel its own requests to the client before
/// the check answers them.
const CASCADE_WINDOW: Duration = Duration::from_millis(500);
/// How long after an answer a second answer is watched for.
const QUIET: Duration = Duration::from_millis(500);

/// What `cancelkit check acp` was asked to do.
#[derive(Debug, Clone)]
pub struct AcpOptions {
    /// The prompt text of the slow turns.
    pub prompt: String,
    /// How long each wait lasts.
    pub timeout: Duration,
    /// Whether only the MUST checks decide the exit code.
    pub musts_only: bool,
    /// Where the agent's stderr goes (`--stderr`; `None`: discarded).
    pub stderr: Option<std::path::PathBuf>,
}

/// One ACP check's result (ACP v1), with its evidence.
pub(super) fn check(
    id: &'static str,
    word: Word,
    basis: &'static str,
    result: Outcome,
    detail: impl Into<String>,
    ev: Evidence,
) -> Check {
    super::check(id, word, V1, basis, result, detail, ev)
}

/// Starts the agent, runs every scenario, and reports.
pub async fn run(options: &AcpOptions, command: &[OsString]) -> Result<Report, Unreachable> {
    let mut s = AcpSession::open(command, options.timeout).await?;
    let mut ev = Evidence::default();
    let session = s.new_session(&mut ev).await.ok_or_else(|| {
        let why = format!(
            "session/new was not answered with a sessionId within {:?}",
            options.timeout
        );
        Unreachable(why)
    })?;
    let mut checks = Vec::new();
    let session = cancel_request(&mut s, options, Some(session), false, &mut checks).await;
    let session = cancel_request(&mut s, options, session, true, &mut checks).await;
    let session = session_cancel(&mut s, options, session, &mut checks).await;
    acp_ignore::ignored(&mut s, session.is_some(), &mut checks).await;
    checks.push(acp_ignore::initialize_not_cancelled(command, options.timeout).await);
    let verdict = Report::decide(&checks, options.musts_only);
    let report = Report {
        target: "acp",
        command: command.iter().map(|a| a.to_string_lossy().into()).collect(),
        url: None,
        revision: s.init["protocolVersion"].to_string(),
        negotiated_by: "initialize".into(),
        slow_call: json!({"method": "session/prompt", "prompt": options.prompt}),
        fast_call: json!({"method": "session/new"}),
        agent: Some(json!({
            "agentInfo": s.init.get("agentInfo"),
            "agentCapabilities": s.init.get("agentCapabilities"),
        })),
        verdict,
        musts_only: options.musts_only,
        checks,
    };
    s.answer_outstanding(&mut Evidence::default()).await;
    s.client.shutdown().await;
    Ok(report)
}

/// `acp.cancel_request.*` (shipped `$/cancel_request {requestId}`) or, with `seed`,
/// `acp.cancel_request_seed.*` (`$/cancelRequest {id}`, only when the agent declared it): a
/// prompt in flight is cancelled and answered exactly once with -32800 or a result; then
/// `session/new` is answered. Returns the session to use next.
async fn cancel_request(
    s: &mut AcpSession,
    options: &AcpOptions,
    session: Option<String>,
    seed: bool,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let (answered_id, serving_id, basis) = if seed {
        (
            "acp.cancel_request_seed.answered_once",
            "acp.cancel_request_seed.keeps_serving",
            SEED_ANSWERED,
        )
    } else {
        (
            "acp.cancel_request.answered_once",
            "acp.cancel_request.keeps_serving",
            ANSWERED_ONCE,
        )
    };
    let mut ev = Evidence::default();
    let not_applicable = if seed && !s.declares_seed_cancel() {
        Some("the agent did not declare agentCapabilities.cancellation.request: true".to_owned())
    } else if session.is_none() {
        Some("no session to prompt in (session/new was not answered)".to_owned())
    } else {
        None
    };
    if let Some(why) = not_applicable {
        checks.push(check(
            answered_id,
            Word::Must,
            basis,
            Outcome::NotApplicable,
            why.clone(),
            ev.clone(),
        ));
        checks.push(check(
            serving_id,
            Word::Must,
            KEEPS_SERVING,
            Outcome::NotApplicable,
            why,
            ev,
        ));
        return session;
    }
    let session = session.unwrap_or_default();
    let (id, mut prompt) = s.prompt(&session, &options.prompt, &mut ev).await;
    let (result, detail) = if let Some(early) = s.wait(&mut prompt, SETTLE, &mut ev).await {
        ev.got(&early);
        let detail = "the prompt was answered before the cancel: give a slower --prompt";
        (Outcome::NotApplicable, detail.to_owned())
    } else {
        if seed {
            s.notify(CANCEL_REQUEST_SEED, json!({"id": id}), &mut ev)
                .await;
        } else {
            s.notify(CANCEL_REQUEST, json!({"requestId": id}), &mut ev)
                .await;
        }
        let mut answer = s.wait(&mut prompt, CASCADE_WINDOW, &mut ev).await;
        if answer.is_none() && !s.outstanding.is_empty() {
            ev.note("the check answers the agent's requests still pending, as cancelled");
            s.answer_outstanding(&mut ev).await;
        }
        if answer.is_none() {
            answer = s.wait(&mut prompt, s.timeout, &mut ev).await;
        }
        judge_answer(s, &id, answer, &mut ev).await
    };
    checks.push(check(answered_id, Word::Must, basis, result, detail, ev));
    keeps_serving(s, serving_id, checks).await
}

/// Whether a cancelled request's answer is -32800 or a result, and the only one.
async fn judge_answer(
    s: &mut AcpSession,
    id: &Value,
    answer: Option<Value>,
    ev: &mut Evidence,
) -> (Outcome, String) {
    let Some(answer) = answer else {
        return (
            Outcome::Fail,
            format!("no answer within {:?} of the cancel", s.timeout),
        );
    };
    ev.got(&answer);
    s.idle(QUIET, ev).await;
    let again = s
        .take_replies()
        .into_iter()
        .filter(|r| r.get("id") == Some(id))
        .count();
    if again > 0 {
        return (Outcome::Fail, format!("answered {} times", again + 1));
    }
    let code = answer["error"]["code"].as_i64();
    match (answer.get("result"), code) {
        (Some(result), _) => {
            let stop = result["stopReason"].as_str().unwrap_or("none");
            (
                Outcome::Pass,
                format!("answered once with a result (stopReason {stop})"),
            )
        }
        (None, Some(-32800)) => (Outcome::Pass, "answered once with -32800".into()),
        (None, Some(code)) => (
            Outcome::Fail,
            format!("answered with error {code}, neither -32800 nor a result"),
        ),
        (None, None) => (
            Outcome::Fail,
            "answered with neither a result nor an error".into(),
        ),
    }
}

/// A `session/new` is answered; its session is the one to use next.
async fn keeps_serving(
    s: &mut AcpSession,
    id: &'static str,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let mut ev = Evidence::default();
    let session = s.new_session(&mut ev).await;
    let detail = match &session {
        Some(_) => "a session/new after the cancel was answered",
        None => "a session/new after the cancel got no sessionId",
    };
    checks.push(check(
        id,
        Word::Must,
        KEEPS_SERVING,
        pass_if(session.is_some()),
        detail,
        ev,
    ));
    s.answer_outstanding(&mut Evidence::default()).await;
    session
}

/// `acp.session_cancel.*`: `session/cancel` during a prompt ends the turn with a result whose
/// `stopReason` is `cancelled`; whether the agent cancelled its own requests to the client; and
/// `session/new` is answered afterwards. Returns the session to use next.
async fn session_cancel(
    s: &mut AcpSession,
    options: &AcpOptions,
    session: Option<String>,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let mut ev = Evidence::default();
    let Some(session) = session else {
        let why = "no session to prompt in (session/new was not answered)";
        for (id, word, basis) in [
            ("acp.session_cancel.stop_reason", Word::Must, STOP_REASON),
            ("acp.session_cancel.cascade", Word::May, CASCADE),
            (
                "acp.session_cancel.keeps_serving",
                Word::Must,
                KEEPS_SERVING,
            ),
        ] {
            checks.push(check(
                id,
                word,
                basis,
                Outcome::NotApplicable,
                why,
                Evidence::default(),
            ));
        }
        return None;
    };
    s.cancelled_by_agent.clear();
    let (_, mut prompt) = s.prompt(&session, &options.prompt, &mut ev).await;
    let early = s.wait(&mut prompt, SETTLE, &mut ev).await;
    let mut cascade_ev = Evidence::default();
    let (stop, cascade) = if let Some(early) = early {
        ev.got(&early);
        let why = "the prompt was answered before the cancel: give a slower --prompt";
        (
            (Outcome::NotApplicable, why.to_owned()),
            (Outcome::NotApplicable, why.to_owned()),
        )
    } else {
        let asked = s.outstanding.clone();
        s.notify("session/cancel", json!({"sessionId": session}), &mut ev)
            .await;
        let mut answer = s.wait(&mut prompt, CASCADE_WINDOW, &mut ev).await;
        if answer.is_some() {
            // a cancel of the agent's own request may follow its answer closely
            s.idle(SETTLE / 3, &mut ev).await;
        }
        let cancelled = s.cancelled_by_agent.clone();
        if !s.outstanding.is_empty() {
            ev.note("the client answers the agent's pending requests as cancelled");
            s.answer_outstanding(&mut ev).await;
        }
        if answer.is_none() {
            answer = s.wait(&mut prompt, s.timeout, &mut ev).await;
        }
        let stop = judge_stop_reason(s, answer, &mut ev).await;
        cascade_ev.note(format!(
            "the agent's requests during the prompt: {:?}",
            asked
                .iter()
                .map(|r| format!("{} {}", r.method, r.id))
                .collect::<Vec<_>>()
        ));
        let cascade = if asked.is_empty() {
            let why = "the agent sent no request to the client during the prompt (cancelkit's example agent asks for permission with --prompt ask)";
            (Outcome::NotApplicable, why.to_owned())
        } else {
            let missed: Vec<String> = asked
                .iter()
                .filter(|r| !cancelled.contains(&r.id))
                .map(|r| format!("{} {}", r.method, r.id))
                .collect();
            let named: Vec<String> = cancelled.iter().map(Value::to_string).collect();
            cascade_ev.note(format!("ids the agent cancelled: [{}]", named.join(", ")));
            if missed.is_empty() {
                (
                    Outcome::Pass,
                    format!(
                        "the agent sent $/cancel_request for all {} of its requests",
                        asked.len()
                    ),
                )
            } else {
                let detail = format!(
                    "no $/cancel_request within {CASCADE_WINDOW:?} of session/cancel for: {}",
                    missed.join(", ")
                );
                (Outcome::Info, detail)
            }
        };
        (stop, cascade)
    };
    checks.push(check(
        "acp.session_cancel.stop_reason",
        Word::Must,
        STOP_REASON,
        stop.0,
        stop.1,
        ev,
    ));
    checks.push(check(
        "acp.session_cancel.cascade",
        Word::May,
        CASCADE,
        cascade.0,
        cascade.1,
        cascade_ev,
    ));
    keeps_serving(s, "acp.session_cancel.keeps_serving", checks).await
}

/// Whether the prompt was answered once with a result whose `stopReason` is `cancelled`.
async fn judge_stop_reason(
    s: &mut AcpSession,
    answer: Option<Value>,
    ev: &mut Evidence,
) -> (Outcome, String) {
    let Some(answer) = answer else {
        return (
            Outcome::Fail,
            format!("no answer within {:?} of session/cancel", s.timeout),
        );
    };
    ev.got(&answer);
    if let Some(code) = answer["error"]["code"].as_i64() {
        return (
            Outcome::Fail,
            format!("answered with error {code}, not a result with stopReason cancelled"),
        );
    }
    match answer["result"]["stopReason"].as_str() {
        Some("cancelled") => (Outcome::Pass, "answered with stopReason cancelled".into()),
        Some(other) => (
            Outcome::Fail,
            format!("answered with stopReason {other}, not cancelled"),
        ),
        None => (Outcome::Fail, "answered without a stopReason".into()),
    }
}
