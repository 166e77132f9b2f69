//! What the peer benchmark varies: the [`Stack`]s compared, the conditions ([`Config`]: the
//! [`Transport`] and the runtime [`Flavor`], and the payload) and how much of everything to run
//! ([`Sizes`]).

/// One of the four stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stack {
    /// cancelkit's Peer speaking MCP 2025-11-25.
    CancelkitMcp,
    /// rmcp 3.11.
    Rmcp,
    /// cancelkit's Peer speaking ACP.
    CancelkitAcp,
    /// agent-client-protocol 5.2.
    AcpSdk,
}

impl Stack {
    /// Every stack, in table order.
    pub const ALL: [Stack; 4] = [
        Stack::CancelkitMcp,
        Stack::Rmcp,
        Stack::CancelkitAcp,
        Stack::AcpSdk,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Stack::CancelkitMcp => "cancelkit MCP",
            Stack::Rmcp => "rmcp 3.11",
            Stack::CancelkitAcp => "cancelkit ACP",
            Stack::AcpSdk => "ACP SDK 5.2",
        }
    }

    /// Its name on the command line of `serve`.
    pub fn arg(self) -> &'static str {
        match self {
            Stack::CancelkitMcp => "cancelkit-mcp",
            Stack::Rmcp => "rmcp",
            Stack::CancelkitAcp => "cancelkit-acp",
            Stack::AcpSdk => "acp-sdk",
        }
    }

    /// The stack named `arg`.
    pub fn from_arg(arg: &str) -> Option<Stack> {
        Stack::ALL.into_iter().find(|s| s.arg() == arg)
    }
}

/// The runtime a run is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `new_current_thread`.
    Current,
    /// `new_multi_thread` with its default workers (one per core), as `#[tokio::main]`.
    Multi,
}

impl Flavor {
    /// Its name on the command line and in tables.
    pub fn arg(self) -> &'static str {
        match self {
            Flavor::Current => "current-thread",
            Flavor::Multi => "multi-thread",
        }
    }

    /// The flavor named `arg`.
    pub fn from_arg(arg: &str) -> Option<Flavor> {
        [Flavor::Current, Flavor::Multi]
            .into_iter()
            .find(|f| f.arg() == arg)
    }

    /// A fresh runtime of this flavor.
    pub fn runtime(self) -> tokio::runtime::Runtime {
        match self {
            Flavor::Current => tokio::runtime::Builder::new_current_thread(),
            Flavor::Multi => tokio::runtime::Builder::new_multi_thread(),
        }
        .enable_all()
        .build()
        .expect("a tokio runtime")
    }
}

/// How client and server are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `tokio::io::duplex`, both in one process.
    Duplex,
    /// The client spawns the server; they talk over its standard input and output.
    Pipes,
}

/// One condition: every stack is measured in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config {
    /// How client and server are connected.
    pub transport: Transport,
    /// The runtime of both.
    pub flavor: Flavor,
    /// Bytes of text in each request (0: the no-op rows).
    pub payload: usize,
}

impl Config {
    /// Every condition, in table order.
    pub fn all() -> Vec<Config> {
        let mut all = Vec::new();
        for transport in [Transport::Duplex, Transport::Pipes] {
            for flavor in [Flavor::Current, Flavor::Multi] {
                for payload in [0, 4096] {
                    all.push(Config {
                        transport,
                        flavor,
                        payload,
                    });
                }
            }
        }
        all
    }

    /// e.g. `duplex, current-thread, 4 KiB`.
    pub fn label(self) -> String {
        format!(
            "{}, {}, {}",
            match self.transport {
                Transport::Duplex => "in-memory duplex",
                Transport::Pipes => "OS pipes, 2 processes",
            },
            self.flavor.arg(),
            if self.payload == 0 {
                "no-op".to_owned()
            } else {
                format!("{} KiB", self.payload / 1024)
            }
        )
    }

    /// A file-name-safe form of [`Config::label`].
    pub fn slug(self) -> String {
        format!(
            "{}-{}-{}",
            match self.transport {
                Transport::Duplex => "duplex",
                Transport::Pipes => "pipes",
            },
            match self.flavor {
                Flavor::Current => "current",
                Flavor::Multi => "multi",
            },
            if self.payload == 0 {
                "noop".to_owned()
            } else {
                format!("{}k", self.payload / 1024)
            }
        )
    }
}

/// How much of everything: the full run, or the short one the test command runs.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Rounds; every figure is the median (min–max) of the rounds.
    pub rounds: usize,
    /// Requests per throughput measurement.
    pub throughput_requests: usize,
    /// Concurrent callers of the throughput measurement.
    pub window: usize,
    /// Cancels per idle measurement.
    pub idle_cancels: usize,
    /// Handlers running under the loaded measurement.
    pub in_flight: usize,
    /// Cancels per loaded measurement.
    pub loaded_cancels: usize,
    /// Samples per floor measurement.
    pub floor_samples: usize,
}

impl Sizes {
    /// The full run of `cargo xtask bench peer`.
    pub const FULL: Sizes = Sizes {
        rounds: 5,
        throughput_requests: 20_000,
        window: 32,
        idle_cancels: 1_000,
        in_flight: 10_000,
        loaded_cancels: 1_000,
        floor_samples: 2_000,
    };

    /// The short run (`CANCELKIT_BENCH_QUICK=1`): every code path, small counts.
    pub const QUICK: Sizes = Sizes {
        rounds: 1,
        throughput_requests: 640,
        window: 32,
        idle_cancels: 40,
        in_flight: 300,
        loaded_cancels: 40,
        floor_samples: 100,
    };

    /// QUICK if `CANCELKIT_BENCH_QUICK` is set, else FULL; `CANCELKIT_BENCH_ROUNDS=N` sets the
    /// rounds.
    pub fn from_env() -> Sizes {
        let mut sizes = if std::env::var_os("CANCELKIT_BENCH_QUICK").is_some() {
            Sizes::QUICK
        } else {
            Sizes::FULL
        };
        if let Some(rounds) = std::env::var("CANCELKIT_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .filter(|r| *r > 0)
        {
            sizes.rounds = rounds;
        }
        sizes
    }
}
