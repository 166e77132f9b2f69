//! The floor of an extra hop: a bare HTTP pass-through proxy with no logic, in a child process
//! of the bench binary (`cancelkit-bench proxy-http LISTEN UPSTREAM`). It is built from what
//! the gateway itself is built from (axum on hyper for the server side, reqwest on hyper-util
//! for the client side, a multi-thread tokio runtime with a worker per core): every request's
//! method, path, headers (less the hop-by-hop ones) and body bytes go to `UPSTREAM` on a
//! keep-alive connection, and the answer's status and headers come back with its body streamed
//! as it arrives (an SSE stream event by event). No parsing, no authentication, no state.
//!
//! The process prints `listening on http://ADDR` on stdout once bound.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;

use super::process::Proc;

/// The largest request body forwarded.
const MAX_BODY: usize = 64 << 20;

/// The running proxy.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The process (killed when dropped).
    pub proc: Proc,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (`http://HOST:PORT`, no path).
    pub fn start(upstream: &str) -> Proxy {
        let mut command = Command::new(std::env::current_exe().expect("the bench binary's path"));
        command
            .args(["proxy-http", "127.0.0.1:0", upstream])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut proc = Proc::spawn(command, "the proxy");
        let stdout = BufReader::new(proc.child.stdout.take().expect("piped"));
        let mut base = None;
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("listening on ") {
                base = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        Proxy {
            base: base.expect("the proxy printed its address"),
            proc,
        }
    }
}

struct Forward {
    upstream: String,
    http: reqwest::Client,
}

/// Headers that belong to one hop, not to the message.
fn hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::HOST
        || name == header::TRANSFER_ENCODING
        || name == header::TE
        || name == header::TRAILER
        || name == header::UPGRADE
        || name == header::PROXY_AUTHORIZATION
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

async fn forward(State(to): State<Arc<Forward>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = to
        .http
        .request(parts.method, format!("{}{path}", to.upstream))
        .body(bytes);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) && name != header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    let Ok(answer) = out.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// `cancelkit-bench proxy-http LISTEN UPSTREAM`: forwards everything to `UPSTREAM` until killed.
pub fn main(args: &[String]) {
    let (Some(listen), Some(upstream)) = (args.first(), args.get(1)) else {
        eprintln!("usage: cancelkit-bench proxy-http LISTEN http://UPSTREAM");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let state = Arc::new(Forward {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(4096)
                .build()
                .expect("client"),
        });
        let router = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind(listen.as_str())
            .await
            .expect("bind the proxy");
        let local = listener.local_addr().expect("its address");
        println!("listening on http://{local}");
        // Nagle off, as the gateway has it: else a response's last bytes wait for the client's
        // delayed ACK (~40 ms) whenever they are written apart from the rest.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, router).await.expect("serve");
    });
}
