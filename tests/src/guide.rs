//! The README and every page of the guide (`docs/src`) as doctests, so that
//! `cargo test --workspace` (and with it `cargo xtask test`) compiles every Rust sample in them,
//! with this crate's dependencies: cancelkit with its features, rmcp, the ACP SDK, tokio, axum.
//! A sample that only shows a part of a program completes it with hidden `# ` lines, which
//! mdBook hides too. `tests/guide.rs` checks that every page is listed here.

/// `README.md`.
#[doc = include_str!("../../README.md")]
pub struct Readme;

/// `docs/src/beyond.md`.
#[doc = include_str!("../../docs/src/beyond.md")]
pub struct Beyond;

/// `docs/src/bindings.md`.
#[doc = include_str!("../../docs/src/bindings.md")]
pub struct Bindings;

/// `docs/src/cancellable.md`.
#[doc = include_str!("../../docs/src/cancellable.md")]
pub struct Cancellable;

/// `docs/src/cascade.md`.
#[doc = include_str!("../../docs/src/cascade.md")]
pub struct Cascade;

/// `docs/src/check-acp.md`.
#[doc = include_str!("../../docs/src/check-acp.md")]
pub struct CheckAcp;

/// `docs/src/check.md`.
#[doc = include_str!("../../docs/src/check.md")]
pub struct Check;

/// `docs/src/conformance.md`.
#[doc = include_str!("../../docs/src/conformance.md")]
pub struct Conformance;

/// `docs/src/fuzzing.md`.
#[doc = include_str!("../../docs/src/fuzzing.md")]
pub struct Fuzzing;

/// `docs/src/gateway-production.md`.
#[doc = include_str!("../../docs/src/gateway-production.md")]
pub struct GatewayProduction;

/// `docs/src/gateway.md`.
#[doc = include_str!("../../docs/src/gateway.md")]
pub struct Gateway;

/// `docs/src/http.md`.
#[doc = include_str!("../../docs/src/http.md")]
pub struct Http;

/// `docs/src/introduction.md`.
#[doc = include_str!("../../docs/src/introduction.md")]
pub struct Introduction;

/// `docs/src/layout.md`.
#[doc = include_str!("../../docs/src/layout.md")]
pub struct Layout;

/// `docs/src/mcp-server.md`.
#[doc = include_str!("../../docs/src/mcp-server.md")]
pub struct McpServer;

/// `docs/src/peer.md`.
#[doc = include_str!("../../docs/src/peer.md")]
pub struct Peer;

/// `docs/src/performance.md`.
#[doc = include_str!("../../docs/src/performance.md")]
pub struct Performance;

/// `docs/src/rap.md`.
#[doc = include_str!("../../docs/src/rap.md")]
pub struct Rap;

/// `docs/src/reliability.md`.
#[doc = include_str!("../../docs/src/reliability.md")]
pub struct Reliability;

/// `docs/src/side-by-side.md`.
#[doc = include_str!("../../docs/src/side-by-side.md")]
pub struct SideBySide;

/// `docs/src/survey.md`.
#[doc = include_str!("../../docs/src/survey.md")]
pub struct Survey;

/// `docs/src/trace.md`.
#[doc = include_str!("../../docs/src/trace.md")]
pub struct Trace;
