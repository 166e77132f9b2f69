//! `cancelkit check mcp [OPTIONS] -- CMD [ARGS...]` (or `--url URL`) and `cancelkit check acp
//! [OPTIONS] -- CMD [ARGS...]`: run cancellation scenarios against an MCP server (stdio, or a
//! running Streamable HTTP one) or a stdio ACP agent, and report each check with the
//! specification's word for it (MUST / SHOULD / MAY), the revisions it applies to, its result and
//! the frames that show it.
//!
//! * [`wire`] — the raw JSON-RPC client the scenarios talk through, over stdio or HTTP.
//! * [`session`] — the MCP handshake and the era's wire forms.
//! * [`mcp`] — the MCP scenarios, calling on:
//! * [`tasks`] — `tasks/cancel` of a task-augmented call (2025-11-25, and the 2026-07-28 tasks
//!   extension);
//! * [`subscriptions`] — a cancelled `subscriptions/listen`, and the rule that a 2026-07-28
//!   server sends `notifications/cancelled` only to end one.
//! * [`acp_session`] — the ACP handshake and the client's side of an agent's own requests.
//! * [`acp`] — the ACP scenarios around a slow prompt, and the run.
//! * [`acp_ignore`] — the ACP scenarios without a prompt: ignored cancels, `initialize`.
//!
//! The exit code is 0 when every MUST and SHOULD check passes (with `--musts-only`, every MUST),
//! 1 when one fails, 2 when the server or agent could not be started or did not complete the
//! handshake.

pub mod acp;
pub mod acp_ignore;
pub mod acp_session;
pub mod mcp;
pub mod session;
pub mod subscriptions;
pub mod tasks;
pub mod wire;

use std::ffi::OsString;
use std::fmt::Write as _;
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
    /// The check does not apply to the negotiated revision.
    NotApplicable,
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

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was checked: `mcp` (a server) or `acp` (an agent).
    pub target: &'static str,
    /// The server's or agent's command line (empty with `--url`).
    pub command: Vec<String>,
    /// The server's Streamable HTTP endpoint, with `--url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The revision the checks ran at (ACP: the protocol version, `1`).
    pub revision: String,
    /// How it was chosen: `server/discover`, `initialize`, or `forced` with `--revision`.
    pub negotiated_by: String,
    /// The slow call: MCP tool and arguments, or the ACP prompt.
    pub slow_call: Value,
    /// The fast call: the method and params used for liveness.
    pub fast_call: Value,
    /// ACP: the agent's `agentInfo` and `agentCapabilities` from `initialize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<Value>,
    /// `pass` or `fail`, as the exit code says.
    pub verdict: Outcome,
    /// Whether only MUST checks decided the verdict.
    pub musts_only: bool,
    /// The checks, in the order they ran.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether every check that decides passed: MUST and SHOULD ones, or MUST ones alone.
    pub fn decide(checks: &[Check], musts_only: bool) -> Outcome {
        let deciding = |c: &&Check| c.word == Word::Must || (c.word == Word::Should && !musts_only);
        if checks
            .iter()
            .filter(deciding)
            .all(|c| c.result != Outcome::Fail)
        {
            Outcome::Pass
        } else {
            Outcome::Fail
        }
    }

    /// The exit code: 0 pass, 1 fail.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.verdict == Outcome::Fail)
    }

    /// A human-readable table: id, word, result, detail.
    pub fn table(&self) -> String {
        let mut out = format!(
            "cancelkit check {}: revision {} (by {})\n\n",
            self.target, self.revision, self.negotiated_by
        );
        let width = self.checks.iter().map(|c| c.id.len()).max().unwrap_or(2);
        let _ = writeln!(out, "{:width$}  {:6}  {:6}  DETAIL", "ID", "WORD", "RESULT");
        for check in &self.checks {
            let word = match check.word {
                Word::Must => "MUST",
                Word::Should => "SHOULD",
                Word::May => "MAY",
            };
            let result = match check.result {
                Outcome::Pass => "pass",
                Outcome::Fail => "FAIL",
                Outcome::NotApplicable => "n/a",
            };
            let _ = writeln!(
                out,
                "{:width$}  {word:6}  {result:6}  {}",
                check.id, check.detail
            );
        }
        let failed = self.checks.iter().filter(|c| c.result == Outcome::Fail);
        for check in failed {
            let _ = writeln!(out, "\n{} evidence:", check.id);
            for line in &check.evidence {
                let _ = writeln!(out, "  {line}");
            }
        }
        let _ = writeln!(
            out,
            "\nverdict: {}{}",
            if self.verdict == Outcome::Pass {
                "pass"
            } else {
                "FAIL"
            },
            if self.musts_only { " (MUSTs only)" } else { "" }
        );
        out
    }
}

/// Whether `name: value` can be sent as an HTTP header; why not, if it cannot.
pub fn valid_header(name: &str, value: &str) -> Result<(), String> {
    wire::http::header(name, value).map(|_| ())
}

/// Why a run could not take place (exit code 2).
#[derive(Debug)]
pub struct Unreachable(pub String);

/// Starts `command` (or connects to `options.url`) and runs the MCP scenarios against it.
pub fn run_mcp(options: &Options, command: &[OsString]) -> Result<Report, Unreachable> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(mcp::run(options, command))
}

/// Starts `command` and runs the ACP scenarios against it.
pub fn run_acp(options: &acp::AcpOptions, command: &[OsString]) -> Result<Report, Unreachable> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(acp::run(options, command))
}
