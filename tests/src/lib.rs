//! Shared helpers for cancelkit's cross-crate tests and benchmarks: loading `schema/` and
//! validating instances against one definition with the `jsonschema` crate (feature `schema`, on
//! by default), comparing JSON the way the wire does, building the runtime's examples in the
//! tests' own profile, the pinned Node and Python peers (among them two third-party MCP servers,
//! run over stdio or over Streamable HTTP on loopback: [`http_peer`]), an idle-cutting proxy
//! ([`proxy`]), headless Chromium ([`chromium`]), `redis-server` ([`redis`]), and a counting
//! global allocator ([`alloc`]). The third-party software is provisioned by `cargo xtask setup`,
//! never by a test ([`external`]).

pub mod alloc;
pub mod chromium;
pub mod external;
#[cfg(doctest)]
pub mod guide;
pub mod http_peer;
pub mod load;
pub mod node;
pub mod proxy;
pub mod python;
pub mod redis;
#[cfg(feature = "schema")]
mod schema;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[cfg(feature = "schema")]
pub use schema::Schemas;

/// The workspace's `schema/` directory.
pub fn schema_dir() -> PathBuf {
    workspace_root().join("schema")
}

/// JSON equality as the wire sees it: numbers compare by value (`1` equals `1.0`), objects
/// ignore member order.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Raises this process's soft limit on open files (`RLIMIT_NOFILE`) to its hard limit, as the
/// gateway does at start, and returns the soft limit now in force.
///
/// A test that holds many connections at once (a burst of hundreds of calls, each with its
/// client and server socket) calls it first: a normal user's soft limit is often 1,024 while
/// the hard limit is far higher, and root's is usually raised already, so without it such a
/// test passes as root and fails as anyone else with "Too many open files".
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    }
}

/// Builds one of the runtime's examples in the profile the running test was built in and
/// returns the path of its binary, as cargo reports it.
///
/// Under `cargo test` that is the dev profile, under `cargo test --release` the release profile
/// (any `--profile NAME` likewise), so a test never runs an example built from other sources or
/// with other settings than itself. The path comes from cargo's own `compiler-artifact` message,
/// not from a guess relative to the test binary.
///
/// A client example that starts a server example looks for it next to itself, so build the
/// server first: `example("mcp_server"); let client = example("mcp_client");`.
pub fn example(name: &str) -> PathBuf {
    example_with_features(name, &[])
}

/// Like [`example`], for an example that needs some of the runtime's features.
pub fn example_with_features(name: &str, features: &[&str]) -> PathBuf {
    example_in_profile(name, features, &test_profile())
}

/// Builds one of the runtime's examples as `cargo run -p cancelkit --example NAME` does: with
/// the runtime's own features only, not the workspace's (which [`example`] uses, so that it
/// finds what `cargo test` built). Costs a build of the runtime in that feature set; for a test
/// of what a user typing that command gets.
pub fn example_alone(name: &str) -> PathBuf {
    build_in("cancelkit", ("example", name), &[], &test_profile(), false)
}

/// The runtime's features an example needs (its `required-features`), added to every build of
/// it: an example built once with and once without them would be two binaries at one path.
const EXAMPLE_FEATURES: &[(&str, &[&str])] = &[("mcp_server", &["http", "mcp-server"])];

/// Builds one of the runtime's examples in the cargo profile `profile` (`release` for the
/// benchmarks, whose binary does not sit where a test binary does) and returns its path.
pub fn example_in_profile(name: &str, features: &[&str], profile: &str) -> PathBuf {
    let mut features = features.to_vec();
    for (example, required) in EXAMPLE_FEATURES {
        if *example == name {
            for feature in *required {
                if !features.contains(feature) {
                    features.push(feature);
                }
            }
        }
    }
    build_example("cancelkit", name, &features, profile)
}

/// Like [`example`], for an example of another workspace package (such as `cancelkit-cli`).
pub fn package_example(package: &str, name: &str) -> PathBuf {
    build_example(package, name, &[], &test_profile())
}

/// Builds binary `name` of workspace package `package` (such as the `cancelkit` command of
/// `cancelkit-cli`, for another package's tests) in the test's profile and returns its path.
pub fn package_binary(package: &str, name: &str) -> PathBuf {
    build(package, ("bin", name), &[], &test_profile())
}

fn build_example(package: &str, name: &str, features: &[&str], profile: &str) -> PathBuf {
    build(package, ("example", name), features, profile)
}

/// Builds target `(kind, name)` (`example` or `bin`) of `package` with the workspace's
/// features; its executable.
fn build(package: &str, target: (&str, &str), features: &[&str], profile: &str) -> PathBuf {
    build_in(package, target, features, profile, true)
}

/// Builds target `(kind, name)` of `package`, with the features unified across the workspace
/// (`--workspace`) or the package's own (`-p package`); its executable.
fn build_in(
    package: &str,
    (kind, name): (&str, &str),
    features: &[&str],
    profile: &str,
    workspace: bool,
) -> PathBuf {
    let features: Vec<String> = features.iter().map(|f| format!("{package}/{f}")).collect();
    let features = features.join(",");
    let mut command = Command::new(env!("CARGO"));
    command
        .args([
            "build",
            "--quiet",
            "--message-format=json-render-diagnostics",
        ])
        // `--workspace`, not `-p package`: features are then unified across the workspace as
        // `cargo test` unifies them, so the build finds what `cargo test` already built instead
        // of compiling the package again with its own feature set (target names are unique
        // in the workspace, so this builds only `name`).
        .args(["--profile", profile])
        .args(if workspace {
            vec!["--workspace"]
        } else {
            vec!["-p", package]
        })
        .args([&format!("--{kind}"), name])
        .current_dir(workspace_root());
    if !features.is_empty() {
        command.args(["--features", &features]);
    }
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "the {name} {kind} does not build in the {profile} profile"
    );
    let stdout = String::from_utf8(output.stdout).expect("cargo writes UTF-8 JSON");
    executable(&stdout, kind, name).unwrap_or_else(|| {
        panic!("cargo built the {name} {kind} but reported no executable for it:\n{stdout}")
    })
}

/// The `executable` of the `compiler-artifact` message for target `name` of `kind` (`example`,
/// `bin`) in cargo's JSON messages (one per line).
fn executable(messages: &str, kind: &str, name: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| {
            message["target"]["name"] == name
                && message["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        })
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
}

/// The cargo profile the running test binary was built in, from its place in the target
/// directory (`<target>/<profile dir>/deps/<binary>`): `debug` is the `dev` profile, any other
/// directory is named after its profile (`release`, or a custom one).
fn test_profile() -> String {
    let me = std::env::current_exe().expect("the test binary's path");
    let deps = me.parent().expect("the test binary sits in a directory");
    assert!(
        deps.file_name().is_some_and(|dir| dir == "deps"),
        "expected the test binary under <target>/<profile>/deps, found {}",
        me.display()
    );
    let dir = deps
        .parent()
        .and_then(Path::file_name)
        .and_then(|dir| dir.to_str())
        .expect("<target>/<profile>/deps");
    match dir {
        "debug" => "dev".to_owned(),
        other => other.to_owned(),
    }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_comes_from_the_matching_compiler_artifact() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"name":"cancelkit","kind":["lib"]},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"mcp_server","kind":["example"]},"executable":"/t/release/examples/mcp_server"}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"mcp_client","kind":["example"]},"executable":"/t/release/examples/mcp_client"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            executable(&messages, "example", "mcp_client"),
            Some(PathBuf::from("/t/release/examples/mcp_client"))
        );
        assert_eq!(executable(&messages, "example", "acp_agent"), None);
        assert_eq!(executable(&messages, "bin", "mcp_client"), None);
    }
}
