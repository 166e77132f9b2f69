//! `cancelkit check mcp [OPTIONS] -- CMD [ARGS...]` (or `--url URL`) and `cancelkit check acp
//! [OPTIONS] -- CMD [ARGS...]`: run cancellation scenarios against an MCP server (stdio, or a
//! running Streamable HTTP one) or a stdio ACP agent, and report each check with the
//! specification's word for it (MUST / SHOULD / MAY), the revisions it applies to, its result and
//! the frames that show it.
//!
//! * [`wire`] — the raw JSON-RPC client the scenarios talk through, over stdio or HTTP.
//! * [`session`] — the MCP handshake and the era's wire forms.
//! * [`calibrate`] — before the MCP scenarios: the tools listed, `--tool`/`--args` checked
//!   against them, the slow call measured uncancelled.
//! * [`mcp`] — the MCP scenarios, calling on:
//! * [`concurrent`] — the scenarios with many slow calls in flight at once;
//! * [`watch`] — every cancelled (and kept) call watched until the run ends;
//! * [`tasks`] — `tasks/cancel` of a task-augmented call (2025-11-25, and the 2026-07-28 tasks
//!   extension);
//! * [`subscriptions`] — a cancelled `subscriptions/listen`, and the rule that a 2026-07-28
//!   server sends `notifications/cancelled` only to end one.
//! * [`acp_session`] — the ACP handshake and the client's side of an agent's own requests.
//! * [`acp`] — the ACP scenarios around a slow prompt, and the run.
//! * [`acp_ignore`] — the ACP scenarios without a prompt: ignored cancels, `initialize`.
//! * [`report`] — the run's report: its verdict, the table, the JSON.
//! * [`baseline`] — `--baseline`: the expected failures, and the verdict they leave.
//! * [`junit`] — `--junit`: the report as JUnit XML.
//!
//! The exit code is 0 when every MUST and SHOULD check passes (with `--musts-only`, every MUST),
//! 1 when one fails, 2 when the server or agent could not be started or did not complete the
//! handshake.

pub mod acp;
pub mod acp_calibrate;
pub mod acp_ignore;
pub mod acp_request;
pub mod acp_session;
pub mod acp_turn;
pub mod baseline;
pub mod calibrate;
pub mod concurrent;
pub mod junit;
pub mod mcp;
pub mod report;
pub mod session;
pub mod subscriptions;
pub mod tasks;
pub mod watch;
pub mod wire;

pub use report::Report;

use std::ffi::OsString;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// The longest frame quoted in evidence, in characters.
const EVIDENCE_CHARS: usize = 200;
/// At most this many evidence lines per check.
const EVIDENCE_LINES: usize = 16;

/// What `cancelkit check mcp` was asked to do (`cancelkit check acp`: [`acp::AcpOptions`]).
#[derive(Debug, Clone)]
pub struct Options {
    /// A running Streamable HTTP server's endpoint (`--url`) instead of a command to start.
    pub url: Option<String>,
    /// Headers sent with every HTTP request (`--header`), such as `Authorization`.
    pub headers: Vec<(String, String)>,
    /// A PEM CA file trusted for an `https://` URL beside the platform's roots (`--ca-file`).
    pub ca_file: Option<std::path::PathBuf>,
    /// Force one revision (`2024-11-05`, `2025-11-25`, `2026-07-28`) instead of negotiating.
    pub revision: Option<String>,
    /// The slow tool.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// A fast tool to call for liveness (`None`: a `tools/list` request).
    pub fast_tool: Option<String>,
    /// Its arguments.
    pub fast_args: Value,
    /// How long each wait lasts.
    pub timeout: Duration,
    /// Whether only the MUST checks decide the exit code.
    pub musts_only: bool,
    /// Where the server's stderr goes (`--stderr`; `None`: discarded).
    pub stderr: Option<std::path::PathBuf>,
}

/// The specification's word for a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Word {
    /// An absolute requirement.
    Must,
    /// A recommendation.
    Should,
    /// An option.
    May,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The server did what the check asks.
    Pass,
    /// It did not.
    Fail,
    /// The check could not be judged: it does not apply to the revision spoken, or what it
    /// needs did not happen (the detail says which).
    NotApplicable,
    /// A MAY check the server or agent does not take up: reported, never a failure.
    Info,
}

/// One check of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// The stable id, such as `mcp.cancel.no_response`.
    pub id: &'static str,
    /// The specification's word for it.
    pub word: Word,
    /// The revisions it applies to.
    pub revisions: &'static [&'static str],
    /// Where the word comes from.
    pub basis: &'static str,
    /// The result.
    pub result: Outcome,
    /// One line about what happened.
    pub detail: String,
    /// The frames involved (`->` sent, `<-` received), each cut to a readable length.
    pub evidence: Vec<String>,
    /// Numbers the check measured, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
}

/// One check's result, with its evidence.
pub(crate) fn check(
    id: &'static str,
    word: Word,
    revisions: &'static [&'static str],
    basis: &'static str,
    result: Outcome,
    detail: impl Into<String>,
    ev: Evidence,
) -> Check {
    Check {
        id,
        word,
        revisions,
        basis,
        result,
        detail: detail.into(),
        evidence: ev.into_lines(),
        metrics: None,
    }
}

/// Pushes each `(id, word, basis)` of `list`, for `revisions`, as `n/a` with the reason `why`.
pub(crate) fn not_applicable(
    checks: &mut Vec<Check>,
    revisions: &'static [&'static str],
    list: &[(&'static str, Word, &'static str)],
    why: &str,
) {
    for (id, word, basis) in list {
        let ev = Evidence::default();
        let result = Outcome::NotApplicable;
        checks.push(check(id, *word, revisions, basis, result, why, ev));
    }
}

/// A duration in whole milliseconds, for details and reports.
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The command line as one string, for messages.
pub(crate) fn shown(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `pass` if `ok`, else `fail`.
pub(crate) fn pass_if(ok: bool) -> Outcome {
    if ok { Outcome::Pass } else { Outcome::Fail }
}

/// The evidence of one check: frames sent and received, and notes.
#[derive(Debug, Default, Clone)]
pub struct Evidence(Vec<String>);

impl Evidence {
    /// A frame sent to the server.
    pub fn sent(&mut self, frame: &Value) {
        self.push(format!("-> {}", cut(&frame.to_string())));
    }

    /// A frame received from the server.
    pub fn got(&mut self, frame: &Value) {
        self.push(format!("<- {}", cut(&frame.to_string())));
    }

    /// A note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.push(format!("-- {}", note.into()));
    }

    fn push(&mut self, line: String) {
        match self.0.len() {
            n if n < EVIDENCE_LINES => self.0.push(line),
            n if n == EVIDENCE_LINES => self.0.push("-- (more left out)".into()),
            _ => {}
        }
    }

    /// The lines.
    pub fn into_lines(self) -> Vec<String> {
        self.0
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(EVIDENCE_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// Whether `name: value` can be sent as an HTTP header; why not, if it cannot.
pub fn valid_header(name: &str, value: &str) -> Result<(), String> {
    wire::http::header(name, value).map(|_| ())
}

/// Why a run could not take place (exit code 2).
#[derive(Debug)]
pub struct Unreachable(pub String);

/// Starts `command` (or connects to `options.url`) and runs the MCP scenarios against it. The
/// server's whole process group is stopped at the end, whatever the end.
pub fn run_mcp(options: &Options, command: &[OsString]) -> Result<Report, Unreachable> {
    let runtime = runtime(options.stderr.as_deref())?;
    runtime.block_on(wire::stdio::supervised(mcp::run(options, command)))
}

/// `cancelkit check mcp --list-tools`: starts `command` (or connects to `options.url`) and lists
/// the server's tools with their arguments.
pub fn list_mcp_tools(options: &Options, command: &[OsString]) -> Result<String, Unreachable> {
    let runtime = runtime(options.stderr.as_deref())?;
    runtime.block_on(wire::stdio::supervised(calibrate::list(options, command)))
}

/// Starts `command` and runs the ACP scenarios against it. The agent's whole process group is
/// stopped at the end, whatever the end.
pub fn run_acp(options: &acp::AcpOptions, command: &[OsString]) -> Result<Report, Unreachable> {
    let runtime = runtime(options.stderr.as_deref())?;
    runtime.block_on(wire::stdio::supervised(acp::run(options, command)))
}

/// The run's runtime; the children's stderr goes to `stderr` (created or truncated).
fn runtime(stderr: Option<&std::path::Path>) -> Result<tokio::runtime::Runtime, Unreachable> {
    let file = stderr
        .map(|path| {
            std::fs::File::create(path)
                .map_err(|e| Unreachable(format!("cannot write {}: {e}", path.display())))
        })
        .transpose()?;
    wire::stdio::stderr_to(file);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start the runtime: {e}")))
}
