//! The pinned Python peers of `tests/python/`, in the venvs `cargo xtask setup` made under
//! `target/interop/` (one per pinned requirements file), and a way to run the scripts beside
//! those files with a time limit. Nothing here installs: a test that finds a venv missing or
//! older than its requirements file fails at once, naming `cargo xtask setup`
//! ([`crate::external`]).
//!
//! Two requirement sets, each in its own venv because they pin different versions of shared
//! packages: `tests/python/requirements.txt` (the official MCP Python SDK, [`sdk_python`]) and
//! `tests/python/requirements-fastmcp.txt` (FastMCP, [`fastmcp_python`], serving
//! `tests/python/fastmcp_server.py`: [`start_fastmcp_http`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::http_peer::HttpPeer;
use crate::workspace_root as root;

/// The `python` of the venv with `tests/python/requirements.txt` (the official MCP Python SDK,
/// every package pinned), `target/interop/python/venv`.
///
/// Fails the test at once ([`crate::external::missing`]) when setup has not made that venv from
/// exactly this requirements file.
pub fn sdk_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            provisioned(
                &root().join("target").join("interop").join("python"),
                &script("requirements.txt"),
            )
        })
        .clone()
}

/// The `python` of the FastMCP venv (`tests/python/requirements-fastmcp.txt`: FastMCP 4.1.2 with
/// its `tasks` extra, every package pinned), in `target/interop/python-fastmcp/venv` (as [`sdk_python`], for that file).
///
/// Runs `tests/python/fastmcp_server.py` ([`script`]): over stdio with no argument, over
/// Streamable HTTP with `--http PORT` ([`start_fastmcp_http`]).
pub fn fastmcp_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            provisioned(
                &root().join("target").join("interop").join("python-fastmcp"),
                &script("requirements-fastmcp.txt"),
            )
        })
        .clone()
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

/// `<dir>/venv`'s `python`, when setup installed exactly `requirements_file` there (the stamp
/// `<dir>/.installed-requirements` holds its bytes); fails the test otherwise.
fn provisioned(dir: &Path, requirements_file: &Path) -> PathBuf {
    let what = format!(
        "the Python venv of tests/python/{}",
        requirements_file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    );
    crate::external::check_stamp(&what, dir, ".installed-requirements", requirements_file);
    let python = dir.join("venv").join("bin").join("python");
    if !python.exists() {
        crate::external::missing(&what, &format!("there is no {}", python.display()));
    }
    python
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
