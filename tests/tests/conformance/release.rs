//! `@modelcontextprotocol/conformance` 0.1.16, the current release (npm's `latest`, what
//! `npx @modelcontextprotocol/conformance` runs). It knows the revisions up to 2025-11-25 only
//! (`--spec-version` takes 2025-03-26, 2025-06-18, 2025-11-25, `draft` and `extension`), and a
//! scenario named with `--scenario` runs one way whatever the version: its clients are the
//! TypeScript SDK's (1.32, which asks for 2025-11-25), and a client under test is not told a
//! version. So each scenario runs once, at 2025-11-25; 2026-07-28 is the prerelease's.

use crate::scenarios::{Release, Scenario, V2025};

pub(crate) const RELEASE: Release = Release {
    version: "0.1.16",
    cli: "node_modules/@modelcontextprotocol/conformance/dist/index.js",
    servers: SERVERS,
    clients: CLIENTS,
};

/// Every server scenario of the release that applies to a tools-only server.
///
/// Its other server scenarios do not apply, for the reasons the prerelease's table gives
/// (`prerelease.rs`):
/// - `logging-set-level`, `completion-complete`: the logging and completions capabilities;
/// - `tools-call-simple-text`, `-image`, `-audio`, `-embedded-resource`, `-mixed-content`,
///   `-with-logging`, `-error`, `-with-progress`, `-sampling`, `-elicitation`,
///   `json-schema-2020-12`, `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`: fixture
///   tools of the reference server;
/// - `server-sse-polling` (pending): the fixture tool `test_reconnection`. (Run against a
///   tools-only server anyway, its one check that passes is the priming event of the stream
///   that answers "unknown tool".)
/// - `resources-list`, `-read-text`, `-read-binary`, `-templates-read`, `-subscribe`,
///   `-unsubscribe`; `prompts-list`, `prompts-get-simple`, `-with-args`, `-embedded-resource`,
///   `-with-image`: resources and prompts.
///
/// The release has no `server-session-lifecycle` and no 2026-07-28 scenario.
const SERVERS: &[Scenario] = &[
    // initialize answers with server info, version and capabilities.
    Scenario {
        name: "server-initialize",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // ping answers {}.
    Scenario {
        name: "ping",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // tools/list: every tool has a name, a description and an input schema.
    Scenario {
        name: "tools-list",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // Three concurrent POSTs (tools/list) in a session the suite's SDK client opened at
    // 2025-11-25, each with `MCP-Protocol-Version: 2025-03-26` (not the negotiated one, which
    // is a SHOULD), each get their answer.
    Scenario {
        name: "server-sse-multiple-streams",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // A non-loopback Host gets 4xx, a loopback one is served.
    Scenario {
        name: "dns-rebinding-protection",
        revisions: &[V2025],
        not_applicable: &[],
    },
];

/// Every client scenario of the release the `conformance_client` example takes part in. The
/// release does not pass a version: the example negotiates (`server/discover` first, then
/// `initialize`).
///
/// Its other client scenarios do not apply: `auth/*` (19) and the auth extensions
/// (`auth/client-credentials-jwt`, `-basic`, `auth/cross-app-access-complete-flow`) are OAuth
/// 2.1, which `HttpClient` does not do (it sends the `Authorization` header it was given).
const CLIENTS: &[Scenario] = &[
    // initialize: the protocol version asked for and clientInfo (name, version).
    Scenario {
        name: "initialize",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // tools/list, then tools/call add_numbers with two numbers.
    Scenario {
        name: "tools_call",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // SEP-1034: an elicitation accepted with the requested schema's defaults.
    Scenario {
        name: "elicitation-sep1034-client-defaults",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // SEP-1699: a tools/call stream closed after its priming event is resumed with GET and
    // Last-Event-ID, after the event's retry (500 ms); the server answers initialize with
    // 2025-03-26.
    Scenario {
        name: "sse-retry",
        revisions: &[V2025],
        not_applicable: &[],
    },
];
