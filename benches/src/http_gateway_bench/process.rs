//! The benchmark's child processes: each in a process group of its own, killed with its group
//! when dropped (also while a panic unwinds) and by the kernel if the bench process dies first;
//! and the CPU time a process tree has used, from `/proc`.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// A child process (and its process group), killed when dropped.
pub struct Proc {
    /// The child.
    pub child: Child,
}

impl Proc {
    /// Spawns `command` in a process group of its own, to be killed if the bench dies.
    #[allow(unsafe_code)] // see the SAFETY comments inside
    pub fn spawn(mut command: Command, what: &str) -> Proc {
        command.process_group(0);
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Proc { child }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    #[allow(unsafe_code)] // see the SAFETY comments inside
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of the child's own process group.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The user + system CPU time, in seconds, that the process `root` and every process below it
/// have used so far (Linux `/proc/PID/stat`; the exited ones that were waited for are counted in
/// their parent's `cutime`/`cstime`).
pub fn tree_cpu_seconds(root: u32) -> f64 {
    let mut parents = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(stat) = stat(pid) {
                parents.push((pid, stat.ppid, stat.ticks));
            }
        }
    }
    let mut tree = vec![root];
    let mut ticks = 0u64;
    let mut i = 0;
    while i < tree.len() {
        let pid = tree[i];
        for &(child, ppid, t) in &parents {
            if child == pid {
                ticks += t;
            }
            if ppid == pid && !tree.contains(&child) {
                tree.push(child);
            }
        }
        i += 1;
    }
    ticks as f64 / clock_ticks_per_second()
}

struct Stat {
    ppid: u32,
    /// utime + stime + cutime + cstime.
    ticks: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may hold spaces: the fields follow its last `)`.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        ppid: field(4)? as u32,
        ticks: field(14)? + field(15)? + field(16)? + field(17)?,
    })
}

#[allow(unsafe_code)] // see the SAFETY comments inside
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_the_parent_and_the_cpu_ticks() {
        // pid (comm with spaces) state ppid ... utime stime cutime cstime (fields 14-17)
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 3 4 20 0 1 0 5 6 7";
        let stat = parse_stat(line).expect("parsed");
        assert_eq!(stat.ppid, 7);
        assert_eq!(stat.ticks, 11 + 22 + 3 + 4);
    }

    #[test]
    fn a_busy_process_is_charged_cpu() {
        let started = std::time::Instant::now();
        let mut x = 0u64;
        // Busy until a clock tick is charged (at most 5 s).
        while tree_cpu_seconds(std::process::id()) == 0.0 && started.elapsed().as_secs() < 5 {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
        assert!(tree_cpu_seconds(std::process::id()) > 0.0);
    }
}
