//! Headless Chromium for tests that check a page after its JavaScript ran: [`dump_dom`] and
//! [`screenshot`].
//!
//! [`binary`] finds `chromium` on `PATH`, where `cargo xtask setup` installs Debian's `chromium`
//! package (with `fonts-dejavu-core`, so screenshots have legible text). A test that needs it is
//! an external test ([`crate::external`]): without it, the test fails at once, naming `cargo
//! xtask setup`.
//!
//! Every run gets its own profile directory, so tests can run browsers side by side.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one headless run may take before it is killed and the test fails.
const RUN_WITHIN: Duration = Duration::from_secs(60);

/// The `chromium` binary on `PATH`; fails the test at once when there is none
/// ([`crate::external::binary`]).
#[track_caller]
pub fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| crate::external::binary("chromium", "chromium"))
        .clone()
}

/// A `file://` URL for `path` (made absolute), with `fragment` (without its `#`) if not empty.
pub fn file_url(path: &Path, fragment: &str) -> String {
    let path = std::path::absolute(path)
        .unwrap_or_else(|e| panic!("cannot make {} absolute: {e}", path.display()));
    let mut url = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                url.push(char::from(byte));
            }
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    if !fragment.is_empty() {
        url.push('#');
        url.push_str(fragment);
    }
    url
}

/// Loads `url` in headless Chromium and returns the DOM as serialized after the load event, that
/// is after the page's scripts ran.
///
/// Panics if Chromium fails or takes longer than a minute.
pub fn dump_dom(url: &str) -> String {
    let output = run(&["--dump-dom", url]);
    String::from_utf8(output.stdout).expect("chromium's --dump-dom output is UTF-8")
}

/// Loads `url` in a headless Chromium window of `width` × `height` CSS pixels and writes a PNG
/// screenshot of it to `png`.
///
/// Panics if Chromium fails, takes longer than a minute, or writes no file.
pub fn screenshot(url: &str, png: &Path, width: u32, height: u32) {
    let _ = std::fs::remove_file(png);
    run(&[
        &format!("--screenshot={}", png.display()),
        &format!("--window-size={width},{height}"),
        "--hide-scrollbars",
        url,
    ]);
    assert!(
        png.is_file(),
        "chromium wrote no screenshot to {}",
        png.display()
    );
}

/// Runs headless Chromium with `args` and a fresh profile; panics unless it exits successfully.
fn run(args: &[&str]) -> Output {
    let profile = std::env::temp_dir().join(format!(
        "cancelkit-chromium-{}-{}",
        std::process::id(),
        next_run()
    ));
    let mut child = Command::new(binary())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--no-first-run", "--disable-extensions", "--mute-audio"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start chromium: {e}"));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + RUN_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&profile);
            panic!("chromium {args:?} did not finish within {RUN_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    };
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        output.status.success(),
        "chromium {args:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn next_run() -> u64 {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
