//! The gateway assembled: state, routes, layers, serving and draining.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::serve::{ListenerExt, TapIo};
use cancelkit::tls::TlsListener;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::auth::Verifier;
use crate::config::Config;
use crate::front::{self, api, mcp, rpc};
use crate::listen;
use crate::runs::record::CancelSource;
use crate::runs::{self, Runs};
use crate::shares::Share;
use crate::upstream::Upstreams;

/// The gateway's state, shared by every handler.
#[derive(Debug)]
pub struct App {
    /// The resolved configuration.
    pub config: Config,
    /// Checks tokens.
    pub verifier: Verifier,
    /// The run registry; `None` when cancellation is switched off (nothing is tracked).
    pub runs: Option<Arc<Runs>>,
    /// The upstream servers.
    pub upstreams: Upstreams,
    /// The bounds on calls in flight, with each user's share: they hold whether runs are
    /// tracked or not.
    pub shares: Shares,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    draining: AtomicBool,
    /// Cancelled when the gateway stops: open streams end.
    pub stopping: CancellationToken,
}

impl App {
    /// Builds the state for `config`, checking tokens with `verifier` (see
    /// [`Verifier::from_config`]). Starts the upstreams and, with a Redis URL, the link to the
    /// other workers.
    pub fn new(config: Config, verifier: Verifier) -> Arc<App> {
        let runs = config.cancellation.enabled.then(|| {
            let settings = runs::Settings {
                worker: config.worker_id.clone(),
                retention: config.cancellation.status_retention,
                tombstone_ttl: config.cancellation.tombstone_ttl,
                max_runs: config.limits.max_runs,
                max_retained: config.limits.max_retained,
                max_tombstones: config.limits.max_tombstones,
                max_retained_per_user: config.limits.max_retained_per_user,
                max_tombstones_per_user: config.limits.max_tombstones_per_user,
            };
            let cluster = config
                .redis_url
                .as_ref()
                .map(|url| crate::cluster::Settings {
                    url: url.clone(),
                    worker: config.worker_id.clone(),
                    retention: config.cancellation.status_retention,
                    heartbeat_ttl: crate::cluster::DEFAULT_HEARTBEAT_TTL,
                    tombstone_ttl: config.cancellation.tombstone_ttl,
                    ack_timeout: Duration::from_secs(2),
                    lookup_timeout: Duration::from_millis(500),
                    max_pending: config.limits.max_runs + config.limits.max_retained,
                });
            Runs::new(settings, cluster)
        });
        let upstreams = Upstreams::start(&config);
        let shares = Shares::new(&config);
        Arc::new(App {
            verifier,
            runs,
            upstreams,
            shares,
            metrics: metrics_handle(),
            draining: AtomicBool::new(false),
            stopping: CancellationToken::new(),
            config,
        })
    }

    /// Whether the gateway is draining (SIGTERM): new calls are refused.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The `initialize` result the gateway gives (legacy MCP eras).
    pub fn initialize_result(&self, params: &Value) -> Value {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        // Every legacy revision is answered as itself; one we do not know gets the newest.
        let version = cancelkit::peer::McpRevision::answer_initialize(asked);
        json!({
            "protocolVersion": version.to_string(),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": server_info(),
        })
    }

    /// The routes and layers.
    pub fn router(self: &Arc<Self>) -> Router {
        let mut protected = Router::new()
            .route_service("/mcp", mcp::service(self))
            .route("/rpc", post(rpc::rpc));
        if self.runs.is_some() {
            for prefix in ["", "/v1"] {
                protected = protected
                    .route(&format!("{prefix}/cancellation/cancel"), post(api::cancel))
                    .route(
                        &format!("{prefix}/cancellation/status/{{request_id}}"),
                        get(api::status),
                    );
            }
        }
        let protected = protected
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(self),
                front::authenticate,
            ))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(self),
                front::check_origin,
            ));
        Router::new()
            .route("/health", get(front::health))
            .route("/metrics", get(front::metrics))
            .merge(protected)
            .fallback(front::not_found)
            .method_not_allowed_fallback(|| async {
                front::detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
            })
            .layer(DefaultBodyLimit::max(self.config.limits.max_body_bytes))
            .with_state(Arc::clone(self))
    }

    /// Serves on `listener` until `shutdown` completes, then drains: new calls are refused,
    /// runs get the drain grace to finish, then the rest are cancelled; upstreams are stopped.
    /// Connections are bounded by `bounds` ([`listen::bounds`]) and `[connections]`.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        bounds: listen::Bounds,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) {
        let app = Arc::clone(&self);
        let drained = CancellationToken::new();
        let drained_signal = drained.clone();
        let stop = async move {
            shutdown.await;
            app.drain().await;
            drained_signal.cancel();
        };
        let router = self.router();
        let overflow = self.overflow_router();
        let connections = &self.config.connections;
        match self.config.tls.server.clone() {
            Some(tls) => {
                // TlsListener turns Nagle off itself.
                let listener = TlsListener::new(listener, tls);
                listen::serve(listener, router, overflow, connections, bounds, stop).await;
            }
            None => {
                let listener = no_delay(listener);
                listen::serve(listener, router, overflow, connections, bounds, stop).await;
            }
        }
        drained.cancelled().await;
        for upstream in self.upstreams.all() {
            upstream.shutdown(Duration::from_secs(2)).await;
        }
        if let Some(cluster) = self.runs.as_ref().and_then(|r| r.cluster()) {
            cluster.shutdown();
        }
    }

    /// What a connection beyond a cap is answered ([`listen`]): `/health`, else 503.
    fn overflow_router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/health", get(front::health))
            .fallback(listen::over_capacity)
            .with_state(Arc::clone(self))
    }

    /// Refuses new calls, waits up to the drain grace for runs in flight, cancels the rest.
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        let Some(runs) = &self.runs else {
            // Nothing is tracked, but calls in flight still hold their slots: they get the
            // grace to finish, as tracked runs do.
            let deadline = tokio::time::Instant::now() + self.config.drain_grace;
            while self.shares.calls.held().0 > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            self.stopping.cancel();
            return;
        };
        let deadline = tokio::time::Instant::now() + self.config.drain_grace;
        tracing::info!(in_flight = runs.in_flight(), grace = ?self.config.drain_grace, "draining");
        while runs.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cancelled = runs.cancel_all(CancelSource::Shutdown, "the gateway is shutting down");
        if cancelled > 0 {
            tracing::info!(cancelled, "drain grace over: runs cancelled");
            let until = tokio::time::Instant::now() + Duration::from_secs(2);
            while runs.in_flight() > 0 && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        self.stopping.cancel();
    }
}

/// The bounds on calls in flight that every user draws from, each with a per-user share.
#[derive(Debug)]
pub struct Shares {
    /// Tool calls in flight on this worker (`limits.max_runs`, `limits.max_runs_per_user`).
    pub calls: Arc<Share>,
    /// Calls in flight to each upstream, by its name (`limits.max_upstream_calls`,
    /// `limits.max_upstream_calls_per_user`).
    pub upstreams: HashMap<String, Arc<Share>>,
}

impl Shares {
    fn new(config: &Config) -> Shares {
        let limits = &config.limits;
        Shares {
            calls: Share::new(
                "limits.max_runs",
                limits.max_runs,
                "limits.max_runs_per_user",
                limits.max_runs_per_user,
            ),
            upstreams: config
                .upstreams
                .iter()
                .map(|u| {
                    let share = Share::new(
                        "limits.max_upstream_calls",
                        limits.max_upstream_calls,
                        "limits.max_upstream_calls_per_user",
                        limits.max_upstream_calls_per_user,
                    );
                    (u.name.clone(), share)
                })
                .collect(),
        }
    }
}

/// The gateway's `serverInfo`.
pub fn server_info() -> Value {
    json!({"name": "cancelkit-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// One Prometheus recorder per process (several gateways in one test process share it).
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(
                        "cancelkit_gateway_cancel_to_stopped_seconds".into(),
                    ),
                    &[
                        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
                    ],
                )
                .expect("static buckets")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!(
                    "a metrics recorder was already installed; /metrics shows only this one's"
                );
            }
            describe();
            handle
        })
        .clone()
}

fn describe() {
    metrics::describe_counter!(
        "cancelkit_gateway_runs_started_total",
        "tools/call runs started"
    );
    metrics::describe_counter!(
        "cancelkit_gateway_runs_finished_total",
        "runs ended, by outcome (completed, failed, cancelled)"
    );
    metrics::describe_counter!(
        "cancelkit_gateway_cancels_total",
        "runs cancelled, by source (client, api, timeout, disconnect, shutdown)"
    );
    metrics::describe_counter!(
        "cancelkit_gateway_upstream_cancels_total",
        "cancels sent to the upstream that owned the call"
    );
    metrics::describe_histogram!(
        "cancelkit_gateway_cancel_to_stopped_seconds",
        metrics::Unit::Seconds,
        "from a run's cancel to its upstream call being dropped (the upstream told)"
    );
    metrics::describe_gauge!(
        "cancelkit_gateway_runs_in_flight",
        "runs in flight on this worker"
    );
    metrics::describe_gauge!(
        "cancelkit_gateway_redis_connected",
        "1 while the link to Redis is up, 0 while it is away"
    );
    for outcome in ["completed", "failed", "cancelled"] {
        metrics::counter!("cancelkit_gateway_runs_finished_total", "outcome" => outcome)
            .increment(0);
    }
    for source in ["client", "api", "timeout", "disconnect", "shutdown"] {
        metrics::counter!("cancelkit_gateway_cancels_total", "source" => source).increment(0);
    }
    metrics::counter!("cancelkit_gateway_runs_started_total").increment(0);
    metrics::describe_counter!(
        crate::shares::METRIC_REFUSED,
        "requests refused at a limit, by limit (the configuration key) and scope (user: the \
         caller's share; global: the gateway's bound)"
    );
    metrics::describe_counter!(
        runs::METRIC_FORGOTTEN,
        "finished statuses forgotten before their retention, by the limit that pushed them out"
    );
    metrics::describe_counter!(
        front::METRIC_NO_PERMISSION,
        "requests whose valid token grants no permission on the gateway (refused, 403)"
    );
    metrics::counter!(front::METRIC_NO_PERMISSION).increment(0);
    metrics::describe_counter!(
        crate::cluster::METRIC_DROPPED,
        "records and acks dropped from the Redis queue to make room (written again by the \
         resync; a cancel is never dropped), by kind"
    );
    metrics::describe_counter!(
        crate::cluster::METRIC_REFUSED,
        "cancels refused because their share of the Redis queue was full (the caller got \
         429 or 503, never queued), by kind"
    );
    metrics::describe_gauge!(crate::cluster::METRIC_PENDING, "writes waiting for Redis");
    metrics::describe_gauge!(
        crate::cluster::METRIC_PENDING_CANCELS,
        "cancels and tombstones waiting for Redis"
    );
    metrics::describe_counter!(
        crate::cluster::METRIC_WAITERS_FULL,
        "remote cancels that did not wait for their ack because too many already did"
    );
}

/// `listener` with Nagle's algorithm off on every accepted connection.
///
/// An SSE answer goes out in pieces (the head, then each event). With Nagle on, a piece written
/// while the one before is still unacknowledged waits for that ACK, which a client on a kept-alive
/// connection delays by up to 40 ms: `cancelkit check mcp --url` measured 44 ms per request at
/// 2025-11-25 before, 1–3 ms after.
fn no_delay(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    fn set(tcp: &mut TcpStream) {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
        }
    }
    listener.tap_io(set as fn(&mut TcpStream))
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut listener = no_delay(listener);
        let client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap(), "Nagle is still on");
        drop(client);
    }
}
