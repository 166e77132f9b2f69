//! The third-party software of the external tests, as `cargo xtask setup` provisioned it.
//!
//! `cargo test` runs only the hermetic tests: those that need nothing but Rust and loopback.
//! A test that needs anything else (an npm or PyPI peer, `redis-server`, Chromium, the official
//! conformance suite) is an *external* test: it carries `#[ignore = "external: …"]`, so plain
//! `cargo test` lists it as ignored, and `cargo xtask test` runs it (with `--run-ignored all`)
//! after `cargo xtask setup` has installed what it needs. The tests never install anything:
//! an external test run without its tool fails at once, in the helper that looks for the tool,
//! with a message naming `cargo xtask setup` ([`missing`]). Nothing is skipped silently. (A few
//! hermetic tests too slow for the inner loop carry `#[ignore = "slow: …"]` instead; `cargo xtask
//! test` runs them with these.)
//!
//! What setup provisions, and where these helpers look for it (xtask/src/setup.rs does the
//! installs; the two must agree):
//!
//! | what | where | stamp |
//! |---|---|---|
//! | Debian's `redis-server`, `chromium` | on `PATH` | — |
//! | `tests/node/package.json` (`npm ci`) | `target/interop/node` | `.installed-lock`: the lock file's bytes |
//! | `tests/python/requirements.txt` | `target/interop/python/venv` | `.installed-requirements`: the file's bytes |
//! | `tests/python/requirements-NAME.txt` | `target/interop/python-NAME/venv` | the same |

use std::path::{Path, PathBuf};

/// Fails the calling test at once: `what` is not provisioned, and `cargo xtask setup` is what
/// provisions it. `why` says what is wrong with what was found (or that nothing was).
#[track_caller]
pub fn missing(what: &str, why: &str) -> ! {
    panic!(
        "{what} is not provisioned ({why}). This is an external test: run `cargo xtask setup` \
         (it installs every external test's tools, pinned; it is idempotent), then run it again \
         — `cargo xtask test` runs them all, `cargo test -- --ignored NAME` or `cargo nextest \
         run --run-ignored only NAME` one"
    )
}

/// The program `name` on `PATH`, which setup installs from Debian's `package`; fails the test
/// ([`missing`]) when there is none.
#[track_caller]
pub fn binary(name: &str, package: &str) -> PathBuf {
    on_path(name).unwrap_or_else(|| {
        missing(
            &format!("`{name}` (Debian's {package})"),
            "it is not on PATH",
        )
    })
}

/// `name` on `PATH`, if it is there.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `dir` holds what setup installed from `source` when its stamp file `stamp` (in `dir`) holds
/// exactly `source`'s bytes; otherwise the test fails ([`missing`]), saying whether nothing is
/// installed or an older `source` is.
#[track_caller]
pub fn check_stamp(what: &str, dir: &Path, stamp: &str, source: &Path) {
    let wanted =
        std::fs::read(source).unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
    match std::fs::read(dir.join(stamp)) {
        Ok(installed) if installed == wanted => {}
        Ok(_) => missing(
            what,
            &format!(
                "{} holds an install of an older {}",
                dir.display(),
                source.display()
            ),
        ),
        Err(_) => missing(what, &format!("nothing is installed in {}", dir.display())),
    }
}

/// `python3` (as found on `PATH`), which the tests' own Python fixtures run on (a fake server or
/// agent under `cli/tests/fixtures/`): a test that runs one is an external test. Fails the test
/// at once ([`missing`]) when there is none.
#[track_caller]
pub fn python3() -> &'static str {
    static PYTHON3: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON3.get_or_init(|| {
        binary("python3", "python3")
            .to_str()
            .expect("a UTF-8 path")
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic message of `f`, which must panic.
    fn message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let payload = std::panic::catch_unwind(f).expect_err("it fails the test");
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .expect("a text message")
    }

    #[test]
    fn a_missing_program_fails_at_once_naming_setup() {
        let text = message(|| {
            binary("cancelkit-no-such-program", "no-such-package");
        });
        assert!(text.contains("`cargo xtask setup`"), "{text}");
        assert!(text.contains("cancelkit-no-such-program"), "{text}");
        assert!(text.contains("not on PATH"), "{text}");
    }

    #[test]
    fn an_install_that_is_missing_or_older_than_its_source_fails_naming_setup() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("requirements.txt");
        std::fs::write(&source, "mcp==2.3.0\n").unwrap();
        let install = dir.path().join("venv");
        std::fs::create_dir(&install).unwrap();
        let check = || check_stamp("the peers", &install, ".stamp", &source);

        let text = message(check);
        assert!(text.contains("`cargo xtask setup`"), "{text}");
        assert!(text.contains("nothing is installed"), "{text}");

        std::fs::write(install.join(".stamp"), "mcp==2.2.0\n").unwrap();
        let text = message(check);
        assert!(text.contains("`cargo xtask setup`"), "{text}");
        assert!(text.contains("an older"), "{text}");

        std::fs::write(install.join(".stamp"), "mcp==2.3.0\n").unwrap();
        check();
    }
}
