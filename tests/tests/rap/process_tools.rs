//! Process tools run directly: the group's grace period, leftovers of a normal exit, the output
//! cap, and removing the call's directory.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cancelkit::rap::process::{self, ProcessError, RunOptions};
use cancelkit::{CancelReason, Scope};

use crate::harness::{GRACE, KillGroup};

/// Runs a process tool in a cancellable scope of its own.
fn spawn_process(
    command: tokio::process::Command,
    options: RunOptions,
) -> (
    tokio::task::JoinHandle<Result<process::ProcessOutput, ProcessError>>,
    cancelkit::Canceller,
) {
    let (scope, canceller) = Scope::root();
    let task = tokio::spawn(scope.run(process::run_with(command, options)));
    (task, canceller)
}

/// A `sh` command running `script`, with `vars` in its environment.
fn shell(script: &str, vars: &[(&str, &Path)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(script);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

async fn wait_for_file(path: &Path) {
    for _ in 0..1000 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} never appeared", path.display());
}

/// Whether `pid` is a running process (not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// The leader exits at SIGTERM, a member needs half a second to clean up: the member gets it,
/// because the grace period is the group's, not the leader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_keep_the_grace_period_when_the_leader_exits_first() {
    let marks = tempfile::tempdir().unwrap();
    let (ready, cleaned) = (marks.path().join("ready"), marks.path().join("cleaned"));
    let script = r#"
        cleanup() { sleep 0.5; echo cleaned > "$CLEANED"; exit 0; }
        ( trap cleanup TERM; touch "$READY"; while :; do sleep 0.05; done ) &
        wait
    "#;
    let command = shell(script, &[("READY", &ready), ("CLEANED", &cleaned)]);
    let (task, canceller) = spawn_process(command, RunOptions::new(GRACE));
    wait_for_file(&ready).await;
    let cancelled = Instant::now();
    canceller.cancel(CancelReason::Peer(None));
    let outcome = task.await.unwrap();
    let took = cancelled.elapsed();
    assert!(
        matches!(outcome, Err(ProcessError::Cancelled(_))),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&cleaned).ok().as_deref(),
        Some("cleaned\n"),
        "the member finished its cleanup (the group was stopped after {took:?})"
    );
    assert!(
        took < GRACE,
        "the group exited by itself within the grace period: {took:?}"
    );
}

/// Processes the leader leaves behind when it exits normally are stopped (SIGTERM) while its
/// directory still exists, and the call returns even if they hold its output open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_normal_exit_are_stopped_before_the_directory_goes() {
    let marks = tempfile::tempdir().unwrap();
    let (ready, verdict, pid_file, dir_file) = (
        marks.path().join("ready"),
        marks.path().join("verdict"),
        marks.path().join("pid"),
        marks.path().join("dir"),
    );
    // The member reports, when it gets SIGTERM, whether the call's directory still exists.
    let script = r#"
        DIR=$PWD; export DIR
        sh -c 'trap "if [ -d \"\$DIR\" ]; then echo present; else echo gone; fi > \"\$VERDICT\"; exit 0" TERM
               touch "$READY"; while :; do sleep 0.05; done' >/dev/null 2>&1 &
        echo $! > "$PID_FILE"; echo "$DIR" > "$DIR_FILE"
        while [ ! -e "$READY" ]; do sleep 0.01; done
        echo hello
    "#;
    let vars = [
        ("READY", ready.as_path()),
        ("VERDICT", &verdict),
        ("PID_FILE", &pid_file),
        ("DIR_FILE", &dir_file),
    ];
    let (task, _canceller) = spawn_process(shell(script, &vars), RunOptions::new(GRACE));
    let output = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the call returns")
        .unwrap()
        .unwrap();
    let member: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _cleanup = KillGroup(member);
    assert_eq!(output.stdout, "hello\n");
    assert!(output.status.success());
    assert_eq!(
        std::fs::read_to_string(&verdict).ok().as_deref(),
        Some("present\n"),
        "the member was stopped while the directory existed"
    );
    assert!(!running(member), "the member is gone");
    let dir = std::fs::read_to_string(&dir_file).unwrap();
    assert!(!Path::new(dir.trim()).exists(), "the directory is gone");

    // A member that keeps the output pipe open does not hold the call up.
    let script = "sleep 300 & echo started";
    let started = Instant::now();
    let (task, _canceller) = spawn_process(shell(script, &[]), RunOptions::new(GRACE));
    let output = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the call returns although `sleep 300` holds its stdout")
        .unwrap()
        .unwrap();
    assert_eq!(output.stdout, "started\n");
    assert!(started.elapsed() < GRACE, "SIGTERM stopped the sleep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_output_is_capped_with_a_marker() {
    let script = "head -c 300000 /dev/zero | tr '\\0' a; echo oops >&2; head -c 5000 /dev/zero | tr '\\0' e >&2";
    let options = RunOptions::new(GRACE).output_limit(1000);
    let (task, _canceller) = spawn_process(shell(script, &[]), options.clone());
    let output = task.await.unwrap().unwrap();
    assert!(output.status.success(), "the process was never blocked");
    assert_eq!(
        output.stdout,
        format!(
            "{}\n[... output truncated after 1000 bytes]",
            "a".repeat(1000)
        )
    );
    assert_eq!(
        output.stderr,
        format!(
            "oops\n{}\n[... output truncated after 1000 bytes]",
            "e".repeat(995)
        )
    );
    // Under the limit nothing is added.
    let (task, _canceller) = spawn_process(shell("printf 0123456789", &[]), options);
    assert_eq!(task.await.unwrap().unwrap().stdout, "0123456789");
    // And the default limit is 1 MiB.
    let script = "head -c 1100000 /dev/zero | tr '\\0' b";
    let (task, _canceller) = spawn_process(shell(script, &[]), RunOptions::new(GRACE));
    let stdout = task.await.unwrap().unwrap().stdout;
    assert!(
        stdout.ends_with("\n[... output truncated after 1048576 bytes]"),
        "{}",
        &stdout[stdout.len() - 60..]
    );
}

/// Removing a call's directory (here 20,000 files, on tmpfs so that creating them is quick)
/// happens off the runtime's thread: a single-threaded runtime keeps running its other tasks
/// meanwhile.
#[test]
fn the_directory_is_removed_off_the_runtime_thread() {
    const FILES: usize = 20_000;
    let root = tempfile::tempdir_in("/dev/shm").expect("a tmpfs at /dev/shm");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (output, longest_gap) = runtime.block_on(async {
        let ticks = Arc::new(Mutex::new(Vec::new()));
        let ticker = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    ticks.lock().unwrap().push(Instant::now());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
        let script = format!("mkdir many && cd many && seq 1 {FILES} | xargs touch && pwd");
        let options = RunOptions::new(GRACE).temp_root(root.path());
        let output = process::run_with(shell(&script, &[]), options)
            .await
            .unwrap();
        // One more tick, after the end of the call: it measures a stall at the very end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        ticker.abort();
        let ticks = ticks.lock().unwrap().clone();
        let longest_gap = ticks.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        (output, longest_gap)
    });
    let dir = output.stdout.trim();
    assert!(dir.ends_with("/many"), "{dir}");
    assert!(!Path::new(dir).exists());

    // What removing such a tree costs on this machine, on this thread.
    let tree = tempfile::tempdir_in(root.path()).unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("seq 1 {FILES} | xargs touch"))
        .current_dir(tree.path())
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    tree.close().unwrap();
    let removal = started.elapsed();
    assert!(
        longest_gap < removal / 2,
        "the runtime stalled for {longest_gap:?}; removing the tree takes {removal:?}"
    );
}
