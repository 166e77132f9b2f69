//! The stacks in front of the one upstream, each started and reduced to what the load
//! generator needs: where to call, the tool names, the sessions of its clients, and which
//! process to charge CPU to.

use std::time::Duration;

use cancelkit_gateway::auth::Verifier;
use serde_json::json;

use super::client::{self, Endpoint, Session};
use super::contextforge::ContextForge;
use super::proxy::Proxy;
use super::upstream::Upstream;
use crate::gateway_bench::{SECRET, Worker};

/// Which stack a [`Target`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The load generator calls the upstream itself.
    Direct,
    /// Through the bare pass-through proxy.
    Proxy,
    /// Through cancelkit's gateway.
    Gateway,
    /// Through IBM ContextForge.
    ContextForge,
}

/// A stack as the load generator sees it.
pub struct Target {
    /// Which stack.
    pub kind: Kind,
    /// Its name in the tables.
    pub name: String,
    /// Its MCP endpoint and token.
    pub endpoint: Endpoint,
    /// Its base URL (for `/rpc` and `/cancellation/cancel`), if it has those.
    pub base: Option<String>,
    /// Its names for the upstream's `echo` and `sleep`.
    pub echo: String,
    /// See `echo`.
    pub sleep: String,
    /// The process in the middle, whose CPU is counted (none for direct).
    pub pid: Option<u32>,
    /// The clients' sessions, one per client (as many as the largest concurrency).
    pub sessions: Vec<Session>,
    /// Its keep-alive pool.
    pub http: reqwest::Client,
}

/// What keeps a stack running (its processes): dropped at the end, which kills them.
pub type Running = Box<dyn std::any::Any + Send>;

/// The gateway's configuration with `url` as its one Streamable HTTP upstream, `up`. Every
/// client is the one subject `admin` on 127.0.0.1, so the run bounds and per-user shares are
/// raised (the sessions' share to the gateway-wide bound) along with the per-address connection
/// cap, and `admin` is granted what an admin has (no subject is one by name alone).
fn gateway_config(url: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\n\
         [limits]\nmax_runs = 20000\nmax_runs_per_user = 20000\nmax_upstream_calls = 20000\n\
         max_upstream_calls_per_user = 20000\nmax_sessions_per_user = 10000\n\
         [connections]\nmax_connections_per_ip = 4096\n\
         [auth.permissions]\nadmin = [\"admin.system_config\", \"tools.execute\"]\n\
         [[upstream]]\nname = \"up\"\nurl = \"{url}\"\n"
    )
}

impl Target {
    async fn open(
        kind: Kind,
        name: String,
        endpoint: Endpoint,
        base: Option<String>,
        tools: (&str, &str),
        pid: Option<u32>,
        clients: usize,
    ) -> Result<Target, String> {
        let http = client::http_client();
        let mut sessions = Vec::with_capacity(clients);
        for _ in 0..clients {
            sessions.push(Session::open(&http, &endpoint).await?);
        }
        let listed = sessions[0].tool_names().await?;
        for tool in [tools.0, tools.1] {
            if !listed.iter().any(|t| t == tool) {
                return Err(format!("{name} does not list `{tool}`: {listed:?}"));
            }
        }
        Ok(Target {
            kind,
            name,
            endpoint,
            base,
            echo: tools.0.to_owned(),
            sleep: tools.1.to_owned(),
            pid,
            sessions,
            http,
        })
    }

    /// One echo call on the session of client `client`; panics on a wrong answer.
    pub async fn echo(&self, client: usize, id: u64) {
        let answer = self.sessions[client]
            .call(id, &self.echo, json!({"text": "x"}))
            .await
            .unwrap_or_else(|e| panic!("{}: echo failed: {e}", self.name));
        assert_eq!(
            client::text(&answer),
            Some("x"),
            "{}: echo answered {answer}",
            self.name
        );
    }
}

/// The upstream called directly.
pub async fn direct(upstream: &Upstream, clients: usize) -> (Target, Running) {
    let endpoint = Endpoint {
        url: upstream.url.clone(),
        token: None,
    };
    let target = Target::open(
        Kind::Direct,
        "direct (no hop)".into(),
        endpoint,
        None,
        ("echo", "sleep"),
        None,
        clients,
    )
    .await
    .expect("the upstream serves");
    (target, Box::new(()))
}

/// The bare proxy in front of the upstream.
pub async fn proxy(upstream: &Upstream, clients: usize) -> (Target, Running) {
    let origin = upstream.url.trim_end_matches("/mcp");
    let proxy = Proxy::start(origin);
    let endpoint = Endpoint {
        url: format!("{}/mcp", proxy.base),
        token: None,
    };
    let target = Target::open(
        Kind::Proxy,
        "bare proxy (axum + reqwest)".into(),
        endpoint,
        None,
        ("echo", "sleep"),
        Some(proxy.proc.pid()),
        clients,
    )
    .await
    .expect("the proxy forwards");
    (target, Box::new(proxy))
}

/// cancelkit's gateway (release) with the upstream as its HTTP upstream `up`.
pub async fn gateway(upstream: &Upstream, clients: usize) -> (Target, Running) {
    let binary = crate::gateway_bench::gateway_binary();
    gateway_at(&binary, "cancelkit gateway".into(), upstream, clients).await
}

/// The gateway binary at `binary` (this build's, or another to compare with), named `name`
/// in the tables.
pub async fn gateway_at(
    binary: &std::path::Path,
    name: String,
    upstream: &Upstream,
    clients: usize,
) -> (Target, Running) {
    let worker = Worker::start_binary(binary, "http", &gateway_config(&upstream.url), None);
    let token = Verifier::new(SECRET, Default::default()).mint("admin", Duration::from_secs(7200));
    let endpoint = Endpoint {
        url: worker.url("/mcp"),
        token: Some(token),
    };
    let target = Target::open(
        Kind::Gateway,
        name,
        endpoint,
        Some(worker.base.clone()),
        ("up-echo", "up-sleep"),
        Some(worker.pid()),
        clients,
    )
    .await
    .expect("the gateway serves");
    (target, Box::new(worker))
}

/// ContextForge with the upstream registered; `Err` says why it is not in the run.
pub async fn contextforge(
    upstream: &Upstream,
    clients: usize,
    (label, name): (&str, &str),
    extra: &[(&str, &str)],
) -> Result<(Target, Running), String> {
    let forge = ContextForge::start(label, &upstream.url, extra).await?;
    let endpoint = Endpoint {
        url: forge.mcp_url.clone(),
        token: Some(forge.token.clone()),
    };
    let target = Target::open(
        Kind::ContextForge,
        name.to_owned(),
        endpoint,
        Some(forge.base.clone()),
        (&forge.echo.clone(), &forge.sleep.clone()),
        Some(forge.proc.pid()),
        clients,
    )
    .await
    .map_err(|e| format!("{e}\n{}", forge.log_tail()))?;
    Ok((target, Box::new(forge)))
}
