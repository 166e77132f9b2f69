//! What runs: the CLI's paths and timeout, every scenario a tools-only server can pass (and why
//! the others do not apply), and the targets' known failures.

use std::time::Duration;

/// The CLI's entry point, under the installed `node_modules`.
pub(crate) const CLI: &str = "node_modules/@modelcontextprotocol/conformance/dist/index.js";
/// The `--import` preload that gives Node 20 `fs.globSync` (copied next to `node_modules`).
pub(crate) const SHIM: &str = "./conformance_shim.mjs";
/// How long one scenario may take, CLI start included.
pub(crate) const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// The stateful revision: `initialize`, `Mcp-Session-Id`.
const V2025: &str = "2025-11-25";
/// The stateless revision: `server/discover`, `_meta` on every request.
const V2026: &str = "2026-07-28";

/// One server scenario of the suite that a tools-only server can pass.
pub(crate) struct Scenario {
    /// Its name in `conformance list --server`.
    pub(crate) name: &'static str,
    /// The revisions (`--spec-version`) it runs at.
    pub(crate) revisions: &'static [&'static str],
    /// Checks of it that need more than tools (the check id, then why); not counted.
    pub(crate) not_applicable: &'static [(&'static str, &'static str)],
}

/// Why the `server-stateless` checks that call a fixture tool do not apply.
const FIXTURE_TOOL: &str = "calls a fixture tool of the suite's reference server (test_*), which a \
                            tools-only server with echo/sleep/ask_client does not have";
/// Why the `caching` checks of prompts and resources do not apply.
const NO_PROMPTS_OR_RESOURCES: &str =
    "a tools-only server has no prompts or resources: the method is not found";

/// Every scenario that applies to a server whose only feature is tools (`echo {text}`,
/// `sleep {seconds}`, `ask_client {timeout_ms}`), at the revisions it covers.
///
/// The suite's other server scenarios (0.2.0-alpha.12) do not apply:
/// - `logging-set-level`: `logging/setLevel` needs the logging capability;
///   `completion-complete`: the completions capability and a prompt `test_prompt_with_arguments`.
/// - `tools-call-simple-text`, `-image`, `-audio`, `-embedded-resource`, `-mixed-content`,
///   `-with-logging`, `-error`, `-with-progress`, `-sampling`, `-elicitation`: each calls a fixture
///   tool (`test_simple_text`, `test_image_content`, ...) of the reference server.
/// - `json-schema-2020-12`: a tool `json_schema_2020_12_tool` with a 2020-12 input schema.
/// - `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`: fixture tools that elicit.
/// - `server-sse-polling` (pending in the suite): a tool `test_reconnection` that closes its
///   stream mid-call so the client resumes with `Last-Event-ID`.
/// - `resources-list`, `resources-read-text`, `resources-read-binary`,
///   `resources-templates-read`, `resources-subscribe`, `resources-unsubscribe`,
///   `sep-2164-resource-not-found`: resources; `prompts-list`, `prompts-get-simple`,
///   `prompts-get-with-args`, `prompts-get-embedded-resource`, `prompts-get-with-image`: prompts.
/// - `sep-2640-skills-directory`, `-enumeration`, `-manifest`: the skills extension (resources).
/// - `tasks-*` (ten, the `io.modelcontextprotocol/tasks` extension): fixture tools
///   (`slow_compute`, `greet`, `failing_job`, `confirm_delete`, ...); `tasks-status-notifications`
///   is a placeholder that only reports SKIPPED in this release.
/// - `input-required-result-*` except `-unsupported-methods`: fixture tools and a prompt
///   (`test_input_required_result_*`) that answer with an InputRequiredResult. (Three of them,
///   `-missing-input-response`, `-ignore-extra-params` and `-validate-input`, report no failure
///   against a server without those tools, only because they never reach what they test.)
/// - `http-custom-header-server-validation`: a tool whose input schema annotates a string
///   parameter with `x-mcp-header`.
pub(crate) const SCENARIOS: &[Scenario] = &[
    // initialize answers with server info, version and capabilities; the session id is
    // visible ASCII.
    Scenario {
        name: "server-initialize",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // DELETE with the session id ends the session; the id then gets 404.
    Scenario {
        name: "server-session-lifecycle",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // ping answers {}.
    Scenario {
        name: "ping",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // tools/list: every tool has a name (SEP-986 format), a description and an input schema;
    // at 2026-07-28 the order is the same on every call.
    Scenario {
        name: "tools-list",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // Three concurrent POSTs (tools/list) on one session each get their answer (SSE or JSON).
    Scenario {
        name: "server-sse-multiple-streams",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // A non-loopback Host/Origin gets 4xx, a loopback one is served.
    Scenario {
        name: "dns-rebinding-protection",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // SEP-2575: _meta validation (-32602 and 400), server/discover, UnsupportedProtocolVersion
    // (400), HeaderMismatch -32020 (400), removed and unknown methods (404 and -32601), error ids.
    Scenario {
        name: "server-stateless",
        revisions: &[V2026],
        not_applicable: &[
            // tools/call test_missing_capability (needs the client's sampling capability)
            (
                "sep-2575-server-rejects-undeclared-capability",
                FIXTURE_TOOL,
            ),
            ("sep-2575-missing-capability-http-400", FIXTURE_TOOL),
            // tools/call test_streaming_elicitation
            (
                "sep-2575-http-server-no-independent-requests-on-stream",
                FIXTURE_TOOL,
            ),
            // tools/call test_logging_tool
            ("sep-2575-server-no-log-without-loglevel", FIXTURE_TOOL),
        ],
    },
    // SEP-2549: tools/list carries ttlMs (an integer >= 0) and cacheScope (public/private).
    Scenario {
        name: "caching",
        revisions: &[V2026],
        not_applicable: &[
            (
                "sep-2549-prompts-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-templates-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-read-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
        ],
    },
    // SEP-2243: Mcp-Method / Mcp-Name that are missing or disagree with the body get 400
    // (HeaderMismatch -32020 is a SHOULD); header names are case-insensitive, values are not,
    // whitespace around a value is trimmed. Uses the first listed tool.
    Scenario {
        name: "http-header-validation",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2322: tools/list and prompts/list never answer with an InputRequiredResult.
    Scenario {
        name: "input-required-result-unsupported-methods",
        revisions: &[V2026],
        not_applicable: &[],
    },
];

/// A check a target is known to fail, because of a bug of the target (not of the suite, and not
/// because the check does not apply). Strict: once the check passes, the test fails until the
/// entry is removed.
pub(crate) struct KnownFailure {
    pub(crate) revision: &'static str,
    pub(crate) scenario: &'static str,
    /// The check id (every check with this id in the scenario).
    pub(crate) check: &'static str,
    /// What the target does wrong.
    pub(crate) bug: &'static str,
}

/// The gateway's `/mcp` at 2026-07-28 (`gateway/src/front/mcp.rs`, on `McpHttpServer`).
pub(crate) const GATEWAY_BUGS: &[KnownFailure] = &[];
