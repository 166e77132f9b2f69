//! cancelkit's fuzz checks.
//!
//! One function per fuzz target takes the fuzzer's bytes, drives one part of cancelkit with them
//! and panics if an invariant does not hold. The cargo-fuzz targets in `fuzz/fuzz_targets/` call
//! these functions and nothing else; the `replay` test of this crate runs every file of the
//! committed corpus `fuzz/corpus/<target>/` through the same functions, so `cargo test
//! --workspace` checks the corpus without the fuzzer installed. [`TARGETS`] lists them.
//!
//! Deliberate panics (a handler that panics on purpose) carry the [`panics::Expected`] payload
//! and are ignored; any other panic counts, including one inside a tokio task that the runtime
//! would otherwise swallow (see [`panics`]).

#![forbid(unsafe_code)]

pub mod framing;
pub mod panics;
pub mod peer;
pub mod rap;
pub mod schema;
pub mod seeds;
pub mod sse;
pub mod wire;

/// A fuzz target: its name (also the name of its corpus directory and of its cargo-fuzz target)
/// and its check.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// `fuzz/corpus/<name>/`, `cargo fuzz run <name>`.
    pub name: &'static str,
    /// Panics if the input breaks an invariant.
    pub check: fn(&[u8]),
}

/// Every fuzz target, in the order `cargo xtask fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "framing_lines",
        check: framing::lines,
    },
    Target {
        name: "framing_content_length",
        check: framing::content_length,
    },
    Target {
        name: "wire",
        check: wire::check,
    },
    Target {
        name: "peer_acp",
        check: peer::acp,
    },
    Target {
        name: "peer_mcp_2024_11_05",
        check: peer::mcp_2024_11_05,
    },
    Target {
        name: "peer_mcp_2025_11_25",
        check: peer::mcp_2025_11_25,
    },
    Target {
        name: "peer_lsp",
        check: peer::lsp,
    },
    Target {
        name: "rap",
        check: rap::check,
    },
    Target {
        name: "schema",
        check: schema::check,
    },
    Target {
        name: "sse",
        check: sse::check,
    },
];
