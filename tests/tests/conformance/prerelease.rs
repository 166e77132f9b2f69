//! `@modelcontextprotocol/conformance` 0.2.0-alpha.12, the newest prerelease (installed under
//! the npm alias `conformance-next`): it knows 2026-07-28 and runs each scenario at the
//! revision given (`--spec-version`; a client learns it from `MCP_CONFORMANCE_PROTOCOL_VERSION`).

use crate::scenarios::{Release, Scenario, V2025, V2026};

pub(crate) const PRERELEASE: Release = Release {
    version: "0.2.0-alpha.12",
    cli: "node_modules/conformance-next/dist/index.js",
    servers: SERVERS,
    clients: CLIENTS,
};

/// Why the `server-stateless` checks that call a fixture tool do not apply.
const FIXTURE_TOOL: &str = "calls a fixture tool of the suite's reference server (test_*), which a \
                            tools-only server with echo/sleep/ask_client does not have";
/// Why the `caching` checks of prompts and resources do not apply.
const NO_PROMPTS_OR_RESOURCES: &str =
    "a tools-only server has no prompts or resources: the method is not found";

/// Every server scenario that applies to a server whose only feature is tools (`echo {text}`,
/// `sleep {seconds}`, `ask_client {timeout_ms}`), at the revisions it covers.
///
/// The release's other server scenarios do not apply:
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
const SERVERS: &[Scenario] = &[
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

/// Every client scenario the `conformance_client` example takes part in, at the revisions it
/// runs them (the newest legacy one and 2026-07-28, of those the scenario covers).
///
/// The release's other client scenarios do not apply:
/// - `auth/*` (27: metadata discovery, client registration (DCR, CIMD, pre-registration),
///   scopes and step-up, token endpoint authentication, resource and issuer checks, offline
///   access, authorization-server migration, the 2025-03-26 fallbacks) and the auth extensions
///   (`auth/client-credentials-jwt`, `-basic`, `auth/enterprise-managed-authorization`,
///   `auth/dpop`, `auth/dpop-nonce`, `auth/wif-jwt-bearer`): OAuth 2.1, which `HttpClient` does
///   not do — it sends the `Authorization` header it was given and nothing more.
/// - `sep-2640-client-no-prefetch`, `-verify-digest`, `-verify-size`, `-verify-frontmatter`: a
///   client of the skills extension, which cancelkit does not implement.
const CLIENTS: &[Scenario] = &[
    // initialize: the protocol version asked for and clientInfo (name, version).
    Scenario {
        name: "initialize",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // tools/list, then tools/call add_numbers with two numbers; the messages valid against the
    // revision's schema.
    Scenario {
        name: "tools_call",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // SEP-1034: an elicitation accepted with the requested schema's defaults (string,
    // integer, number, enum, boolean).
    Scenario {
        name: "elicitation-sep1034-client-defaults",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // SEP-1699: a tools/call stream closed after its priming event is resumed with GET and
    // Last-Event-ID, after the event's retry (500 ms).
    Scenario {
        name: "sse-retry",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // SEP-2575: MCP-Protocol-Version and _meta (version, capabilities, clientInfo) on every
    // request, matching; a -32022 that lists our version is answered by asking again.
    Scenario {
        name: "request-metadata",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-1613/2106: a 2020-12 input schema ($schema, $defs, composition, conditionals,
    // anchors) comes back unchanged when echoed.
    Scenario {
        name: "json-schema-2020-12-preservation",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // SEP-2106: a network-URI $ref in an input schema is never fetched.
    Scenario {
        name: "json-schema-ref-no-deref",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2322: an InputRequiredResult is fulfilled and retried with a new id, requestState
    // echoed exactly (and omitted when none came), nothing carried over to another call, no
    // resultType taken as complete.
    Scenario {
        name: "sep-2322-client-request-state",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2243: Mcp-Method on every POST, Mcp-Name on tools/call, resources/read, prompts/get.
    Scenario {
        name: "http-standard-headers",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2243: x-mcp-header arguments mirrored into Mcp-Param-* (Base64 where unsafe, none
    // for null).
    Scenario {
        name: "http-custom-headers",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2243: tools whose x-mcp-header breaks a rule (empty, not a token, duplicate, on a
    // non-primitive or a number) are left out of tools/list; the valid one is called.
    Scenario {
        name: "http-invalid-tool-headers",
        revisions: &[V2026],
        not_applicable: &[],
    },
];
