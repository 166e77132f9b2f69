//! The hostile gateway: a small body limit, and alice's run in flight that bob attacks; every
//! answer kept and checked for leaks at the end.

use std::time::Duration;

use serde_json::json;

use crate::support::http::{
    Reply, SLEEP_CANCELLED, echo_call, raw, raw_status, rpc, run_id_of, sleep_call, spawn_rpc,
    status, until_stderr,
};
use crate::support::{Gateway, Options, client, config};

/// `[limits] max_body_bytes` of the hostile gateway.
pub const LIMIT: usize = 8192;

/// A gateway with a small body limit, where alice has a run in flight that bob attacks.
pub struct Target {
    pub gateway: Gateway,
    pub victim_run: String,
    pub victim_call: tokio::task::JoinHandle<Reply>,
    pub seen: Vec<(String, u16, String)>,
}

impl Target {
    pub async fn start() -> Target {
        let gateway = Gateway::with(Options {
            config: config(&format!("[limits]\nmax_body_bytes = {LIMIT}\n")),
            ..Options::default()
        });
        let victim_call = spawn_rpc(&gateway, "alice", sleep_call(json!("victim-7"), 30.0));
        until_stderr(&gateway, "started tools/call sleep").await;
        let victim_run = run_id_of(&gateway, "alice", "victim-7").await;
        Target {
            gateway,
            victim_run,
            victim_call,
            seen: Vec::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.gateway.url(path)
    }

    /// Sends a request; asserts it is not answered 5xx; keeps the answer for the leak check.
    pub async fn send(&mut self, label: &str, request: reqwest::RequestBuilder) -> Reply {
        let reply = Reply::read(
            request
                .send()
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}")),
        )
        .await;
        assert!(
            reply.status < 500,
            "{label}: {} {}",
            reply.status,
            reply.text
        );
        self.seen
            .push((label.to_owned(), reply.status, reply.text.clone()));
        reply
    }

    /// Sends raw bytes; asserts an HTTP answer that is not 5xx.
    pub async fn send_raw(&mut self, label: &str, request: String) -> u16 {
        let response = raw(&self.gateway, request.as_bytes(), Duration::from_secs(3)).await;
        let code = raw_status(&response);
        assert!((100..500).contains(&code), "{label}: {response}");
        self.seen.push((label.to_owned(), code, response));
        code
    }

    /// Nothing bob saw names alice or her run; her run is untouched; the gateway still serves.
    pub async fn finish(mut self) {
        for (label, code, text) in &self.seen {
            for secret in [
                self.victim_run.as_str(),
                "alice",
                "victim-7",
                "registered_at",
            ] {
                assert!(
                    !text.contains(secret),
                    "{label} ({code}) reveals `{secret}`: {text}"
                );
            }
        }
        let s = status(&self.gateway, "alice", &self.victim_run).await;
        assert_eq!(s.body["state"], "running", "{}", s.text);
        assert_eq!(self.gateway.count_stderr(SLEEP_CANCELLED), 0);
        assert!(!self.victim_call.is_finished());
        let echo = rpc(&self.gateway, "bob", &echo_call(json!(1), "still here")).await;
        assert_eq!(echo.status, 200);
        assert_eq!(
            echo.body["result"]["content"][0]["text"], "still here",
            "{}",
            echo.text
        );
        let health = client().get(self.url("/health")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        assert!(self.gateway.is_alive(), "the gateway process exited");
        let stderr = self.gateway.stderr();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
