//! The upstream under test behind the gateway: the demo upstream on stdio, or rmcp's
//! Streamable HTTP server with the demo's tools, its log and its check of each stop; the tools
//! the scenarios call on it (third-party upstreams are in `third_party.rs`).

use serde_json::{Value, json};

use super::scenarios::Era;
use super::selector;
use crate::support::rmcp_server::{Ended, Server};
use crate::support::{Gateway, rmcp_server};

/// The line the demo upstream writes on stderr when a `sleep` is cancelled (an upstream under
/// test writes the same, see [`UpstreamUnderTest`]).
pub const STOP_LINE: &str = "demo-upstream: cancelled tools/call sleep (request id ";

/// The tools of an upstream under test that the scenarios call, by the names the gateway
/// exposes (`<upstream>-<tool>`), with their arguments and what they answer.
pub struct Tools {
    /// The slow tool: runs long unless stopped, reporting progress at least every 200 ms.
    pub slow: String,
    /// Its arguments for a slow call.
    pub slow_args: Value,
    /// Its arguments for a short call with progress.
    pub progress_args: Value,
    /// The `total` of that short call's progress.
    pub progress_total: f64,
    /// The text of that short call's result.
    pub progress_text: String,
    /// The fast tool.
    pub fast: String,
    /// Its arguments: strings with `{text}` have the text of each call there.
    pub fast_args: Value,
    /// The text of the fast tool's result for a text.
    pub fast_text: fn(&str) -> String,
    /// How long a slow call runs upstream when nothing stops it, in ms, if the scripts are to
    /// wait that long (after their API-cancelled call) for a late message of a cancelled call;
    /// 0 when the upstream's own log shows its stops.
    pub settle_ms: u64,
    /// How many slow calls the scripts' abort burst makes.
    pub burst: u64,
}

impl Tools {
    /// The demo upstream's: `demo-sleep {seconds}` and `demo-echo {text}`.
    pub fn demo() -> Tools {
        Tools {
            slow: "demo-sleep".into(),
            slow_args: json!({"seconds": 30}),
            progress_args: json!({"seconds": 0.5}),
            progress_total: 0.5,
            progress_text: "slept 500ms".into(),
            fast: "demo-echo".into(),
            fast_args: json!({"text": "{text}"}),
            fast_text: str::to_owned,
            settle_ms: 0,
            burst: 60,
        }
    }

    /// The client scripts' TOOLS argument (see tests/python/gateway_client.py), with how long
    /// they stay in a session for the SDK's resumes ([`super::resumes::RESUME_WAIT_MS`]).
    pub fn script_arg(&self) -> String {
        json!({
            "slow": {"name": self.slow, "args": self.slow_args},
            "progress": {"name": self.slow, "args": self.progress_args},
            "fast": {"name": self.fast, "args": self.fast_args},
            "settleMs": self.settle_ms,
            "burst": self.burst,
            "resumeWaitMs": super::resumes::RESUME_WAIT_MS,
        })
        .to_string()
    }
}

/// The upstream behind the gateway in an SDK test: named [`UpstreamUnderTest::name`] in the
/// gateway's config, serving [`UpstreamUnderTest::tools`], and telling (its log, or what it
/// received) when a slow call is stopped. The demo upstreams serve the demo upstream's tools
/// (`demo-echo` and `demo-sleep`, `sleep` reporting progress every 100 ms), and log
/// [`STOP_LINE`] when a `sleep` is cancelled.
pub trait UpstreamUnderTest: Send + Sync {
    /// For failure messages: which kind of upstream this is.
    fn kind(&self) -> &'static str;
    /// The `[[upstream]]` tables of the gateway's config.
    fn config(&self) -> String;
    /// Everything the upstream logged so far.
    fn log(&self, gateway: &Gateway) -> String;

    /// Its name in the gateway's config: the prefix of its tools.
    fn name(&self) -> &'static str {
        "demo"
    }

    /// The tools the scenarios call.
    fn tools(&self) -> Tools {
        Tools::demo()
    }

    /// How many slow calls the upstream reported stopped by a cancel (where it cannot report
    /// it, how many cancels it received; [`UpstreamUnderTest::check_stops`] then checks that
    /// it acted on them).
    fn stops(&self, gateway: &Gateway) -> usize {
        self.log(gateway).matches(STOP_LINE).count()
    }

    /// What the upstream showed of its stops, one line each, for the test's printed report.
    fn stops_seen(&self, gateway: &Gateway) -> Vec<String> {
        self.log(gateway)
            .lines()
            .filter(|l| l.contains(STOP_LINE))
            .map(str::to_owned)
            .collect()
    }

    /// Whether the gateway reaches the upstream as it starts (and logs "upstream ready"), rather
    /// than at its first use.
    fn connects_at_start(&self) -> bool {
        true
    }

    /// How many slow calls are running upstream now, when the upstream can tell.
    fn sleeps_running(&self) -> Option<usize> {
        None
    }

    /// Once the client is done: asserts that every stop reached the upstream the way the
    /// gateway's connector should cancel (nothing to check where the upstream cannot tell).
    fn check_stops(&self, _gateway: &Gateway) {}
}

/// Which demo upstream: on stdio ([`StdioDemo`]) or over Streamable HTTP ([`HttpDemo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demo {
    /// [`StdioDemo`].
    Stdio,
    /// [`HttpDemo`] speaking up to this revision.
    Http(Era),
}

impl Demo {
    /// A fresh upstream under test of this kind (an HTTP server is started).
    pub async fn start(self) -> Box<dyn UpstreamUnderTest> {
        match self {
            Demo::Stdio => Box::new(StdioDemo),
            Demo::Http(era) => Box::new(HttpDemo::start(era).await),
        }
    }
}

/// The demo upstream on stdio (the gateway's own `demo-upstream` subcommand); its stderr is
/// the gateway's.
pub struct StdioDemo;

impl UpstreamUnderTest for StdioDemo {
    fn kind(&self) -> &'static str {
        "stdio demo upstream"
    }

    fn config(&self) -> String {
        "[[upstream]]\nname = \"demo\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n".into()
    }

    fn log(&self, gateway: &Gateway) -> String {
        gateway.stderr()
    }

    fn stops_seen(&self, gateway: &Gateway) -> Vec<String> {
        super::plain(&self.log(gateway))
            .lines()
            .filter(|l| l.contains(STOP_LINE))
            .map(str::to_owned)
            .collect()
    }
}

/// The demo upstream over Streamable HTTP: rmcp's server in the test process on 127.0.0.1
/// ([`Server::demo`]: `echo`, and `sleep` with the demo's progress and answer), its tap
/// recording what the gateway sent it. Its log is rendered from what the tools did, a cancelled
/// `sleep` as [`STOP_LINE`] with rmcp's request id, as the demo upstream logs it.
pub struct HttpDemo {
    server: Server,
    era: Era,
}

impl HttpDemo {
    /// Starts the server. At [`Era::V2026`] it speaks every revision rmcp knows, so the
    /// gateway's connector speaks 2026-07-28 to it (no session; a call is cancelled by closing
    /// its response stream); at [`Era::V2025`] it speaks only up to 2025-11-25, so the connector
    /// falls back to `initialize` (a session; a call is cancelled by POSTing
    /// `notifications/cancelled` with the connector's own id for it).
    pub async fn start(era: Era) -> HttpDemo {
        let server = Server::demo(match era {
            Era::V2026 => rmcp_server::Era::Both,
            Era::V2025 => rmcp_server::Era::Legacy,
        })
        .await;
        HttpDemo { server, era }
    }

    /// The upstream's `sleep` entries that ended cancelled, in order.
    fn stopped(&self) -> Vec<Value> {
        self.server
            .log
            .all()
            .into_iter()
            .filter(|e| e["event"] == "cancelled")
            .collect()
    }
}

impl UpstreamUnderTest for HttpDemo {
    fn connects_at_start(&self) -> bool {
        false
    }

    fn kind(&self) -> &'static str {
        match self.era {
            Era::V2026 => "Streamable HTTP demo upstream (rmcp at 2026-07-28)",
            Era::V2025 => "Streamable HTTP demo upstream (rmcp at 2025-11-25)",
        }
    }

    fn config(&self) -> String {
        format!(
            "[[upstream]]\nname = \"demo\"\nurl = \"{}\"\n",
            self.server.url
        )
    }

    fn log(&self, _gateway: &Gateway) -> String {
        let mut log = String::new();
        for entry in self.server.log.all() {
            let id = selector(&entry["id"]);
            let line = match entry["event"].as_str() {
                Some("started") => {
                    format!("demo-upstream: started tools/call sleep (request id {id})")
                }
                Some("finished") => {
                    format!("demo-upstream: finished tools/call sleep (request id {id})")
                }
                Some("cancelled") => format!(
                    "{STOP_LINE}{id}) after {}ms: {}",
                    entry["after_ms"],
                    if entry["how"] == "token" {
                        "its cancellation token fired"
                    } else {
                        "its future was dropped"
                    }
                ),
                _ => format!("demo-upstream: {entry}"),
            };
            log.push_str(&line);
            log.push('\n');
        }
        log
    }

    fn sleeps_running(&self) -> Option<usize> {
        let log = self.server.log.all();
        let count = |event: &str| log.iter().filter(|e| e["event"] == event).count();
        Some(count("started") - count("finished") - count("cancelled"))
    }

    fn check_stops(&self, gateway: &Gateway) {
        let tap = &self.server.tap;
        let posts = tap.posts();
        let stopped = self.stopped();
        let context = || {
            let posts: Vec<String> = posts
                .iter()
                .map(|p| format!("{} session={:?} ended={:?}", p.body, p.session, p.ended))
                .collect();
            format!(
                "the {}'s log:\n{}\nwhat it received:\n{}",
                self.kind(),
                self.log(gateway),
                posts.join("\n")
            )
        };
        // The client abort and the API cancel, at least (then the burst's, if any ran).
        assert!(stopped.len() >= 2, "{}", context());
        let notices: Vec<_> = posts
            .iter()
            .filter(|p| p.body["method"] == "notifications/cancelled")
            .collect();
        for stop in &stopped {
            let id = &stop["id"];
            let call = tap
                .request(id)
                .unwrap_or_else(|| panic!("no POST of request {id}\n{}", context()));
            assert_eq!(call.body["method"], "tools/call", "{}", context());
            match self.era {
                Era::V2025 => {
                    // notifications/cancelled with the id the connector gave the call upstream,
                    // on the call's session (twice when the call was cancelled before rmcp
                    // answered its POST: the first may have overtaken it); rmcp stopped the
                    // tool on it.
                    assert!(call.session.is_some(), "{}", context());
                    let named: Vec<_> = notices
                        .iter()
                        .filter(|n| n.body["params"]["requestId"] == *id)
                        .collect();
                    assert!(
                        (1..=2).contains(&named.len()),
                        "cancels for {id}\n{}",
                        context()
                    );
                    for notice in named {
                        assert_eq!(notice.session, call.session, "{}", context());
                    }
                    assert_eq!(stop["how"], "token", "{}", context());
                }
                Era::V2026 => {
                    // No session; the connector closed the call's response stream.
                    assert_eq!(call.session, None, "{}", context());
                    assert_eq!(
                        call.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                        "2026-07-28",
                        "{}",
                        context()
                    );
                    assert_eq!(call.ended, Some(Ended::Closed), "{}", context());
                }
            }
        }
        match self.era {
            Era::V2025 => {
                assert_eq!(tap.count("initialize"), 1, "{}", context());
                // Each names its cause, the gist only (not the caller's own words).
                let reason = |stop: &Value| {
                    notices
                        .iter()
                        .find(|n| n.body["params"]["requestId"] == stop["id"])
                        .map(|n| n.body["params"]["reason"].clone())
                        .expect("checked above")
                };
                assert_eq!(
                    reason(&stopped[0]),
                    "cancelled by the peer",
                    "{}",
                    context()
                );
                assert_eq!(
                    reason(&stopped[1]),
                    "cancelled through the API",
                    "{}",
                    context()
                );
            }
            Era::V2026 => {
                // At 2026-07-28 the closed stream is the cancel: nothing is POSTed for it.
                assert_eq!(notices.len(), 0, "{}", context());
                assert_eq!(tap.count("initialize"), 0, "{}", context());
            }
        }
    }
}
