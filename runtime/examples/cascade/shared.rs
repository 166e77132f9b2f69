//! What the four processes share: the constants, the event lines each reports on stderr, this
//! binary (to start the other roles with), and whether a process or a group is gone.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::{Value, json};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The bearer token between the MCP server (the RAP runtime) and its tool server.
pub const TOKEN: &str = "cascade-token";
/// How long the tool would run if nobody cancelled it.
pub const TOOL_SECONDS: u64 = 60;
/// How long the client waits for each thing it waits for.
pub const WAIT: Duration = Duration::from_secs(10);
/// The prefix of an event line on stderr.
pub const EVENT: &str = "cascade-event ";
/// The longest stderr line the client reads from its children.
pub const MAX_LINE: usize = 64 * 1024;
/// How many events the client keeps (it needs about ten).
pub const MAX_EVENTS: usize = 256;

/// Wall-clock microseconds since the Unix epoch: comparable across processes on one machine.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Reports an event on stderr for the client: `cascade-event {"event": name, ...}`.
pub fn event(name: &str, mut fields: Value) {
    fields["event"] = json!(name);
    fields["pid"] = json!(std::process::id());
    fields["at_us"] = json!(now_us());
    write_event(&fields);
}

/// Writes one event line to stderr in a single `write` (the children share one pipe, and a
/// pipe keeps writes of up to 4 KiB whole; `eprintln!` may split a line into several).
pub fn write_event(fields: &Value) {
    use std::io::Write;
    let line = format!("{EVENT}{fields}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// This binary, to start the other roles with. On Linux `/proc/self/exe`, which still runs
/// this very file if a rebuild has replaced it on disk meanwhile.
pub fn me() -> std::io::Result<PathBuf> {
    let proc_self = PathBuf::from("/proc/self/exe");
    if proc_self.exists() {
        return Ok(proc_self);
    }
    std::env::current_exe()
}

/// Whether a process (`pid > 0`) or a process group (`-pgid`) has no member left.
pub fn gone(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH)
}
