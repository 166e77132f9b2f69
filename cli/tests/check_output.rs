//! What `cancelkit check` leaves besides its table, run as a real process: the server's stderr
//! in `--stderr FILE`, no process of the server's group left running (after a run, a failed
//! handshake, or Ctrl-C), the `--junit FILE` XML, and the `--baseline FILE` of expected
//! failures.
//!
//! The servers: tests/fixtures/broken_mcp_server.py (it fails exactly [`FAILING`]) and
//! tests/fixtures/broken_acp_agent.py, each started through tests/fixtures/forking_wrapper.py,
//! which leaves a grandchild behind as `npx` leaves `node`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use serde_json::Value;

mod support;

use support::{BIN, MCP_CHECK_IDS, check, explain};

/// The broken MCP server's failures.
const FAILING: [&str; 3] = [
    "mcp.cancel.no_response",
    "mcp.cancel.malformed",
    "mcp.cancel.parallel.cancelled_silent",
];
/// Short waits for the broken MCP server.
const QUICK: [&str; 4] = ["--args", r#"{"seconds": 1}"#, "--timeout", "1"];
/// How long a process left behind may take to go once `cancelkit check` has exited.
const GONE_WITHIN: Duration = Duration::from_secs(5);

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn broken_server() -> Vec<String> {
    vec![
        cancelkit_tests::external::python3().into(),
        fixture("broken_mcp_server.py"),
    ]
}

/// `command` behind the forking wrapper, whose grandchild writes its pid to `pidfile`.
fn wrapped(pidfile: &Path, options: &[&str], command: &[String]) -> Vec<String> {
    let mut wrapped = vec![
        cancelkit_tests::external::python3().into(),
        fixture("forking_wrapper.py"),
        pidfile.display().to_string(),
    ];
    wrapped.extend(options.iter().map(std::string::ToString::to_string));
    wrapped.push("--".into());
    wrapped.extend_from_slice(command);
    wrapped
}

fn path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}
fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// Pids (the grandchildren wrote theirs to a file, one a line); each is killed at the end of
/// the test, whatever happens.
struct Pids(Vec<i32>);

impl Pids {
    fn read(pidfile: &Path) -> Pids {
        let pids = std::fs::read_to_string(pidfile)
            .unwrap_or_else(|e| panic!("no grandchild wrote its pid to {pidfile:?}: {e}"));
        // a line is whole once its newline is there
        let whole = pids.rsplit_once('\n').map_or("", |(whole, _)| whole);
        Pids(whole.lines().map(|pid| pid.parse().unwrap()).collect())
    }

    /// Waits until a grandchild has written its pid (it runs), at most `within`.
    fn wait_for(pidfile: &Path, within: Duration) -> Pids {
        // (no `Pids` before then: dropping one kills its processes)
        let written = || std::fs::read_to_string(pidfile).is_ok_and(|pids| pids.contains('\n'));
        wait_until(within, "a grandchild's pid", written);
        Pids::read(pidfile)
    }

    /// Asserts that there are `counts` grandchildren and each ends within [`GONE_WITHIN`].
    fn assert_gone(&self, counts: std::ops::RangeInclusive<usize>) {
        assert!(counts.contains(&self.0.len()), "grandchildren {:?}", self.0);
        for &pid in &self.0 {
            assert_gone(pid, "a grandchild");
        }
    }
}

impl Drop for Pids {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if !gone(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Waits until `done`, at most `within`.
fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fields of /proc/PID/stat after `PID (COMM)` (COMM may hold spaces and parentheses):
/// the state, the parent pid, ...
fn stat(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(String::from).collect())
}

/// Whether process `pid` has ended: no /proc entry, or a zombie nobody has reaped yet.
fn gone(pid: i32) -> bool {
    stat(pid).is_none_or(|fields| fields[0] == "Z" || fields[0] == "X")
}

/// Asserts that process `pid` ends within [`GONE_WITHIN`].
fn assert_gone(pid: i32, what: &str) {
    let what = format!("end of {what} (pid {pid}) after cancelkit check exited");
    wait_until(GONE_WITHIN, &what, || gone(pid));
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn an_mcp_servers_stderr_goes_to_the_file_and_its_group_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (pidfile, stderr) = (path(&dir, "pid"), path(&dir, "stderr.txt"));
    // a stale file is truncated
    std::fs::write(&stderr, "left over from before\n").unwrap();
    let server = wrapped(&pidfile, &[], &broken_server());
    let options = [&QUICK[..], &["--stderr", text(&stderr)]].concat();
    let (output, _) = check("mcp", &options, &server);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let grandchildren = Pids::read(&pidfile);
    grandchildren.assert_gone(1..=1);
    let captured = std::fs::read_to_string(&stderr).unwrap();
    assert!(captured.starts_with("forking_wrapper "), "{captured}");
    let pid = grandchildren.0[0];
    let says = |what: &str| captured.contains(&format!("grandchild {pid} {what}"));
    // SIGTERM first, and the grace to act on it
    assert!(says("sleeping") && says("got SIGTERM"), "{captured}");
    assert!(!captured.contains("left over"), "{captured}");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn an_acp_agents_stderr_goes_to_the_file_and_its_group_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (pidfile, stderr) = (path(&dir, "pid"), path(&dir, "stderr.txt"));
    let junit = path(&dir, "report.xml");
    let acp = [
        cancelkit_tests::external::python3().to_owned(),
        fixture("broken_acp_agent.py"),
    ];
    let agent = wrapped(&pidfile, &[], &acp);
    let (err, xml) = (text(&stderr), text(&junit));
    let options = ["--timeout", "2", "--stderr", err, "--junit", xml];
    let (output, report) = check("acp", &options, &agent);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    // the ACP run starts the agent twice (acp.initialize.not_cancelled), the second time for
    // a moment: it may be stopped before its grandchild has written its pid
    let grandchildren = Pids::read(&pidfile);
    grandchildren.assert_gone(1..=2);
    let captured = std::fs::read_to_string(&stderr).unwrap();
    for pid in &grandchildren.0 {
        let line = format!("forking_wrapper grandchild {pid} sleeping");
        assert!(captured.contains(&line), "{captured}");
    }
    let suite = parse_junit(&std::fs::read_to_string(&junit).unwrap());
    assert_eq!(suite.attrs["name"], "cancelkit check acp");
    let checks = report.unwrap()["checks"].clone();
    let failed = checks.as_array().unwrap().iter();
    let failed = failed
        .filter(|c| c["result"] == "fail" && c["word"] != "MAY")
        .count();
    assert_eq!(suite.attrs["failures"], failed.to_string());
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_failed_handshake_stops_the_whole_group_even_a_grandchild_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = path(&dir, "pid");
    let server = wrapped(&pidfile, &["--ignore-term"], &["sleep".into(), "30".into()]);
    let (output, report) = check("mcp", &["--timeout", "3"], &server);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(report.is_none());
    // the grandchild ignores SIGTERM: only the group's SIGKILL ends it
    Pids::read(&pidfile).assert_gone(1..=1);
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn ctrl_c_stops_the_whole_group_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let (pidfile, stderr) = (path(&dir, "pid"), path(&dir, "stderr.txt"));
    let server = wrapped(&pidfile, &[], &broken_server());
    let slow = [
        "check",
        "mcp",
        "--args",
        r#"{"seconds": 30}"#,
        "--timeout",
        "30",
    ];
    let mut run = Command::new(BIN)
        .args(slow)
        .args(["--stderr", text(&stderr), "--"])
        .args(&server)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let grandchildren = Pids::wait_for(&pidfile, Duration::from_secs(10));
    let server_pid = stat(grandchildren.0[0]).unwrap()[1].parse().unwrap();
    // the handshake is done and the first slow call runs
    std::thread::sleep(Duration::from_millis(500));
    // killed at the end of the test if it is still running then
    let cancelkit = Pids(vec![run.id() as i32]);
    kill(Pid::from_raw(cancelkit.0[0]), Signal::SIGINT).unwrap();
    let exited = || run.try_wait().unwrap().is_some();
    wait_until(GONE_WITHIN, "exit of cancelkit check after SIGINT", exited);
    let output = run.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", explain(&output));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("interrupted by SIGINT"), "{said}");
    assert_gone(server_pid, "the server");
    grandchildren.assert_gone(1..=1);
    let captured = std::fs::read_to_string(&stderr).unwrap();
    let term = format!("grandchild {} got SIGTERM", grandchildren.0[0]);
    assert!(captured.contains(&term), "{captured}");
}

type Attrs = BTreeMap<String, String>;
/// An element's name, attributes and text.
type Element = (String, Attrs, String);

/// A JUnit `<testsuite>` (or `<testcase>`): its attributes, properties, child elements and
/// testcases.
#[derive(Debug, Default)]
struct Suite {
    attrs: Attrs,
    props: Attrs,
    children: Vec<Element>,
    cases: Vec<Suite>,
}

impl Suite {
    fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|(n, _, _)| n == name)
    }

    /// The testcase named `id`.
    fn case(&self, id: &str) -> &Suite {
        self.cases.iter().find(|c| c.attrs["name"] == id).unwrap()
    }
}

/// How many of the report's checks have `result`.
fn count(report: &Value, result: &str) -> usize {
    let checks = report["checks"].as_array().unwrap();
    checks.iter().filter(|c| c["result"] == result).count()
}

/// The report's check `id`.
fn check_of<'a>(report: &'a Value, id: &str) -> &'a Value {
    let checks = report["checks"].as_array().unwrap();
    checks.iter().find(|c| c["id"] == id).unwrap()
}

fn attributes(e: &BytesStart<'_>) -> Attrs {
    e.attributes()
        .map(|a| {
            let a = a.unwrap();
            let value = a.normalized_value(XmlVersion::Implicit1_0).unwrap();
            (a.key.as_ref().to_owned(), value.into_owned())
        })
        .collect()
}

/// Parses the one `<testsuite>` of `--junit`'s XML (inside `<testsuites>`).
fn parse_junit(xml: &str) -> Suite {
    // untrimmed: an entity splits a text, and the spaces beside it are the text's own
    let mut reader = Reader::from_str(xml);
    let mut suite = Suite::default();
    let (mut suites, mut case, mut child) = (0, None::<Suite>, None);
    loop {
        let event = reader.read_event().expect("the JUnit file is XML");
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e), false),
            Event::Empty(e) => (Some(e), true),
            _ => (None, false),
        };
        if let Some(e) = start {
            let name = e.name().as_ref().to_owned();
            let attrs = attributes(e);
            match (name.as_str(), case.as_mut()) {
                ("testsuites", _) => {}
                ("testsuite", _) => {
                    suites += 1;
                    suite.attrs = attrs;
                }
                ("testcase", _) => {
                    case = Some(Suite {
                        attrs,
                        ..Suite::default()
                    });
                }
                ("property", _) => {
                    let props = &mut case.as_mut().unwrap_or(&mut suite).props;
                    props.insert(attrs["name"].clone(), attrs["value"].clone());
                }
                ("properties", _) => {}
                (_, Some(case)) if empty => case.children.push((name, attrs, String::new())),
                (_, Some(_)) => child = Some((name, attrs, String::new())),
                (other, None) => panic!("unexpected <{other}>"),
            }
        }
        let text = match &event {
            Event::Text(t) => Some(t.xml_content(XmlVersion::Implicit1_0).into_owned()),
            Event::GeneralRef(r) => quick_xml::escape::resolve_predefined_entity(r).map(From::from),
            _ => None,
        };
        if let (Some(text), Some((_, _, into))) = (text, child.as_mut()) {
            into.push_str(&text);
        }
        match event {
            Event::End(e) if e.name().as_ref() == "testcase" => {
                suite.cases.push(case.take().unwrap());
            }
            Event::End(_) => {
                if let (Some(done), Some(case)) = (child.take(), case.as_mut()) {
                    case.children.push(done);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(suites, 1, "one <testsuite>");
    suite
}

fn junit_of(dir: &tempfile::TempDir) -> Suite {
    let xml = std::fs::read_to_string(path(dir, "report.xml")).expect("--junit wrote the file");
    parse_junit(&xml)
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn the_junit_file_has_one_testcase_per_check_and_the_failures_that_decide() {
    let dir = tempfile::tempdir().unwrap();
    let junit = path(&dir, "report.xml");
    let options = [&QUICK[..], &["--junit", text(&junit)]].concat();
    let (output, report) = check("mcp", &options, &broken_server());
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let suite = junit_of(&dir);
    assert_eq!(suite.attrs["name"], "cancelkit check mcp");
    let counts = ["tests", "failures", "errors", "skipped"].map(|k| suite.attrs[k].clone());
    let report = report.unwrap();
    let not_applicable = count(&report, "not_applicable");
    assert!(not_applicable > 0);
    let expected = [MCP_CHECK_IDS.len(), 3, 0, not_applicable].map(|n| n.to_string());
    assert_eq!(counts, expected);
    assert_eq!(suite.props["command"], broken_server().join(" "));
    assert_eq!(suite.props["verdict"], "fail");
    let names: Vec<_> = suite.cases.iter().map(|c| &c.attrs["name"]).collect();
    assert_eq!(names, MCP_CHECK_IDS);
    for case in &suite.cases {
        let id = &case.attrs["name"];
        let failure = case.child("failure");
        assert_eq!(failure.is_some(), FAILING.contains(&id.as_str()), "{id}");
        assert_eq!(
            case.child("skipped").is_some(),
            case.props["result"] == "not_applicable"
        );
    }
    let silent = suite.case("mcp.cancel.parallel.cancelled_silent");
    assert_eq!(silent.attrs["classname"], "mcp.cancel.parallel");
    assert_eq!(silent.props["word"], "SHOULD");
    let (_, attrs, evidence) = silent.child("failure").unwrap();
    assert_eq!(attrs["type"], "SHOULD");
    let detail = &check_of(&report, "mcp.cancel.parallel.cancelled_silent")["detail"];
    assert_eq!(attrs["message"], detail.as_str().unwrap());
    // the frames, unescaped, one a line
    assert!(evidence.contains("\n<- {\""), "{evidence}");
    assert!(evidence.contains(r#""code":-32800"#), "{evidence}");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn with_musts_only_a_failed_should_is_no_junit_failure() {
    let dir = tempfile::tempdir().unwrap();
    let junit = path(&dir, "report.xml");
    let options = [&QUICK[..], &["--musts-only", "--junit", text(&junit)]].concat();
    let mut server = broken_server();
    server.push("--ignore-malformed".into());
    let (output, _) = check("mcp", &options, &server);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let suite = junit_of(&dir);
    assert_eq!(suite.attrs["failures"], "0");
    let case = suite.case("mcp.cancel.no_response");
    assert_eq!(case.props["result"], "fail");
    assert!(case.child("failure").is_none());
    let (_, _, out) = case.child("system-out").unwrap();
    let why = "does not decide the verdict with --musts-only";
    assert!(out.contains(why), "{out}");
}

/// Runs the broken MCP server with `--baseline` listing `ids` under `mcp:`.
fn with_baseline(dir: &tempfile::TempDir, ids: &[&str]) -> (Output, Option<Value>) {
    let baseline = path(dir, "baseline.yml");
    let list: String = ids.iter().map(|id| format!("  - {id}\n")).collect();
    std::fs::write(&baseline, format!("# known failures\nmcp:\n{list}acp:\n")).unwrap();
    let junit = path(dir, "report.xml");
    let flags = ["--baseline", text(&baseline), "--junit", text(&junit)];
    check("mcp", &[&QUICK[..], &flags].concat(), &broken_server())
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_baseline_of_the_failing_checks_passes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = with_baseline(&dir, &FAILING);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("xfail"), "{table}");
    assert!(table.contains("3 expected failures"), "{table}");
    let report = report.unwrap();
    assert_eq!(report["verdict"], "pass");
    let expected = report["baseline"]["expected_failures"].as_array().unwrap();
    assert_eq!(expected.len(), 3, "{report:#}");
    let malformed = check_of(&report, "mcp.cancel.malformed");
    assert_eq!(malformed["result"], "fail");
    assert_eq!(malformed["baseline"], "expected_failure");
    let suite = junit_of(&dir);
    assert_eq!(suite.attrs["failures"], "0");
    // skipped: each check that does not apply, and each expected failure
    let skipped = count(&report, "not_applicable") + 3;
    assert_eq!(suite.attrs["skipped"], skipped.to_string());
    let (_, attrs, _) = suite.case("mcp.cancel.malformed").child("skipped").unwrap();
    assert_eq!(attrs["type"], "expected-failure");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_baseline_that_lists_a_passing_check_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) =
        with_baseline(&dir, &[&FAILING[..], &["mcp.cancel.unknown_id"]].concat());
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let said = String::from_utf8_lossy(&output.stderr);
    let why = "is stale: mcp.cancel.unknown_id now passes; remove it";
    assert!(said.contains(why), "{said}");
    let report = report.unwrap();
    assert_eq!(report["verdict"], "fail");
    assert_eq!(report["baseline"]["stale"][0], "mcp.cancel.unknown_id");
    let suite = junit_of(&dir);
    assert_eq!(suite.attrs["failures"], "1");
    let stale = suite.case("mcp.cancel.unknown_id").child("failure");
    let (_, attrs, _) = stale.unwrap();
    assert_eq!(attrs["type"], "stale-baseline");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_baseline_that_lists_an_unknown_check_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let typo = [&FAILING[..], &["mcp.cancel.malformd"]].concat();
    let (output, report) = with_baseline(&dir, &typo);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("does not have: mcp.cancel.malformd"),
        "{said}"
    );
    assert!(report.is_none());
}

#[test]
fn a_malformed_baseline_exits_2_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = path(&dir, "baseline.yml");
    std::fs::write(&baseline, "mcp:\n  - mcp.cancel: no_response\n").unwrap();
    // the server would never answer: the run is not even started
    let server = ["sleep".to_owned(), "30".to_owned()];
    let started = Instant::now();
    let (output, _) = check("mcp", &["--baseline", text(&baseline)], &server);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(started.elapsed() < Duration::from_secs(5));
    let said = String::from_utf8_lossy(&output.stderr);
    let why = "is malformed: entry 1 under `mcp` is a mapping";
    assert!(said.contains(why), "{said}");
}
