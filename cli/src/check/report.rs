//! The report of one `cancelkit check` run: its verdict, the table printed, and the JSON
//! written with `--json`, each with what a `--baseline` made of the run.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::baseline::Applied;
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
    /// Whether `check` decides the verdict: a MUST, or a SHOULD unless `musts_only`.
    pub fn decides(check: &Check, musts_only: bool) -> bool {
        check.word == Word::Must || (check.word == Word::Should && !musts_only)
    }

    /// Whether every check that decides passed: MUST and SHOULD ones, or MUST ones alone.
    pub fn decide(checks: &[Check], musts_only: bool) -> Outcome {
        if checks
            .iter()
            .filter(|c| Report::decides(c, musts_only))
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

    /// The JSON written with `--json`, pretty-printed: the report, and with a baseline, its
    /// `baseline` (the file, the expected failures, the stale and the tolerated entries) and on
    /// each listed check a `baseline` mark (`expected_failure`, `stale`, `tolerated`).
    pub fn json(&self, baseline: Option<&Applied>) -> serde_json::Result<Vec<u8>> {
        let Some(applied) = baseline else {
            return serde_json::to_vec_pretty(self);
        };
        let mut json = serde_json::to_value(self)?;
        if let Some(checks) = json["checks"].as_array_mut() {
            for check in checks {
                let mark = check["id"].as_str().and_then(|id| applied.mark(id));
                if let (Some(mark), Some(check)) = (mark, check.as_object_mut()) {
                    check.insert("baseline".into(), mark.into());
                }
            }
        }
        json["baseline"] = serde_json::json!({
            "file": applied.path.display().to_string(),
            "expected_failures": applied.expected,
            "stale": applied.stale,
            "tolerated": applied.tolerated,
        });
        serde_json::to_vec_pretty(&json)
    }

    /// A human-readable table: id, word, result, detail; an expected failure's result is
    /// `xfail`, a stale baseline entry's `XPASS`.
    pub fn table(&self, baseline: Option<&Applied>) -> String {
        let mark = |id: &str| baseline.and_then(|b| b.mark(id));
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
            let result = match (check.result, mark(check.id)) {
                (Outcome::Fail, Some("expected_failure")) => "xfail",
                (Outcome::Pass, Some("stale")) => "XPASS",
                (Outcome::Pass, _) => "pass",
                (Outcome::Fail, _) => "FAIL",
                (Outcome::NotApplicable, _) => "n/a",
                (Outcome::Info, _) => "info",
            };
            let _ = writeln!(
                out,
                "{:width$}  {word:6}  {result:6}  {}",
                check.id, check.detail
            );
        }
        let failed = self
            .checks
            .iter()
            .filter(|c| c.result == Outcome::Fail && mark(c.id).is_none());
        for check in failed {
            let _ = writeln!(out, "\n{} evidence:", check.id);
            for line in &check.evidence {
                let _ = writeln!(out, "  {line}");
            }
        }
        if let Some(applied) = baseline {
            let expected = applied.expected.iter().cloned().collect::<Vec<_>>();
            let _ = writeln!(
                out,
                "\nbaseline {}: {} expected failure{}{}{}",
                applied.path.display(),
                expected.len(),
                if expected.len() == 1 { "" } else { "s" },
                if expected.is_empty() { "" } else { ": " },
                expected.join(", ")
            );
            if let Some(stale) = applied.stale_message() {
                let _ = writeln!(out, "{stale}");
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
