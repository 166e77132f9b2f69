//! The pinned Python peers of `tests/python/`: venvs under `target/interop/` with a pinned
//! requirements file installed into each on first use, and a way to run the scripts beside
//! those files with a time limit.
//!
//! Two requirement sets, each in its own venv because they pin different versions of shared
//! packages: `tests/python/requirements.txt` (the official MCP Python SDK, [`install`]) and
//! `tests/python/requirements-fastmcp.txt` (FastMCP, [`fastmcp_python`], serving
//! `tests/python/fastmcp_server.py`: [`start_fastmcp_http`]). [`venv_for`] installs any other set.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::http_peer::HttpPeer;
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
    PYTHON
        .get_or_init(|| {
            install_into(
                &root().join("target").join("interop").join("python"),
                &script("requirements.txt"),
            )
        })
        .clone()
}

/// Installs the requirements file `requirements` (every package pinned) into a venv of its own,
/// `target/interop/python-<name>/venv`, unless exactly that file is already installed there;
/// returns the venv's `python`.
///
/// As [`install`] does for `tests/python/requirements.txt`: a changed file is installed into a
/// fresh venv, an unchanged one costs a file comparison; a failed install panics with pip's
/// output. Safe to call from several tests at once, in one process (the first call per `name`
/// does the work) or in several (a file lock per venv).
pub fn venv_for(name: &str, requirements: &Path) -> PathBuf {
    static VENVS: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    assert!(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "a venv name is letters, digits, '-' and '_': {name:?}"
    );
    let mut venvs = VENVS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let venvs = venvs.get_or_insert_with(HashMap::new);
    if let Some(python) = venvs.get(name) {
        return python.clone();
    }
    let dir = root()
        .join("target")
        .join("interop")
        .join(format!("python-{name}"));
    let python = install_into(&dir, requirements);
    venvs.insert(name.to_owned(), python.clone());
    python
}

/// The `python` of the FastMCP venv (`tests/python/requirements-fastmcp.txt`: FastMCP 4.1.2 with
/// its `tasks` extra, every package pinned), installed by [`venv_for`] on first use.
///
/// Runs `tests/python/fastmcp_server.py` ([`script`]): over stdio with no argument, over
/// Streamable HTTP with `--http PORT` ([`start_fastmcp_http`]).
pub fn fastmcp_python() -> PathBuf {
    venv_for("fastmcp", &script("requirements-fastmcp.txt"))
}

/// Starts `tests/python/fastmcp_server.py` over Streamable HTTP (`--http PORT`) on a free port
/// of 127.0.0.1 (the only address it binds) and waits until it listens; the returned guard's
/// [`HttpPeer::url`] is `http://127.0.0.1:<port>/mcp`. Dropping the guard kills the server.
///
/// FastMCP checks the `Host` and `Origin` headers of a loopback-bound server: address it as
/// `127.0.0.1` (or `localhost`), as the URL does.
pub fn start_fastmcp_http() -> HttpPeer {
    let python = fastmcp_python();
    let server = script("fastmcp_server.py");
    HttpPeer::start("fastmcp", "/mcp", |port| {
        let mut command = Command::new(&python);
        command
            .arg(&server)
            .arg("--http")
            .arg(port.to_string())
            .env("PYTHONUNBUFFERED", "1");
        command
    })
}

/// Installs `requirements_file` into `<dir>/venv` unless the stamp `<dir>/.installed-requirements`
/// holds exactly its bytes; the venv's `python`. Holds the file lock `<dir>.lock` meanwhile.
fn install_into(dir: &Path, requirements_file: &Path) -> PathBuf {
    let venv = dir.join("venv");
    let python = venv.join("bin").join("python");
    let requirements = std::fs::read(requirements_file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", requirements_file.display()));
    let stamp = dir.join(".installed-requirements");
    let parent = dir
        .parent()
        .expect("the venv directory sits in target/interop");
    std::fs::create_dir_all(parent)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
    let lock_path = dir.with_extension("lock");
    // Held until the install is done (the end of this function): two installs into one venv
    // break each other.
    let guard = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", lock_path.display()));
    guard
        .lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
    if std::fs::read(&stamp).ok().as_deref() == Some(requirements.as_slice()) && python.exists() {
        return python;
    }

    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let _ = std::fs::remove_file(&stamp);
    if venv.exists() {
        std::fs::remove_dir_all(&venv).expect("remove the stale venv");
    }
    let base = base_python();
    run_installer(
        Command::new(&base).args(["-m", "venv"]).arg(&venv),
        &format!(
            "`{base} -m venv` (Python 3.10+ with the venv module is needed for the Python \
             peers; set CANCELKIT_PYTHON to use another interpreter)"
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
            .arg(requirements_file),
        &format!("pip install -r {}", requirements_file.display()),
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
    /// How the script exited.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
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
