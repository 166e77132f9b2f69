//! The ACP cancellation scenarios of `cancelkit check acp`, each yielding checks with a stable
//! id. The check plays an ACP client: `initialize` (protocol version 1, declaring the draft's
//! `cancellation: {request: true}`), `session/new`, the `--prompt` turn once uncancelled to
//! measure it ([`acp_calibrate`]), then the same turn cancelled in each way
//! ACP allows ([`acp_request`], [`acp_turn`]).
//!
//! The client's own behaviour is an explicit choice, the same for every agent: while a turn
//! runs, the agent's requests to the client are held unanswered (a user who has not decided
//! yet); a per-request cancel changes nothing about them, so a held permission request is
//! answered only if the agent still waits for it `--timeout` after the cancel, and then as
//! `--permission` says, as it would be without a cancel; only after `session/cancel` does the
//! client answer them `cancelled`, as ACP requires of it.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::acp_calibrate::{self, Turn};
use super::acp_session::{AcpSession, Answering, Permission, Reply};
use super::wire::Pending;
use super::{
    Check, Evidence, Outcome, Report, Unreachable, Word, acp_ignore, acp_request, acp_turn, pass_if,
};

/// The protocol versions the checks apply to.
const V1: &[&str] = &["1"];

/// The prompt text sent when `--prompt` is not given: cancelkit's example agent streams an
/// update each second for N seconds when told `sleep N`.
pub const DEFAULT_PROMPT: &str = "sleep 2";

pub(super) const KEEPS_SERVING: &str =
    "JSON-RPC 2.0: every request gets a response; a cancel ends one request, not the connection";

/// How long after an answer a second answer is watched for.
pub(super) const QUIET: Duration = Duration::from_millis(500);
/// How often a wait for the agent's first request looks again.
const LOOK: Duration = Duration::from_millis(20);

/// What `cancelkit check acp` was asked to do.
#[derive(Debug, Clone)]
pub struct AcpOptions {
    /// The prompt text of the slow turns.
    pub prompt: String,
    /// How long each wait lasts.
    pub timeout: Duration,
    /// The user's decision the check plays on a permission request (`--permission`).
    pub permission: Permission,
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

/// Pushes each `(id, word, basis)` as `n/a` with the reason `why`.
pub(super) fn not_applicable(
    checks: &mut Vec<Check>,
    ids: &[(&'static str, Word, &'static str)],
    why: &str,
) {
    super::not_applicable(checks, V1, ids, why);
}

/// Starts the agent, measures the prompt, runs every scenario, and reports.
pub async fn run(options: &AcpOptions, command: &[OsString]) -> Result<Report, Unreachable> {
    let mut s = AcpSession::open(command, options.timeout).await?;
    s.permission = options.permission;
    let mut ev = Evidence::default();
    let session = s.new_session(&mut ev).await.ok_or_else(|| {
        let why = format!(
            "session/new was not answered with a sessionId within {:?}",
            options.timeout
        );
        Unreachable(why)
    })?;
    let turn = acp_calibrate::measure(&mut s, &session, &options.prompt).await;
    let mut checks = Vec::new();
    let turn = &turn;
    // each scenario prompts in the session the previous one's liveness check created
    let mut session = Some(session);
    for draft in [false, true] {
        session =
            acp_request::cancel_request(&mut s, options, turn, session, draft, &mut checks).await;
    }
    let session = acp_turn::session_cancel(&mut s, options, turn, session, &mut checks).await;
    acp_ignore::ignored(&mut s, session.is_some(), &mut checks).await;
    checks.push(acp_ignore::initialize_not_cancelled(command, options.timeout).await);
    let verdict = Report::decide(&checks, options.musts_only);
    let mut slow_call = match turn {
        Ok(turn) => turn.describe(),
        Err(why) => json!({"usable": false, "why_not": why}),
    };
    slow_call["method"] = json!("session/prompt");
    slow_call["prompt"] = json!(options.prompt);
    slow_call["permission"] = json!(options.permission.name());
    let report = Report {
        target: "acp",
        command: command.iter().map(|a| a.to_string_lossy().into()).collect(),
        url: None,
        revision: s.init["protocolVersion"].to_string(),
        negotiated_by: "initialize".into(),
        slow_call,
        fast_call: json!({"method": "session/new"}),
        agent: Some(json!({
            "agentInfo": s.init.get("agentInfo"),
            "agentCapabilities": s.init.get("agentCapabilities"),
        })),
        verdict,
        musts_only: options.musts_only,
        checks,
    };
    s.answer_outstanding(Reply::Cancelled, &mut Evidence::default())
        .await;
    s.client.shutdown().await;
    Ok(report)
}

/// A prompt turn that surely runs: its id, its answer to come, and when it was sent.
pub(super) struct Running {
    /// The `session/prompt` id.
    pub id: Value,
    /// Its answer.
    pub pending: Pending,
    /// When it was sent.
    pub sent: Instant,
}

/// Sends the prompt with the agent's requests held, and waits until the turn surely runs: for
/// a turn that asks the client something, until its first request is held (at most as long
/// after the prompt as it came uncancelled, plus the turn's slack); otherwise the turn's lead.
/// `Err` with the reason when the prompt was answered before that.
pub(super) async fn start(
    s: &mut AcpSession,
    session: &str,
    prompt: &str,
    turn: &Turn,
    ev: &mut Evidence,
) -> Result<Running, String> {
    s.answering = Answering::Hold;
    let (id, mut pending) = s.prompt(session, prompt, ev).await;
    let sent = Instant::now();
    let deadline = match turn.first_ask {
        Some(first) => sent + first + turn.slack(),
        None => sent + turn.lead(),
    };
    let held = |s: &AcpSession| turn.asks() && !s.outstanding.is_empty();
    while Instant::now() < deadline && !held(s) {
        let step = deadline.saturating_duration_since(Instant::now()).min(LOOK);
        if let Some((early, at)) = s.wait_until(&mut pending, Instant::now() + step, ev).await {
            ev.got(&early);
            return Err(format!(
                "the prompt was answered {} ms after it was sent, before the cancel (uncancelled \
                 it took {} ms): give a slower --prompt",
                super::ms(at.saturating_duration_since(sent)),
                super::ms(turn.natural)
            ));
        }
    }
    if turn.asks() && s.outstanding.is_empty() {
        ev.note("the agent has not asked the client anything this time: cancelling all the same");
    }
    Ok(Running { id, pending, sent })
}

/// The latest a cancelled turn that goes on anyway is waited for: its natural end plus slack,
/// and at least `--timeout` after the cancel.
pub(super) fn last_chance(
    turn: &Turn,
    run: &Running,
    cancelled: Instant,
    timeout: Duration,
) -> Instant {
    (run.sent + turn.natural + turn.slack() + timeout).max(cancelled + timeout)
}

/// A `session/new` is answered; its session is the one to use next. A request of the agent's
/// still held from the turn (one it left behind when it answered the prompt) is answered first,
/// as the user decides, so that the next scenario starts with none.
pub(super) async fn keeps_serving(
    s: &mut AcpSession,
    id: &'static str,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let mut ev = Evidence::default();
    let decide = Reply::Decide(s.permission);
    s.answer_outstanding(decide, &mut ev).await;
    s.answering = Answering::Now(decide);
    let session = s.new_session(&mut ev).await;
    s.answering = Answering::Hold;
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
    session
}
