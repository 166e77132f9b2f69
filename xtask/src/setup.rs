//! `cargo xtask setup`: installs the third-party software of the external tests, the only place
//! that installs anything. Idempotent (what is in place is checked and kept, in well under a
//! second) and pinned (the npm lock file, the Python requirements files, the nextest version;
//! Debian's packages come from the machine's release).
//!
//! What it provisions, where, and the stamp each install leaves — `tests/src/external.rs` looks
//! for exactly these, and fails an external test that finds one missing:
//!
//! | what | where | stamp |
//! |---|---|---|
//! | Debian's `redis-server`, `chromium` (with `fonts-dejavu-core`) | on `PATH` | — |
//! | `tests/node/package.json` (`npm ci`) | `target/interop/node` | `.installed-lock` |
//! | `tests/python/requirements.txt` | `target/interop/python/venv` | `.installed-requirements` |
//! | `tests/python/requirements-NAME.txt` | `target/interop/python-NAME/venv` | the same |
//! | cargo-nextest [`NEXTEST`] (what `cargo xtask test` runs the tests with) | `cargo install` | — |

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Instant;

/// The cargo-nextest release installed when there is none (the one this machine kind ships).
pub const NEXTEST: &str = "0.9.143";

/// Programs the external tests run and the Debian packages that bring each.
const DEBIAN: [(&str, &[&str]); 4] = [
    ("redis-server", &["redis-server"]),
    ("chromium", &["chromium", "fonts-dejavu-core"]),
    // the npm and Python peers' own interpreters, when a machine has none
    ("npm", &["nodejs", "npm"]),
    ("python3", &["python3", "python3-venv"]),
];

/// `cargo xtask setup`.
pub fn main(args: &[&str]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("setup takes no arguments: {}", args.join(" ")));
    }
    run()
}

/// Provisions everything the external tests need; fails with what could not be installed.
///
/// Debian's packages are installed first only when Node.js or Python itself is missing;
/// otherwise the three installs (apt, npm, pip) run side by side, as they wait on the network.
pub fn run() -> Result<(), String> {
    let started = Instant::now();
    let root = crate::project_root();
    let missing: Vec<&str> = DEBIAN
        .iter()
        .filter(|(binary, _)| on_path(binary).is_none())
        .flat_map(|(_, packages)| packages.iter().copied())
        .collect();
    let needs_interpreter = DEBIAN[2..]
        .iter()
        .any(|(binary, _)| on_path(binary).is_none());
    if needs_interpreter {
        debian(&missing)?;
    }
    let results: Vec<Result<String, String>> = thread::scope(|scope| {
        let apt = scope.spawn(|| {
            if needs_interpreter {
                Ok("Debian packages: installed first".to_owned())
            } else {
                debian(&missing)
            }
        });
        let npm = scope.spawn(|| node(&root));
        let pip = scope.spawn(|| python(&root));
        let nextest = scope.spawn(nextest);
        [apt, npm, pip, nextest]
            .into_iter()
            .map(|step| step.join().unwrap_or_else(|_| Err("panicked".to_owned())))
            .collect()
    });
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(line) => println!("setup: {line}"),
            Err(error) => failures.push(error),
        }
    }
    if failures.is_empty() {
        println!("setup: done in {:.1} s", started.elapsed().as_secs_f64());
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// `apt-get install` of `packages` (nothing when empty); needs root.
fn debian(packages: &[&str]) -> Result<String, String> {
    if packages.is_empty() {
        return Ok("Debian packages: all present".to_owned());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return Err(format!(
            "the external tests need Debian's {} (missing here); setup installs them with \
             apt-get, which needs root: run `cargo xtask setup` as root once, or install them \
             yourself",
            packages.join(" ")
        ));
    }
    let lock = ["-o", "DPkg::Lock::Timeout=600"];
    quiet(
        Command::new("apt-get").args(lock).arg("update"),
        "apt-get update",
    )?;
    quiet(
        Command::new("apt-get")
            .args(lock)
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        &format!("apt-get install {}", packages.join(" ")),
    )?;
    Ok(format!("Debian packages: installed {}", packages.join(" ")))
}

/// `npm ci` of `tests/node` into `target/interop/node`, unless that lock file is installed there.
fn node(root: &Path) -> Result<String, String> {
    let source = root.join("tests").join("node");
    let target = root.join("target").join("interop").join("node");
    let lock = read(&source.join("package-lock.json"))?;
    let stamp = target.join(".installed-lock");
    if std::fs::read(&stamp).ok().as_deref() == Some(lock.as_slice())
        && target.join("node_modules").is_dir()
    {
        return Ok("Node peers: installed (tests/node/package-lock.json)".to_owned());
    }
    let started = Instant::now();
    std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    let _ = std::fs::remove_file(&stamp);
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), target.join(file))
            .map_err(|e| format!("copy tests/node/{file}: {e}"))?;
    }
    quiet(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&target),
        "npm ci (tests/node)",
    )?;
    std::fs::write(&stamp, &lock).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(format!(
        "Node peers: npm ci in {:.1} s",
        started.elapsed().as_secs_f64()
    ))
}

/// A venv per `tests/python/requirements*.txt`, unless exactly that file is installed in it.
fn python(root: &Path) -> Result<String, String> {
    let source = root.join("tests").join("python");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&source)
        .map_err(|e| format!("{}: {e}", source.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("requirements") && name.ends_with(".txt")
        })
        .collect();
    files.sort();
    let mut done = Vec::new();
    for file in files {
        let name = file.file_stem().unwrap_or_default().to_string_lossy();
        let dir = match name.strip_prefix("requirements-") {
            Some(set) => format!("python-{set}"),
            None => "python".to_owned(),
        };
        let dir = root.join("target").join("interop").join(dir);
        done.push(venv(&dir, &file)?);
    }
    Ok(format!("Python peers: {}", done.join(", ")))
}

/// `requirements` installed into `<dir>/venv` (a fresh one when the file changed).
fn venv(dir: &Path, requirements: &Path) -> Result<String, String> {
    let name = requirements
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let wanted = read(requirements)?;
    let stamp = dir.join(".installed-requirements");
    let venv = dir.join("venv");
    let python = venv.join("bin").join("python");
    if std::fs::read(&stamp).ok().as_deref() == Some(wanted.as_slice()) && python.exists() {
        return Ok(format!("{name} installed"));
    }
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&stamp);
    if venv.exists() {
        std::fs::remove_dir_all(&venv).map_err(|e| format!("{}: {e}", venv.display()))?;
    }
    // CANCELKIT_PYTHON picks another interpreter (3.10 or newer, with the venv module).
    let base = std::env::var("CANCELKIT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    quiet(
        Command::new(&base).args(["-m", "venv"]).arg(&venv),
        &format!("{base} -m venv (set CANCELKIT_PYTHON for another Python)"),
    )?;
    quiet(
        Command::new(&python)
            .args(["-m", "pip", "install", "--no-input"])
            .args(["--disable-pip-version-check", "--quiet", "-r"])
            .arg(requirements),
        &format!("pip install -r tests/python/{name}"),
    )?;
    std::fs::write(&stamp, &wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(format!(
        "{name} in {:.1} s",
        started.elapsed().as_secs_f64()
    ))
}

/// cargo-nextest, installed at [`NEXTEST`] when `cargo nextest` is missing.
fn nextest() -> Result<String, String> {
    let present = crate::cargo()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if present {
        return Ok("cargo-nextest: present".to_owned());
    }
    quiet(
        crate::cargo().args(["install", "cargo-nextest", "--locked", "--version", NEXTEST]),
        &format!("cargo install cargo-nextest@{NEXTEST}"),
    )?;
    Ok(format!("cargo-nextest: installed {NEXTEST}"))
}

/// Runs `command`, keeping its output to show only if it fails.
fn quiet(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
