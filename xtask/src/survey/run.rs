//! One survey run: the mock in one mode, one agent configured in a fresh home, and
//! `cancelkit check acp` driving it; then every process the run started is ended.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::agents::Agent;
use super::mock::{Mock, Mode, Record};

/// How long one `cancelkit check acp` may run before it and the agent are killed.
const DEADLINE: Duration = Duration::from_secs(150);
/// How often the run looks whether the check has exited.
const POLL: Duration = Duration::from_millis(100);
/// How many [`POLL`]s processes get to exit by themselves (2 s), before and after SIGTERM.
const GRACE_POLLS: usize = 20;
/// The environment variable every process of a run carries (the agents' children inherit it,
/// even those that leave the process group): how the leftovers are found at the end.
const MARKER: &str = "CANCELKIT_SURVEY_RUN";
/// `cancelkit check acp --timeout`, in seconds.
const TIMEOUT: &str = "30";

/// The paths a run reads and writes.
pub struct Paths {
    /// `target/debug/cancelkit`.
    pub cancelkit: PathBuf,
    /// The directory holding the agents' `node_modules`.
    pub node: PathBuf,
    /// `target/survey`: where the reports and logs go.
    pub out: PathBuf,
}

/// What one run came to.
pub struct Outcome {
    /// The agent.
    pub agent: Agent,
    /// The mode.
    pub mode: Mode,
    /// How the check exited (`None`: killed at the deadline).
    pub exit: Option<i32>,
    /// How long the check ran.
    pub took: Duration,
    /// What the mock received.
    pub records: Vec<Record>,
    /// The processes still alive after the check exited (each `PID COMMAND`), ended by the run.
    pub leftovers: Vec<String>,
}

/// The prompt text the check sends (the mock answers the same whatever it is).
fn prompt(mode: Mode) -> &'static str {
    match mode {
        Mode::Slow => "Write a long story, slowly.",
        Mode::Permission => "Create the file cancelkit-survey.txt with the shell.",
    }
}

/// Runs `cancelkit check acp` against `agent` with the mock in `mode`.
pub fn run(agent: Agent, mode: Mode, paths: &Paths) -> Result<Outcome, String> {
    let stem = format!("{}-{}", agent.name(), mode.name());
    let mock = Mock::start(agent.api(), mode)?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("cancelkit-survey-{stem}-"))
        .tempdir()
        .map_err(|e| format!("cannot create a temporary home: {e}"))?;
    let home = scratch.path().join("home");
    // The check sends its temporary directory as the session's cwd: a fresh one of the run's.
    let work = scratch.path().join("work");
    for dir in [&home, &work] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let launch = agent.launch(&mock.url, &home, &paths.node)?;
    let json = paths.out.join(format!("{stem}.json"));
    let stderr = paths.out.join(format!("{stem}.stderr"));
    let output = paths.out.join(format!("{stem}.out"));
    for file in [&json, &stderr] {
        let _ = std::fs::remove_file(file);
    }
    let marker = format!("{}-{stem}", std::process::id());
    let out = std::fs::File::create(&output)
        .map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    let err = out.try_clone().map_err(|e| format!("{e}"))?;
    let mut command = Command::new(&paths.cancelkit);
    command
        .args(["check", "acp", "--json"])
        .arg(&json)
        .args(["--prompt", prompt(mode), "--timeout", TIMEOUT, "--"])
        // The check discards the agent's stderr: a shell in between appends it to the log.
        .args(["sh", "-c", "exec \"$@\" 2>>\"$SURVEY_STDERR\"", "sh"])
        .args(&launch.command)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", &work)
        .env("SURVEY_STDERR", &stderr)
        .env(MARKER, &marker)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", paths.cancelkit.display()))?;
    let group = child.id();
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if started.elapsed() < DEADLINE => std::thread::sleep(POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let took = started.elapsed();
    let leftovers = end_all(group, &marker);
    let records = mock.records();
    drop(mock);
    let log = paths.out.join(format!("{stem}.mock.json"));
    let text = serde_json::to_string_pretty(&records).map_err(|e| e.to_string())?;
    std::fs::write(&log, text).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    Ok(Outcome {
        agent,
        mode,
        exit,
        took,
        records,
        leftovers,
    })
}

/// Ends every process of the run: its process group, then whatever still carries the run's
/// marker (children that made a session of their own, such as a shell in a PTY). Returns those
/// that were still alive, each as `PID COMMAND`.
#[allow(unsafe_code)] // see the SAFETY comments inside
pub fn end_all(group: u32, marker: &str) -> Vec<String> {
    let group = i32::try_from(group).unwrap_or(0);
    // A grace period first: an agent's child that exits on its own once its stdin closes is
    // not a leftover.
    let mut alive = marked(marker);
    for _ in 0..GRACE_POLLS {
        if alive.is_empty() {
            break;
        }
        std::thread::sleep(POLL);
        alive = marked(marker);
    }
    let named = alive
        .iter()
        .map(|pid| format!("{pid} {}", command_of(*pid)))
        .collect();
    if group > 0 {
        // SAFETY: kill(2) with a negative pid signals the process group; no memory involved.
        unsafe { libc::kill(-group, libc::SIGTERM) };
    }
    for pid in &alive {
        // SAFETY: as above, one process.
        unsafe { libc::kill(*pid, libc::SIGTERM) };
    }
    for _ in 0..GRACE_POLLS {
        if marked(marker).is_empty() {
            return named;
        }
        std::thread::sleep(POLL);
    }
    if group > 0 {
        // SAFETY: as above.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    for pid in marked(marker) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    named
}

/// A process's command line, arguments joined by spaces, cut to 120 characters.
fn command_of(pid: i32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    words.join(" ").chars().take(120).collect()
}

/// The processes whose environment holds `MARKER=marker` (zombies have none and are skipped).
fn marked(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER}={marker}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let environ = Path::new("/proc").join(pid.to_string()).join("environ");
            std::fs::read(environ).is_ok_and(|bytes| {
                bytes
                    .split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}
