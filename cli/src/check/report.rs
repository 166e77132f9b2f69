//! The report of one `cancelkit check` run: its verdict, the table printed, and (serialized)
//! the JSON written with `--json`.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::{Check, Outcome, Word};

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
                Outcome::Info => "info",
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
