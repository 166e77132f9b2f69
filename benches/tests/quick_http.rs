//! The short run of `cargo xtask bench http` that the test command runs: both servers in their
//! own processes, every measurement, small counts. It checks that the benchmark still runs, that
//! both stacks answer every call and stop every cancelled handler, not what the figures are.

use serde_json::Value;

fn number(cell: &str) -> f64 {
    let first = cell.split_whitespace().next().unwrap_or_default();
    first.replace(',', "").parse().unwrap_or(f64::NAN)
}

#[test]
#[ignore = "slow: a benchmark's short run, minutes of CPU (`cargo xtask test` runs it)"]
fn both_servers_serve_every_load_and_stop_every_cancelled_handler() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_cancelkit-bench"))
        .arg("http")
        .env("CANCELKIT_BENCH_QUICK", "1")
        .env("CANCELKIT_BENCH_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the benchmark runs");
    assert!(
        status.success(),
        "the quick http benchmark exited with {status}"
    );
    let report = std::fs::read_to_string(dir.path().join("http.json")).expect("http.json");
    let report: Value = serde_json::from_str(&report).expect("a report");
    let tables = report["tables"].as_array().expect("tables");
    let round_trips = tables[0]["rows"].as_array().expect("rows");
    assert_eq!(round_trips.len(), 3, "1, 16 and 64 clients");
    for row in round_trips {
        for stack in [1, 2] {
            let calls = number(row[stack].as_str().unwrap());
            assert!(calls > 0.0, "{row}");
        }
    }
    let cancels = tables[1]["rows"].as_array().expect("rows");
    assert_eq!(cancels.len(), 2, "session and closed-stream cancels");
    for row in cancels {
        let lost = row.as_array().unwrap().last().unwrap();
        assert_eq!(lost, "0 / 0", "no cancel lost: {row}");
    }
    let targets = report["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 5, "every goal of the issue has a verdict");
}
