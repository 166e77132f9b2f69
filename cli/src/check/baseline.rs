//! `--baseline FILE`: the checks a server or agent is known to fail, so that a run fails only
//! on a new failure, after the official MCP conformance suite's `--expected-failures`.
//!
//! The file is YAML, one list of check ids per target, the shape of the conformance suite's
//! `server:` / `client:` lists:
//!
//! ```yaml
//! # known failures, to be fixed
//! mcp:
//!   - mcp.cancel.no_response
//!   - mcp.cancel.malformed
//! acp:
//!   - acp.ignore.malformed
//! ```
//!
//! `cancelkit check mcp` reads the `mcp` list (and `check acp` the `acp` one); either key may be
//! left out, and an empty file is an empty baseline. Each entry is judged by the check's result:
//!
//! | result | listed | run |
//! | --- | --- | --- |
//! | fail | yes | an expected failure: does not fail the run |
//! | fail | no | fails the run, as without a baseline (if the check decides the verdict) |
//! | pass | yes | stale: fails the run until the entry is removed |
//! | n/a or info | yes | tolerated, as the suite tolerates a baselined check that did not run |
//!
//! Stricter than the suite: an entry that names no check of the run, or a key other than `mcp`
//! and `acp`, is an error (exit 2), so a typo cannot hide a failure. Entries are whole check
//! ids; there are no whole-scenario entries. A check id that was renamed may still be listed by
//! its old name (see [`RENAMED`]); it stands for the check's current id.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use super::{Outcome, Report};

/// The targets a baseline file may list checks for.
const TARGETS: [&str; 2] = ["mcp", "acp"];

/// Check ids that were renamed, as (old, current): a baseline written before the rename still
/// works. The ACP RFD draft's `$/cancelRequest` checks were `acp.cancel_request_seed.*` until
/// they took the runtime's and the schema's name for that form, "draft".
pub const RENAMED: [(&str, &str); 2] = [
    (
        "acp.cancel_request_seed.answered_once",
        "acp.cancel_request_draft.answered_once",
    ),
    (
        "acp.cancel_request_seed.keeps_serving",
        "acp.cancel_request_draft.keeps_serving",
    ),
];

/// The current id of the check once called `id` (`id` itself when it was never renamed).
pub fn current_id(id: &str) -> &str {
    RENAMED
        .iter()
        .find(|(old, _)| *old == id)
        .map_or(id, |(_, current)| current)
}

/// The expected failures of one target, as read from a baseline file.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The file.
    pub path: PathBuf,
    /// Its check ids for the target, in the file's order, each once.
    pub ids: Vec<String>,
}

/// What a baseline made of a run.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// The baseline file.
    pub path: PathBuf,
    /// Listed checks that failed: expected failures.
    pub expected: BTreeSet<String>,
    /// Listed checks that passed: stale entries, which fail the run.
    pub stale: BTreeSet<String>,
    /// Listed checks that were not applicable or only informative: tolerated.
    pub tolerated: BTreeSet<String>,
}

impl Baseline {
    /// Reads the entries for `target` (`mcp` or `acp`) from the baseline file at `path`.
    pub fn load(path: &Path, target: &str) -> Result<Baseline, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the baseline {}: {e}", path.display()))?;
        let ids = parse(&text, target)
            .map_err(|why| format!("the baseline {} is malformed: {why}", path.display()))?;
        Ok(Baseline {
            path: path.to_owned(),
            ids,
        })
    }

    /// Judges `report` by the baseline: marks its expected failures and stale entries, and
    /// sets its verdict to fail when a deciding check failed unexpectedly or an entry is stale.
    /// An error names the entries that are no check of the report.
    pub fn apply(&self, report: &mut Report) -> Result<Applied, String> {
        let unknown: Vec<&str> = self
            .ids
            .iter()
            .filter(|id| !report.checks.iter().any(|c| c.id == id.as_str()))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "the baseline {} lists {} that `cancelkit check {}` does not have: {}",
                self.path.display(),
                if unknown.len() == 1 {
                    "a check"
                } else {
                    "checks"
                },
                report.target,
                unknown.join(", ")
            ));
        }
        let mut applied = Applied {
            path: self.path.clone(),
            ..Applied::default()
        };
        for check in &report.checks {
            if !self.ids.iter().any(|id| id == check.id) {
                continue;
            }
            let into = match check.result {
                Outcome::Fail => &mut applied.expected,
                Outcome::Pass => &mut applied.stale,
                Outcome::NotApplicable | Outcome::Info => &mut applied.tolerated,
            };
            into.insert(check.id.to_owned());
        }
        let unexpected = report.checks.iter().any(|c| {
            c.result == Outcome::Fail
                && Report::decides(c, report.musts_only)
                && !applied.expected.contains(c.id)
        });
        report.verdict = if unexpected || !applied.stale.is_empty() {
            Outcome::Fail
        } else {
            Outcome::Pass
        };
        Ok(applied)
    }
}

impl Applied {
    /// What the baseline says of check `id`: `expected_failure`, `stale`, `tolerated`, or
    /// nothing when it is not listed.
    pub fn mark(&self, id: &str) -> Option<&'static str> {
        if self.expected.contains(id) {
            Some("expected_failure")
        } else if self.stale.contains(id) {
            Some("stale")
        } else if self.tolerated.contains(id) {
            Some("tolerated")
        } else {
            None
        }
    }

    /// The message for the stale entries, if any.
    pub fn stale_message(&self) -> Option<String> {
        (!self.stale.is_empty()).then(|| {
            format!(
                "the baseline {} is stale: {} now {}; remove {} from it",
                self.path.display(),
                self.stale.iter().cloned().collect::<Vec<_>>().join(", "),
                if self.stale.len() == 1 {
                    "passes"
                } else {
                    "pass"
                },
                if self.stale.len() == 1 { "it" } else { "them" },
            )
        })
    }
}

/// The check ids the baseline text lists for `target`; why the text is malformed, if it is.
pub fn parse(text: &str, target: &str) -> Result<Vec<String>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let root = match docs.as_slice() {
        [] | [Yaml::Null] => return Ok(Vec::new()),
        [root] => root,
        _ => return Err("more than one YAML document".into()),
    };
    let Yaml::Hash(lists) = root else {
        return Err(format!(
            "expected a mapping with `mcp` and/or `acp` keys, each a list of check ids, not {}",
            shown(root)
        ));
    };
    let mut ids = Vec::new();
    for (key, list) in lists {
        let key = match key {
            Yaml::String(key) if TARGETS.contains(&key.as_str()) => key,
            other => {
                return Err(format!(
                    "unknown key {}: expected `mcp` and/or `acp`",
                    shown(other)
                ));
            }
        };
        let entries = match list {
            Yaml::Array(entries) => entries.as_slice(),
            Yaml::Null => &[],
            other => {
                return Err(format!(
                    "`{key}` must be a list of check ids, not {}",
                    shown(other)
                ));
            }
        };
        for (n, entry) in entries.iter().enumerate() {
            let id = match entry {
                Yaml::String(id) if !id.trim().is_empty() => current_id(id.trim()),
                Yaml::Hash(_) => {
                    return Err(format!(
                        "entry {} under `{key}` is a mapping, not a check id (is there a space \
                         after a colon?)",
                        n + 1
                    ));
                }
                other => {
                    return Err(format!(
                        "entry {} under `{key}` is not a check id: {}",
                        n + 1,
                        shown(other)
                    ));
                }
            };
            if key == target && !ids.iter().any(|known| known == id) {
                ids.push(id.to_owned());
            }
        }
    }
    Ok(ids)
}

/// A YAML node, named for a message.
fn shown(node: &Yaml) -> String {
    match node {
        Yaml::String(s) => format!("`{s}`"),
        Yaml::Integer(n) => format!("the number {n}"),
        Yaml::Real(r) => format!("the number {r}"),
        Yaml::Boolean(b) => format!("`{b}`"),
        Yaml::Array(_) => "a list".into(),
        Yaml::Hash(_) => "a mapping".into(),
        Yaml::Null => "nothing".into(),
        Yaml::Alias(_) => "an alias".into(),
        Yaml::BadValue => "an unreadable value".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_read_per_target() {
        let text = "# known\nmcp:\n  - mcp.a\n  - mcp.b\n  - mcp.a\nacp:\n  - acp.c\n";
        assert_eq!(parse(text, "mcp").unwrap(), ["mcp.a", "mcp.b"]);
        assert_eq!(parse(text, "acp").unwrap(), ["acp.c"]);
        assert!(parse("", "mcp").unwrap().is_empty());
        assert!(parse("# nothing yet\nmcp:\n", "mcp").unwrap().is_empty());
    }

    #[test]
    fn a_renamed_check_is_still_read_under_its_old_id() {
        let text = "acp:\n  - acp.cancel_request_seed.answered_once\n  - acp.cancel_request_draft.answered_once\n  - acp.cancel_request_seed.keeps_serving\n";
        assert_eq!(
            parse(text, "acp").unwrap(),
            [
                "acp.cancel_request_draft.answered_once",
                "acp.cancel_request_draft.keeps_serving"
            ]
        );
    }

    #[test]
    fn malformed_files_say_why() {
        let why = |text| parse(text, "mcp").unwrap_err();
        assert!(why("mcp: [unclosed").starts_with("not YAML"));
        assert!(why("- mcp.a\n").contains("expected a mapping"));
        assert!(why("server:\n  - mcp.a\n").contains("unknown key `server`"));
        assert!(why("mcp: mcp.a\n").contains("must be a list"));
        assert!(why("mcp:\n  - mcp.cancel: no_response\n").contains("space after a colon"));
        assert!(why("mcp:\n  - 3\n").contains("entry 1 under `mcp` is not a check id"));
        assert!(why("mcp: []\n---\nmcp: []\n").contains("more than one"));
    }
}
