//! The suite: one CLI run per release, scenario and revision (a few at a time), its checks
//! read from checks.json.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use futures_util::StreamExt;
use serde_json::Value;

use crate::child::Process;
use crate::scenarios::{
    CONCURRENT_RUNS, KnownFailure, RELEASES, Release, SCENARIO_TIMEOUT, SHIM, Scenario,
};

/// The installed CLIs.
pub(crate) struct Suite {
    /// target/interop/node: `node_modules` and the shim.
    node_dir: PathBuf,
}

/// One CLI run to make: a release's scenario at one revision.
#[derive(Clone, Copy)]
pub(crate) struct Job {
    pub(crate) release: &'static Release,
    pub(crate) scenario: &'static Scenario,
    pub(crate) revision: &'static str,
}

impl Job {
    /// Every scenario of `pick` (a release's servers or clients) at each of its revisions, for
    /// every release.
    pub(crate) fn all(pick: fn(&'static Release) -> &'static [Scenario]) -> Vec<Job> {
        let mut jobs = Vec::new();
        for release in RELEASES {
            for scenario in pick(release) {
                for revision in scenario.revisions {
                    jobs.push(Job {
                        release,
                        scenario,
                        revision,
                    });
                }
            }
        }
        jobs
    }

    /// `0.1.16 tools-list @ 2025-11-25`.
    pub(crate) fn label(&self) -> String {
        format!(
            "{} {} @ {}",
            self.release.version, self.scenario.name, self.revision
        )
    }

    /// A directory of its own under `out`.
    fn dir(&self, out: &Path) -> PathBuf {
        let name = format!(
            "{}-{}-{}",
            self.release.version, self.revision, self.scenario.name
        );
        out.join(name.replace('/', "_"))
    }
}

impl Suite {
    /// Installs the pinned npm peers (panics if npm is missing or fails) and checks Node runs.
    pub(crate) fn install() -> Suite {
        let node_dir = cancelkit_tests::node::dir();
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
        for release in RELEASES {
            for file in [release.cli, SHIM] {
                assert!(
                    node_dir.join(file).exists(),
                    "{} is missing: is @modelcontextprotocol/conformance {} in \
                     tests/node/package.json?",
                    node_dir.join(file).display(),
                    release.version
                );
            }
        }
        Suite { node_dir }
    }

    /// Runs every server scenario of every release at each of its revisions against `url`:
    /// one CLI run per release and revision (`--suite all`: every scenario of that revision,
    /// those that do not apply too, in one Node process, which costs far less than a process
    /// per scenario), [`CONCURRENT_RUNS`] at a time, and the applicable scenarios' checks
    /// judged.
    pub(crate) async fn run_all(
        &self,
        target: &str,
        url: &str,
        known: &'static [KnownFailure],
    ) -> Outcome {
        let out = tempfile::tempdir().expect("a temporary directory");
        let mut outcome = Outcome::new(target, url, known);
        let jobs = Job::all(|r| r.servers);
        let mut suites: Vec<(&'static Release, &'static str)> = Vec::new();
        for job in &jobs {
            if !suites
                .iter()
                .any(|(r, v)| std::ptr::eq(*r, job.release) && *v == job.revision)
            {
                suites.push((job.release, job.revision));
            }
        }
        let runs = suites.into_iter().map(|(release, revision)| {
            let dir = out.path().join(format!("{}-{revision}", release.version));
            let args = [
                "server",
                "--url",
                url,
                "--suite",
                "all",
                "--spec-version",
                revision,
            ];
            async move {
                let log = self
                    .run(release, args.map(OsString::from).to_vec(), &dir)
                    .await;
                ((release, revision), dir, log)
            }
        });
        let runs: Vec<_> = futures_util::stream::iter(runs)
            .buffered(CONCURRENT_RUNS)
            .collect()
            .await;
        for job in jobs {
            let ((_, _), dir, log) = runs
                .iter()
                .find(|((r, v), ..)| std::ptr::eq(*r, job.release) && *v == job.revision)
                .expect("every job's suite ran");
            let run = checks_of(dir, "server-", job.scenario.name, log);
            outcome.judge(&job, run);
        }
        outcome
    }

    /// Runs the CLI of each job's release with the arguments `args` makes for it (and
    /// `--output-dir`), one run per job, [`CONCURRENT_RUNS`] at a time; each job with what its
    /// run produced, in the order given.
    pub(crate) async fn run_jobs(
        &self,
        jobs: Vec<Job>,
        out: &Path,
        args: impl Fn(&Job) -> Vec<OsString>,
    ) -> Vec<(Job, Run)> {
        let runs = jobs.into_iter().map(|job| {
            let args = args(&job);
            async move {
                let dir = job.dir(out);
                let log = self.run(job.release, args, &dir).await;
                let run = checks_of(&dir, "", job.scenario.name, &log);
                (job, run)
            }
        });
        futures_util::stream::iter(runs)
            .buffered(CONCURRENT_RUNS)
            .collect()
            .await
    }

    /// One run of `release`'s CLI with `args`, writing into `dir`: its exit status and
    /// output, or why it did not finish.
    async fn run(
        &self,
        release: &Release,
        args: Vec<OsString>,
        dir: &Path,
    ) -> Result<String, String> {
        let mut command = tokio::process::Command::new("node");
        command
            .args(["--import", SHIM, release.cli])
            .args(args)
            .arg("--output-dir")
            .arg(dir)
            .current_dir(&self.node_dir)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(SCENARIO_TIMEOUT, command.output()).await {
            Ok(output) => output.unwrap_or_else(|e| panic!("cannot run node: {e}")),
            Err(_) => {
                return Err(format!(
                    "the conformance CLI did not finish within {SCENARIO_TIMEOUT:?}"
                ));
            }
        };
        Ok(format!(
            "exit status {}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The checks the run that wrote into `dir` (its `log`) reported for `scenario`.
fn checks_of(dir: &Path, prefix: &str, scenario: &str, log: &Result<String, String>) -> Run {
    let log = match log {
        Ok(log) => log.clone(),
        Err(why) => return Run::Broken(why.clone()),
    };
    let Some(file) = find_checks(dir, &format!("{prefix}{scenario}-")) else {
        return Run::Broken(format!(
            "the CLI wrote no checks.json for {scenario}\n{log}"
        ));
    };
    let text = std::fs::read_to_string(&file).expect("read checks.json");
    match serde_json::from_str::<Vec<Value>>(&text) {
        Ok(checks) => Run::Checks { checks, log },
        Err(e) => Run::Broken(format!("checks.json does not parse: {e}\n{text}\n{log}")),
    }
}

/// `checks.json` in the directory under `dir` the CLI made for a scenario: `<name><time>/`,
/// `name` being `server-<scenario>-` or `<scenario>-` (a scenario `auth/x` is a directory
/// `auth` with `x-<time>` in it), `time` such as `2026-11-28T05-28-18-124Z`.
fn find_checks(dir: &Path, name: &str) -> Option<PathBuf> {
    let (parent, name) = match name.rsplit_once('/') {
        Some((parent, name)) => (dir.join(parent), name),
        None => (dir.to_owned(), name),
    };
    std::fs::read_dir(&parent)
        .ok()?
        .flatten()
        .find_map(|entry| {
            let file = entry.file_name();
            let time = file.to_str()?.strip_prefix(name)?;
            let is_time = time.len() == 24 && time.starts_with(|c: char| c.is_ascii_digit());
            let checks = entry.path().join("checks.json");
            (is_time && checks.exists()).then_some(checks)
        })
}

/// What one CLI run produced.
pub(crate) enum Run {
    /// Its checks, and the CLI's exit status and output.
    Checks { checks: Vec<Value>, log: String },
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
    /// Whether the runs are of the client mode, whose client must exit 0.
    pub(crate) client_exit: bool,
}

/// What the CLI's client mode prints when the client under test exits with an error, or is
/// killed at the CLI's timeout.
const CLIENT_FAILED: [&str; 2] = ["Client exited with code", "Client timed out after"];

impl Outcome {
    pub(crate) fn new(target: &str, url: &str, known: &'static [KnownFailure]) -> Outcome {
        Outcome {
            target: target.to_owned(),
            url: url.to_owned(),
            summary: String::new(),
            failures: Vec::new(),
            known,
            known_seen: BTreeSet::new(),
            client_exit: false,
        }
    }

    /// Counts a run's checks: every applicable check must not fail, and one must pass. A
    /// client run must also find the client under test exiting 0 (`client_exit`).
    pub(crate) fn judge(&mut self, job: &Job, run: Run) {
        let (scenario, revision) = (job.scenario, job.revision);
        let label = job.label();
        let (checks, log) = match run {
            Run::Checks { checks, log } => (checks, log),
            Run::Broken(why) => {
                let _ = writeln!(self.summary, "BROKEN  {label}: see below");
                self.failures.push(format!("{label}: {why}"));
                return;
            }
        };
        if self.client_exit && CLIENT_FAILED.iter().any(|said| log.contains(said)) {
            self.failures.push(format!(
                "{label}: the client under test did not exit 0 in time\n{log}"
            ));
        }
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
                        k.release == job.release.version
                            && k.revision == revision
                            && k.scenario == scenario.name
                            && k.check == id
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

    /// Prints the summary; panics with it, every failure in full, each known bug that no
    /// longer fails, and the end of the server's stderr (when a server was tested).
    pub(crate) fn assert_passed(mut self, server: Option<&Process>) {
        for (index, known) in self.known.iter().enumerate() {
            if !self.known_seen.contains(&index) {
                self.failures.push(format!(
                    "{} {} @ {}: check {} is listed as a known bug ({}) but did not fail: if it \
                     is fixed, remove it from the list",
                    known.release, known.scenario, known.revision, known.check, known.bug
                ));
            }
        }
        if self.failures.is_empty() {
            println!("{} ({}):\n{}", self.target, self.url, self.summary);
        } else {
            let stderr = server.map_or_else(String::new, |process| {
                format!("\n\n--- its stderr (the end)\n{}", process.stderr_tail(200))
            });
            panic!(
                "{} ({}) fails the MCP conformance suite:\n\n{}\n\n{}{stderr}",
                self.target,
                self.url,
                self.summary,
                self.failures.join("\n\n"),
            );
        }
    }
}
