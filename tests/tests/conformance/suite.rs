//! The suite: one CLI run per scenario and revision, its checks read from checks.json.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::child::Process;
use crate::scenarios::{CLI, KnownFailure, SCENARIO_TIMEOUT, SCENARIOS, SHIM, Scenario};

/// The installed CLI.
pub(crate) struct Suite {
    /// target/interop/node: `node_modules` and the shim.
    node_dir: PathBuf,
}

impl Suite {
    /// Installs the pinned npm peers (panics if npm is missing or fails) and checks Node runs.
    pub(crate) fn install() -> Suite {
        let node_dir = cancelkit_tests::node::install();
        let version = Command::new("node")
            .arg("--version")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run node, which the MCP conformance suite needs (Node 20 or later): {e}"
                )
            });
        assert!(
            version.status.success(),
            "`node --version` failed: {}",
            String::from_utf8_lossy(&version.stderr)
        );
        for file in [CLI, SHIM] {
            assert!(
                node_dir.join(file).exists(),
                "{} is missing: is @modelcontextprotocol/conformance in tests/node/package.json?",
                node_dir.join(file).display()
            );
        }
        Suite { node_dir }
    }

    /// Runs every scenario of [`SCENARIOS`] at each of its revisions against `url`.
    pub(crate) async fn run_all(
        &self,
        target: &str,
        url: &str,
        known: &'static [KnownFailure],
    ) -> Outcome {
        let out = tempfile::tempdir().expect("a temporary directory");
        let mut outcome = Outcome {
            target: target.to_owned(),
            url: url.to_owned(),
            summary: String::new(),
            failures: Vec::new(),
            known,
            known_seen: BTreeSet::new(),
        };
        for scenario in SCENARIOS {
            for revision in scenario.revisions {
                let dir = out.path().join(format!("{revision}-{}", scenario.name));
                let run = self.run(url, scenario.name, revision, &dir).await;
                outcome.judge(scenario, revision, run);
            }
        }
        outcome
    }

    /// Runs one scenario at one revision; its checks, or why there are none.
    pub(crate) async fn run(&self, url: &str, scenario: &str, revision: &str, dir: &Path) -> Run {
        let mut command = tokio::process::Command::new("node");
        command
            .args(["--import", SHIM, CLI, "server"])
            .args(["--url", url, "--scenario", scenario])
            .args(["--spec-version", revision, "--output-dir"])
            .arg(dir)
            .current_dir(&self.node_dir)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(SCENARIO_TIMEOUT, command.output()).await {
            Ok(output) => output.unwrap_or_else(|e| panic!("cannot run node: {e}")),
            Err(_) => {
                return Run::Broken(format!(
                    "the conformance CLI did not finish within {SCENARIO_TIMEOUT:?}"
                ));
            }
        };
        let log = format!(
            "exit status {}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let Some(file) = find_checks(dir) else {
            return Run::Broken(format!("the CLI wrote no checks.json\n{log}"));
        };
        let text = std::fs::read_to_string(&file).expect("read checks.json");
        match serde_json::from_str::<Vec<Value>>(&text) {
            Ok(checks) => Run::Checks(checks),
            Err(e) => Run::Broken(format!("checks.json does not parse: {e}\n{text}\n{log}")),
        }
    }
}

/// `checks.json` somewhere under `dir` (the CLI writes `<dir>/server-<scenario>-<time>/`).
fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            return Some(path);
        }
    }
    None
}

/// What one CLI run produced.
pub(crate) enum Run {
    Checks(Vec<Value>),
    /// It crashed, timed out, skipped the scenario or wrote nothing readable.
    Broken(String),
}

/// Every run's verdict for one target.
pub(crate) struct Outcome {
    target: String,
    pub(crate) url: String,
    /// One line per run, plus each warning and each not-applicable check that did not pass.
    summary: String,
    /// What makes the test fail, in full.
    failures: Vec<String>,
    /// The target's known bugs.
    known: &'static [KnownFailure],
    /// Those that failed as known (their indexes in `known`).
    known_seen: BTreeSet<usize>,
}

impl Outcome {
    fn judge(&mut self, scenario: &Scenario, revision: &str, run: Run) {
        let label = format!("{} @ {revision}", scenario.name);
        let checks = match run {
            Run::Checks(checks) => checks,
            Run::Broken(why) => {
                let _ = writeln!(self.summary, "BROKEN  {label}: see below");
                self.failures.push(format!("{label}: {why}"));
                return;
            }
        };
        let status = |c: &Value| c["status"].as_str().unwrap_or("?").to_owned();
        let id = |c: &Value| c["id"].as_str().unwrap_or("?").to_owned();
        let (mut passed, mut failed, mut known_failed, mut warned) = (0, 0, 0, 0);
        let mut details = String::new();
        for check in &checks {
            let (id, status) = (id(check), status(check));
            if let Some((_, why)) = scenario.not_applicable.iter().find(|(n, _)| *n == id) {
                if status != "SUCCESS" {
                    let _ = writeln!(details, "    n/a     {id} ({status}): {why}");
                }
                continue;
            }
            match status.as_str() {
                "SUCCESS" => passed += 1,
                "FAILURE" => {
                    let bug = self.known.iter().position(|k| {
                        k.revision == revision && k.scenario == scenario.name && k.check == id
                    });
                    if let Some(bug) = bug {
                        known_failed += 1;
                        self.known_seen.insert(bug);
                        let _ = writeln!(details, "    KNOWN   {id}: {}", self.known[bug].bug);
                    } else {
                        failed += 1;
                        self.failures.push(format!(
                            "{label}: check {id} failed:\n{}",
                            serde_json::to_string_pretty(check).unwrap()
                        ));
                    }
                }
                "WARNING" => {
                    warned += 1;
                    let _ = writeln!(
                        details,
                        "    warning {id}: {}",
                        check["errorMessage"].as_str().unwrap_or("")
                    );
                }
                // INFO and SKIPPED (a feature the server does not advertise) count neither way.
                _ => {}
            }
        }
        if passed == 0 {
            self.failures.push(format!(
                "{label}: no applicable check passed, so the scenario tested nothing:\n{}",
                serde_json::to_string_pretty(&checks).unwrap()
            ));
        }
        let verdict = if failed == 0 && passed > 0 {
            "ok     "
        } else {
            "FAILED "
        };
        let _ = writeln!(
            self.summary,
            "{verdict} {label}: {passed} passed, {failed} failed, {known_failed} known bugs, \
             {warned} warnings"
        );
        self.summary.push_str(&details);
    }

    /// Prints the summary; panics with it, every failure in full, and each known bug that no
    /// longer fails.
    pub(crate) fn assert_passed(mut self, process: &Process) {
        for (index, known) in self.known.iter().enumerate() {
            if !self.known_seen.contains(&index) {
                self.failures.push(format!(
                    "{} @ {}: check {} is listed as a known bug ({}) but did not fail: if it is \
                     fixed, remove it from the list",
                    known.scenario, known.revision, known.check, known.bug
                ));
            }
        }
        if self.failures.is_empty() {
            println!("{} ({}):\n{}", self.target, self.url, self.summary);
        } else {
            panic!(
                "{} ({}) fails the MCP conformance suite:\n\n{}\n\n{}\n\n--- its stderr (the end)\n{}",
                self.target,
                self.url,
                self.summary,
                self.failures.join("\n\n"),
                process.stderr_tail(200)
            );
        }
    }
}
