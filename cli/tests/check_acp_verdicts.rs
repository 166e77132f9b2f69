//! Class 7 of issue 21: ACP verdicts that came from the check's options and its own client
//! behaviour instead of from the agent. `fixtures/ignoring_acp_agent.py` treats cancellation as
//! codex-acp 0.16, gemini-cli 0.61 and claude-agent-acp 0.23 were seen to by hand: it ignores
//! `$/cancel_request` (with `--reply` it answers the notification with an id-less -32601, as
//! codex-acp does), ends a turn waiting for permission only when the client answers, and honours
//! `session/cancel`. The old engine answered the held permission request `cancelled` after a
//! plain `$/cancel_request` (and so ended the turn itself, crediting the agent with
//! `stopReason cancelled`), and failed `answered_once` whenever the turn outlasted `--timeout`.

use serde_json::Value;

mod support;

use support::{ACP_CHECK_IDS, explain, ids};

const AGENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/ignoring_acp_agent.py"
);

/// `cancelkit check acp --json FILE OPTIONS -- python3 ignoring_acp_agent.py FLAGS`.
fn check(options: &[&str], flags: &[&str]) -> (std::process::Output, Value) {
    let agent: Vec<&str> = [cancelkit_tests::external::python3(), AGENT]
        .into_iter()
        .chain(flags.iter().copied())
        .collect();
    let (output, report) = support::check("acp", options, &agent);
    let report = report.unwrap_or_else(|| panic!("no report: {}", explain(&output)));
    assert_eq!(ids(&report), ACP_CHECK_IDS, "{report:#}");
    (output, report)
}

/// A check's result, detail and evidence (one string).
fn outcome(report: &Value, id: &str) -> (String, String, String) {
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id}"));
    let evidence: Vec<&str> = check["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (
        check["result"].as_str().unwrap().to_owned(),
        check["detail"].as_str().unwrap().to_owned(),
        evidence.join("\n"),
    )
}

/// The agent waits for permission and ignores `$/cancel_request`: the check holds the request
/// through `--timeout`, then answers it as `--permission` says (reject), never `cancelled`; the
/// turn ends `end_turn`, which `answered_once` accepts and `honoured` reports as no effect.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn an_agent_that_ignores_cancel_request_while_it_asks_is_not_credited_with_it() {
    let (output, report) = check(&["--timeout", "1", "--prompt", "ask"], &["--reply"]);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    assert_eq!(
        report["slow_call"]["asked"][0],
        "session/request_permission"
    );
    let (result, detail, evidence) = outcome(&report, "acp.cancel_request.answered_once");
    assert_eq!(result, "pass", "{detail}");
    assert!(detail.contains("stopReason end_turn"), "{detail}");
    assert!(
        evidence.contains(r#"{"outcome":"selected","optionId":"no"}"#),
        "{evidence}"
    );
    assert!(!evidence.contains(r#""outcome":"cancelled""#), "{evidence}");
    assert!(
        evidence.contains("still waits for the client's answer"),
        "{evidence}"
    );
    let (result, detail, _) = outcome(&report, "acp.cancel_request.honoured");
    assert_eq!(result, "info", "{detail}");
    assert!(
        detail.contains("went on waiting for the client's answer"),
        "{detail}"
    );
    assert!(
        detail.contains("replied to the cancel notification (-32601)"),
        "{detail}"
    );
    // session/cancel is honoured: the client answers the held request cancelled, as ACP asks
    let (result, detail, evidence) = outcome(&report, "acp.session_cancel.stop_reason");
    assert_eq!(result, "pass", "{detail}");
    assert!(evidence.contains(r#""outcome":"cancelled""#), "{evidence}");
    assert_eq!(outcome(&report, "acp.session_cancel.cascade").0, "info");
    // the replies to notifications are what fails
    for id in [
        "acp.ignore.unknown_id",
        "acp.ignore.completed_id",
        "acp.ignore.malformed",
    ] {
        let (result, detail, _) = outcome(&report, id);
        assert_eq!(result, "fail", "{id}: {detail}");
    }
}

/// An agent that ends a refused turn `cancelled` (as codex-acp does) and ignores the cancel is
/// not credited with it: its `cancelled` came from the client's refusal, after the hold.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_refusal_that_ends_the_turn_cancelled_is_not_taken_for_the_cancel() {
    let (output, report) = check(
        &["--timeout", "1", "--prompt", "ask"],
        &["--refusal-cancels"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert_eq!(report["slow_call"]["stop_reason"], "cancelled");
    let (result, detail, _) = outcome(&report, "acp.cancel_request.honoured");
    assert_eq!(result, "info", "{detail}");
    assert!(
        detail.contains("then ended the turn with stopReason cancelled"),
        "{detail}"
    );
}

/// An agent that honours `$/cancel_request` but leaves its permission request behind: the check
/// answers the leftover before the next scenario, whose cascade names only its own turn's request.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_request_left_behind_by_one_turn_is_not_counted_in_the_next() {
    let (output, report) = check(&["--timeout", "1", "--prompt", "ask"], &["--honour"]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let (result, detail, _) = outcome(&report, "acp.cancel_request.honoured");
    assert_eq!(result, "pass", "{detail}");
    // the fixture names its permission request after the prompt's id
    let (_, _, prompt) = outcome(&report, "acp.session_cancel.stop_reason");
    let sent = prompt
        .lines()
        .find(|line| line.contains(r#""method":"session/prompt""#))
        .expect("the prompt is in the evidence");
    let id = sent.split(r#""id":"#).nth(1).unwrap();
    let id = id.split(',').next().unwrap();
    let (result, detail, _) = outcome(&report, "acp.session_cancel.cascade");
    assert_eq!(result, "info", "{detail}");
    let named = detail.matches("session/request_permission").count();
    assert_eq!(named, 1, "{detail}");
    assert!(detail.contains(&format!("\"perm-{id}\"")), "{id}: {detail}");
}

/// The draft form makes cancelling a MUST for an agent that declares it: one that declares
/// `cancellation.request` and ignores `$/cancelRequest` fails, although it answers once.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_declared_draft_cancel_without_effect_fails() {
    let options = ["--timeout", "1", "--prompt", "ask", "--musts-only"];
    let (output, report) = check(&options, &["--declare-draft"]);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let (result, detail, _) = outcome(&report, "acp.cancel_request_draft.answered_once");
    assert_eq!(result, "fail", "{detail}");
    assert!(
        detail.contains("declared cancellation.request, but the cancel had no effect"),
        "{detail}"
    );
    // the shipped form may be ignored: answered once, no effect, no failure
    assert_eq!(
        outcome(&report, "acp.cancel_request.answered_once").0,
        "pass"
    );
}

/// A baseline written while the draft form's checks were `acp.cancel_request_seed.*` still
/// works: the old id stands for the check's current one.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_baseline_may_name_a_draft_check_by_its_old_id() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.yml");
    std::fs::write(
        &baseline,
        "acp:\n  - acp.cancel_request_seed.answered_once\n",
    )
    .unwrap();
    let baseline = baseline.to_str().unwrap();
    let options = [
        "--timeout",
        "1",
        "--prompt",
        "ask",
        "--musts-only",
        "--baseline",
        baseline,
    ];
    let (output, report) = check(&options, &["--declare-draft"]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let checks = report["checks"].as_array().unwrap();
    let draft = checks
        .iter()
        .find(|c| c["id"] == "acp.cancel_request_draft.answered_once")
        .unwrap();
    assert_eq!(
        (&draft["result"], &draft["baseline"]),
        (&Value::from("fail"), &Value::from("expected_failure")),
        "{report:#}"
    );
}

/// `--permission allow` is the decision played instead, after the same hold.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn the_permission_the_check_gives_is_the_one_chosen() {
    let options = ["--timeout", "1", "--prompt", "ask", "--permission", "allow"];
    let (output, report) = check(&options, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert_eq!(report["slow_call"]["permission"], "allow");
    let (_, _, evidence) = outcome(&report, "acp.cancel_request.answered_once");
    assert!(
        evidence.contains(r#"{"outcome":"selected","optionId":"yes"}"#),
        "{evidence}"
    );
}

/// A turn longer than `--timeout` that ignores the cancel is followed to its natural end, as
/// measured uncancelled: answered once (pass), the cancel without effect (info). The session
/// update that follows each answer (the commands, as codex-acp sends) is not the turn's work.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_turn_that_outlasts_the_timeout_is_judged_by_its_natural_length() {
    let options = ["--timeout", "1", "--prompt", "sleep 2.5"];
    let (output, report) = check(&options, &["--commands-update"]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let natural = report["slow_call"]["natural_ms"].as_u64().unwrap();
    assert!((2400..4000).contains(&natural), "{natural}");
    let (result, detail, _) = outcome(&report, "acp.cancel_request.answered_once");
    assert_eq!(result, "pass", "{detail}");
    let (result, detail, _) = outcome(&report, "acp.cancel_request.honoured");
    assert_eq!(result, "info", "{detail}");
    assert!(detail.contains("the turn ran to its end"), "{detail}");
    let (result, detail, _) = outcome(&report, "acp.session_cancel.updates_stop");
    assert_eq!(result, "pass", "{detail}");
}

/// Class 4 for ACP: a turn answered `cancelled` whose updates go on fails `updates_stop`, with
/// the late updates as evidence; the MUST on the stop reason still passes.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn updates_that_go_on_after_session_cancel_fail_updates_stop() {
    let options = ["--timeout", "1", "--prompt", "sleep 2", "--musts-only"];
    let (output, report) = check(&options, &["--keep-working"]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert_eq!(outcome(&report, "acp.session_cancel.stop_reason").0, "pass");
    let (result, detail, evidence) = outcome(&report, "acp.session_cancel.updates_stop");
    assert_eq!(result, "fail", "{detail}");
    assert!(detail.contains("after the prompt was answered"), "{detail}");
    assert!(evidence.contains("session/update"), "{evidence}");
}

/// A `--permission` that is neither decision is refused, naming both (exit code 2).
#[test]
fn an_unknown_permission_decision_is_refused() {
    let output = std::process::Command::new(support::BIN)
        .args([
            "check",
            "acp",
            "--permission",
            "maybe",
            "--",
            "python3",
            AGENT,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("reject") && stderr.contains("allow"),
        "{stderr}"
    );
}
