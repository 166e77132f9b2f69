//! The pinned Python peers of `tests/python/`: a venv under `target/interop/python` with
//! `tests/python/requirements.txt` installed into it on first use, and a way to run the
//! scripts beside that file with a time limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::workspace_root as root;

/// The interpreter that creates the venv: `$CANCELKIT_PYTHON` if set, else `python3`.
fn base_python() -> String {
    std::env::var("CANCELKIT_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Creates a venv under `target/interop/python` and installs `tests/python/requirements.txt`
/// into it, unless exactly that file is already installed there; returns the venv's `python`.
///
/// Reinstalls (into a fresh venv) only when the requirements file changed, so later runs cost
/// a file comparison. Panics with pip's output if the install fails, and with a clear message
/// if there is no Python to create the venv with: a missing peer fails the test, it never skips
/// it. Safe to call from several tests at once: the first call does the work.
pub fn install() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(install_now).clone()
}

fn install_now() -> PathBuf {
    let requirements_file = root().join("tests").join("python").join("requirements.txt");
    let target = root().join("target").join("interop").join("python");
    let venv = target.join("venv");
    let python = venv.join("bin").join("python");
    let requirements = std::fs::read(&requirements_file).expect("tests/python/requirements.txt");
    let stamp = target.join(".installed-requirements");
    if std::fs::read(&stamp).ok().as_deref() == Some(requirements.as_slice()) && python.exists() {
        return python;
    }

    std::fs::create_dir_all(&target).expect("target/interop/python can be created");
    let _ = std::fs::remove_file(&stamp);
    if venv.exists() {
        std::fs::remove_dir_all(&venv).expect("remove the stale venv");
    }
    let base = base_python();
    run_installer(
        Command::new(&base).args(["-m", "venv"]).arg(&venv),
        &format!(
            "`{base} -m venv` (Python 3.10+ with the venv module is needed for the Python SDK \
             peer; set CANCELKIT_PYTHON to use another interpreter)"
        ),
    );
    run_installer(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                "--quiet",
                "-r",
            ])
            .arg(&requirements_file),
        "pip install -r tests/python/requirements.txt",
    );
    std::fs::write(&stamp, &requirements).expect("write the install stamp");
    python
}

fn run_installer(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `tests/python/<name>`.
pub fn script(name: &str) -> PathBuf {
    root().join("tests").join("python").join(name)
}

/// What a script run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `python script args...`; kills it and panics, with what it printed so far, if it is
/// still running after `limit`.
pub fn run(python: &Path, script: &Path, args: &[&std::ffi::OsStr], limit: Duration) -> Run {
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} did not finish within {limit:?}:\n{}\n{}",
                script.display(),
                stdout.join().unwrap_or_default(),
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}
