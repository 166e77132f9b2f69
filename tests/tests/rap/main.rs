//! RAP tool cancellation over real HTTP on loopback: the tool-server router, process tools, the
//! notifier's fan-out and the runtime's call tracker. (The `rap` module is Unix only.)

#![cfg(unix)]

mod calls;
mod harness;
mod limits;
mod notifier;
mod process_tools;

/// The example pair works as its docs say.
#[test]
fn the_rap_example_pair_cancels_a_process_tool() {
    cancelkit_tests::example_with_features("rap_tool_server", &["rap"]);
    let runtime = cancelkit_tests::example_with_features("rap_runtime", &["rap"]);
    let output = std::process::Command::new(runtime).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("invoked `run` (a 30 s script): HTTP 200 OK"),
        "{stdout}"
    );
    assert!(
        stdout.contains("recorded \"interrupted\" at once"),
        "{stdout}"
    );
    assert!(
        stdout.contains("real results received for the cancelled call: 0"),
        "{stdout}"
    );
    assert!(stdout.contains("is gone"), "{stdout}");
}
