//! What runs: the two pinned releases of the suite, their CLIs and timeouts, and what a table of
//! scenarios and a known failure are. Each release's tables — every scenario that applies, and
//! why each other one does not — are in `release.rs` (npm's `latest`) and `prerelease.rs` (the
//! newest prerelease).

use std::time::Duration;

use crate::{prerelease, release};

/// The `--import` preload that gives Node 20 `fs.globSync` (copied next to `node_modules`);
/// both releases need it.
pub(crate) const SHIM: &str = "./conformance_shim.mjs";
/// How long one scenario may take, CLI start included.
pub(crate) const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);
/// How many CLI runs go at once for one target. Each run is ~1 s of Node start-up CPU, and
/// some wait on the network (timeouts, a retry delay) most of their time: three at a time keep
/// a 2-core machine busy while two targets are tested side by side.
pub(crate) const CONCURRENT_RUNS: usize = 3;

/// The stateful revision: `initialize`, `Mcp-Session-Id`.
pub(crate) const V2025: &str = "2025-11-25";
/// The stateless revision: `server/discover`, `_meta` on every request.
pub(crate) const V2026: &str = "2026-07-28";

/// One release of `@modelcontextprotocol/conformance`, installed side by side with the other
/// (tests/node/package.json; the prerelease under an npm alias).
pub(crate) struct Release {
    /// Its version, as pinned.
    pub(crate) version: &'static str,
    /// Its CLI, under the install directory.
    pub(crate) cli: &'static str,
    /// The server scenarios a tools-only server can pass.
    pub(crate) servers: &'static [Scenario],
    /// The client scenarios the `conformance_client` example takes part in.
    pub(crate) clients: &'static [Scenario],
}

/// Both releases, the current one (npm's `latest`) first.
pub(crate) const RELEASES: [&Release; 2] = [&release::RELEASE, &prerelease::PRERELEASE];

/// One scenario of a release that applies to what is tested.
pub(crate) struct Scenario {
    /// Its name in `conformance list`.
    pub(crate) name: &'static str,
    /// The revisions (`--spec-version`) it runs at.
    pub(crate) revisions: &'static [&'static str],
    /// Checks of it that need more than what is tested has (the check id, then why); not
    /// counted.
    pub(crate) not_applicable: &'static [(&'static str, &'static str)],
}

/// A check a target is known to fail, because of a bug of the target (not of the suite, and not
/// because the check does not apply). Strict: once the check passes, the test fails until the
/// entry is removed.
pub(crate) struct KnownFailure {
    /// The suite's version.
    pub(crate) release: &'static str,
    pub(crate) revision: &'static str,
    pub(crate) scenario: &'static str,
    /// The check id (every check with this id in the scenario).
    pub(crate) check: &'static str,
    /// What the target does wrong.
    pub(crate) bug: &'static str,
}

/// The gateway's `/mcp` (`gateway/src/front/mcp.rs`, on `McpHttpServer`).
pub(crate) const GATEWAY_BUGS: &[KnownFailure] = &[];
