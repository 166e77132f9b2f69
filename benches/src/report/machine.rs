//! The machine a benchmark ran on, as the README states it beside the figures.

use serde::{Deserialize, Serialize};

/// What the figures were measured on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU model (`/proc/cpuinfo`), or `unknown`.
    pub cpu: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// Total memory in GiB (`/proc/meminfo`), 0 if unknown.
    pub memory_gib: f64,
    /// The operating system and kernel release, e.g. `linux 6.8.0`.
    pub os: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_gib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / (1024.0 * 1024.0))
            .unwrap_or(0.0);
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            memory_gib,
            os: format!("{} {}", std::env::consts::OS, release.trim()),
        }
    }

    /// One line: `2 cores of AMD EPYC ..., 24 GiB, linux 6.8.0`.
    pub fn describe(&self) -> String {
        format!(
            "{} cores of {}, {:.0} GiB, {}",
            self.cores, self.cpu, self.memory_gib, self.os
        )
    }
}
