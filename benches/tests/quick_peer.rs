//! The short run of `cargo xtask bench peer` that the test command runs: every stack in every
//! condition, real child processes over pipes, small counts. It checks that the benchmark still
//! runs and that it still compares equal work, not what the figures are.

use serde_json::Value;

fn run_quick() -> Value {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_cancelkit-bench"))
        .arg("peer")
        .env("CANCELKIT_BENCH_QUICK", "1")
        .env("CANCELKIT_BENCH_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the benchmark runs");
    assert!(
        status.success(),
        "the quick peer benchmark exited with {status}"
    );
    let report = std::fs::read_to_string(dir.path().join("peer.json")).expect("peer.json");
    let report: Value = serde_json::from_str(&report).expect("a report");
    for plot in report["plots"].as_array().expect("plots") {
        let file = plot["file"].as_str().expect("a file name");
        let svg = std::fs::read_to_string(dir.path().join(file)).expect("the plot is written");
        assert!(svg.contains("<polyline"), "{file} draws its series");
    }
    report
}

fn number(cell: &str) -> f64 {
    cell.replace(',', "").parse().unwrap_or(f64::NAN)
}

#[test]
#[ignore = "slow: a benchmark's short run, minutes of CPU (`cargo xtask test` runs it)"]
fn every_stack_runs_every_condition_on_the_same_work() {
    let report = run_quick();
    let rows = report["data"]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 8 * 4, "eight conditions, four stacks");
    for row in rows {
        let round = &row["rounds"][0];
        assert!(
            round["round_trips_per_second"].as_f64().unwrap() > 0.0,
            "{row}"
        );
        assert!(round["idle_stopped_us"]["n"].as_u64().unwrap() > 0, "{row}");
        assert!(
            round["loaded_stopped_us"]["n"].as_u64().unwrap() > 0,
            "{row}"
        );
    }
    // The bytes table: every stack carries the 4 KiB payload in its requests, and no stack's
    // no-op request is more than a JSON-RPC envelope away from the others'.
    let bytes = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"].as_str().unwrap().starts_with("Bytes written"))
        .expect("the bytes table");
    let rows = bytes["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let (noop, big) = (
            number(row[1].as_str().unwrap()),
            number(row[3].as_str().unwrap()),
        );
        assert!((big - noop - 4096.0).abs() <= 8.0, "payload carried: {row}");
        assert!(
            (60.0..=200.0).contains(&noop),
            "an envelope-sized no-op request: {row}"
        );
    }
    let heap = report["data"]["heap_bytes_per_in_flight"]
        .as_array()
        .unwrap();
    assert_eq!(heap.len(), 4, "heap measured for every stack");
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 6, "every target of the issue has a verdict");
}
