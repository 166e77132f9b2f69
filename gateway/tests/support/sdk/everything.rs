//! server-everything behind the gateway (see `third_party.rs`): its wire recorded, on stdio by a
//! `tee` of each direction, over Streamable HTTP by a [`WireTap`].

use std::path::PathBuf;

use cancelkit_tests::http_peer::HttpPeer;
use serde_json::{Value, json};

use super::third_party::THIRD_PARTY_BURST;
use super::upstream::{Tools, UpstreamUnderTest};
use super::wire_tap::WireTap;
use crate::support::Gateway;

/// The slow call's length upstream, in seconds, when nothing stops it: short, so that the
/// scripts wait past its natural end (the [`Tools::settle_ms`]) and a result it was not meant to
/// send would show.
const EVERYTHING_SLOW_S: u64 = 2;

/// server-everything behind the gateway, named `everything`, with a record of what crossed the
/// wire between them.
pub struct Everything {
    wire: EverythingWire,
}

enum EverythingWire {
    /// `sh -c 'tee IN | node server-everything stdio | tee OUT'`: each direction in a file.
    Stdio {
        dir: tempfile::TempDir,
        index: PathBuf,
    },
    /// Its Streamable HTTP endpoint behind a recording proxy.
    Http { tap: WireTap },
}

/// A message between the gateway and the upstream, with the session it went in (HTTP).
struct Sent {
    message: Value,
    session: Option<String>,
}

impl Everything {
    /// On stdio, started by the gateway through two `tee`s.
    pub fn stdio() -> Everything {
        Everything {
            wire: EverythingWire::Stdio {
                dir: tempfile::tempdir().expect("tempdir"),
                index: cancelkit_tests::node::server_everything(),
            },
        }
    }

    /// Over Streamable HTTP: `server`, behind a proxy of this upstream's own.
    pub async fn http(server: &HttpPeer) -> Everything {
        Everything {
            wire: EverythingWire::Http {
                tap: WireTap::start(server.url()).await,
            },
        }
    }

    /// What the gateway sent the server, in order.
    fn sent(&self) -> Vec<Sent> {
        match &self.wire {
            EverythingWire::Stdio { dir, .. } => lines(&dir.path().join("in.jsonl"))
                .into_iter()
                .map(|message| Sent {
                    message,
                    session: None,
                })
                .collect(),
            EverythingWire::Http { tap } => tap
                .exchanges()
                .into_iter()
                .filter(|e| e.method == "POST")
                .map(|e| Sent {
                    message: e.request,
                    session: e.session,
                })
                .collect(),
        }
    }

    /// What the server sent the gateway (on any stream), in order per stream.
    fn received(&self) -> Vec<Value> {
        match &self.wire {
            EverythingWire::Stdio { dir, .. } => lines(&dir.path().join("out.jsonl")),
            EverythingWire::Http { tap } => tap
                .exchanges()
                .iter()
                .flat_map(super::wire_tap::Exchange::messages)
                .collect(),
        }
    }

    /// The slow calls the gateway sent, in order.
    fn slow_calls(&self, sent: &[Sent]) -> Vec<Value> {
        let args = self.tools().slow_args;
        sent.iter()
            .map(|s| &s.message)
            .filter(|m| m["method"] == "tools/call" && m["params"]["arguments"] == args)
            .cloned()
            .collect()
    }

    /// The `notifications/cancelled` the gateway sent naming `call`.
    fn cancels_of<'a>(call: &Value, sent: &'a [Sent]) -> Vec<&'a Sent> {
        sent.iter()
            .filter(|s| {
                s.message["method"] == "notifications/cancelled"
                    && s.message["params"]["requestId"] == call["id"]
            })
            .collect()
    }
}

/// The JSON lines of a file (others left out).
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Whether `message` is a response to `id`.
fn answers(message: &Value, id: &Value) -> bool {
    message.get("method").is_none() && message["id"] == *id
}

impl UpstreamUnderTest for Everything {
    fn kind(&self) -> &'static str {
        match self.wire {
            EverythingWire::Stdio { .. } => "server-everything on stdio",
            EverythingWire::Http { .. } => "server-everything over Streamable HTTP (2025-11-25)",
        }
    }

    fn name(&self) -> &'static str {
        "everything"
    }

    fn config(&self) -> String {
        match &self.wire {
            EverythingWire::Stdio { dir, index } => {
                let pipeline = format!(
                    "tee -a '{}' | node '{}' stdio | tee -a '{}'",
                    dir.path().join("in.jsonl").display(),
                    index.display(),
                    dir.path().join("out.jsonl").display()
                );
                format!(
                    "[[upstream]]\nname = \"everything\"\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
                    toml_string(&pipeline)
                )
            }
            EverythingWire::Http { tap } => {
                format!(
                    "[[upstream]]\nname = \"everything\"\nurl = \"{}\"\n",
                    tap.url
                )
            }
        }
    }

    fn connects_at_start(&self) -> bool {
        matches!(self.wire, EverythingWire::Stdio { .. })
    }

    fn tools(&self) -> Tools {
        Tools {
            slow: "everything-trigger-long-running-operation".into(),
            // Progress every 100 ms.
            slow_args: json!({"duration": EVERYTHING_SLOW_S, "steps": EVERYTHING_SLOW_S * 10}),
            progress_args: json!({"duration": 0.5, "steps": 5}),
            progress_total: 5.0,
            progress_text: "Long running operation completed. Duration: 0.5 seconds, Steps: 5."
                .into(),
            fast: "everything-echo".into(),
            fast_args: json!({"message": "{text}"}),
            fast_text: |text| format!("Echo: {text}"),
            settle_ms: EVERYTHING_SLOW_S * 1000 + 500,
            burst: THIRD_PARTY_BURST,
        }
    }

    fn log(&self, _gateway: &Gateway) -> String {
        let mut log = String::from("what the gateway sent it:\n");
        for sent in self.sent() {
            log.push_str(&format!(
                "  {} (session {:?})\n",
                sent.message, sent.session
            ));
        }
        log.push_str("what it sent the gateway:\n");
        for message in self.received() {
            log.push_str(&format!("  {message}\n"));
        }
        log
    }

    /// The slow calls the server was sent a cancel for (it cannot tell more itself).
    fn stops(&self, _gateway: &Gateway) -> usize {
        let sent = self.sent();
        self.slow_calls(&sent)
            .iter()
            .filter(|call| !Everything::cancels_of(call, &sent).is_empty())
            .count()
    }

    fn stops_seen(&self, _gateway: &Gateway) -> Vec<String> {
        let sent = self.sent();
        let received = self.received();
        let calls = self.slow_calls(&sent);
        let mut seen: Vec<String> = calls
            .iter()
            .take(2)
            .map(|call| {
                let token = &call["params"]["_meta"]["progressToken"];
                let progress = received
                    .iter()
                    .filter(|m| {
                        m["method"] == "notifications/progress"
                            && m["params"]["progressToken"] == *token
                    })
                    .count();
                let reasons: Vec<&Value> = Everything::cancels_of(call, &sent)
                    .iter()
                    .map(|s| &s.message["params"]["reason"])
                    .collect();
                format!(
                    "tools/call {}: notifications/cancelled {reasons:?} received; its result \
                     never sent (past its {EVERYTHING_SLOW_S} s); {progress} progress \
                     notifications for it crossed the wire from it",
                    call["id"]
                )
            })
            .collect();
        seen.push(format!(
            "{} slow calls reached it in all, every one followed by notifications/cancelled",
            calls.len()
        ));
        seen
    }

    fn check_stops(&self, gateway: &Gateway) {
        let sent = self.sent();
        let received = self.received();
        let calls = self.slow_calls(&sent);
        let context = || format!("the {}:\n{}", self.kind(), self.log(gateway));
        // The client abort and the API cancel, then the burst's that reached it.
        assert!(calls.len() >= 2, "{}", context());
        for call in &calls {
            let cancels = Everything::cancels_of(call, &sent);
            // Twice when the call was cancelled before the server answered its POST.
            assert!(
                (1..=2).contains(&cancels.len()),
                "cancels of {}\n{}",
                call["id"],
                context()
            );
        }
        // The short call with progress was answered (so an answer would show here)...
        let progress_args = self.tools().progress_args;
        let answered = sent
            .iter()
            .map(|s| &s.message)
            .find(|m| m["method"] == "tools/call" && m["params"]["arguments"] == progress_args)
            .expect("the progress call reached it");
        assert!(
            received.iter().any(|m| answers(m, &answered["id"])),
            "{}",
            context()
        );
        // ...the cancelled ones never were, past their natural end: the server dropped them.
        for (call, reason) in calls
            .iter()
            .zip(["cancelled by the peer", "cancelled through the API"])
        {
            assert!(
                !received.iter().any(|m| answers(m, &call["id"])),
                "a result for the cancelled {}\n{}",
                call["id"],
                context()
            );
            let cancels = Everything::cancels_of(call, &sent);
            assert_eq!(
                cancels[0].message["params"]["reason"],
                reason,
                "{}",
                context()
            );
            if let EverythingWire::Http { tap } = &self.wire {
                // In the call's session (a 2025-11-25 session: one initialize).
                let session = &sent
                    .iter()
                    .find(|s| s.message == *call)
                    .expect("sent")
                    .session;
                assert!(session.is_some(), "{}", context());
                assert!(
                    cancels.iter().all(|c| c.session == *session),
                    "{}",
                    context()
                );
                let initializes = tap
                    .exchanges()
                    .iter()
                    .filter(|e| e.request["method"] == "initialize")
                    .count();
                assert_eq!(initializes, 1, "{}", context());
            }
        }
    }
}

/// A TOML basic string (a JSON string is one: the same quotes and escapes).
fn toml_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}
