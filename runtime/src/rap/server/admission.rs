//! Who may reach a tool server's endpoints, as route layers on `/invoke` and
//! `/cancel_tool_call`: the client's identity (500 if it cannot be told), the bearer token
//! (401) with the per-client budget of failed authentications (429), and the body limit (413),
//! in that order; and how clients are told apart.
//!
//! Only a request that fails authentication spends its client's budget, so a runtime holding
//! the token never spends any. A client whose budget is exhausted gets 429 for every request,
//! the right token included, so that a guesser cannot tell a right guess from a wrong one; a
//! `/cancel_tool_call` with the right token is still applied behind that 429, and an `/invoke`
//! is not run.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ClientKey;
use super::limiter::Limiter;

/// Who sent a request, as far as the server tells clients apart: a request extension, set by
/// the admission layer (see [`Admission::guard`]) on the routes that know their clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Client {
    /// One IPv4 address, or one IPv6 /64.
    Address(IpAddr),
    /// Every client, under [`ClientKey::Shared`].
    Everyone,
}

/// How many times reading a throttled request's body may find nothing new before it gives up:
/// it takes the body as far as it has arrived (with its headers, as a runtime sends it), and
/// yields to the connection's task in between, but never waits for the client.
const ARRIVAL_POLLS: usize = 16;

/// The expected bearer token, kept as a SHA-256 digest so that comparing it with what a client
/// sent takes the same time whatever the client sent.
struct Bearer {
    digest: [u8; 32],
}

impl Bearer {
    fn new(token: &str) -> Self {
        Bearer {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    /// Whether an `Authorization` header value carries the token. The scheme is not secret and
    /// is checked first; the token part is hashed and the digests compared in constant time.
    fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        const SCHEME: &[u8] = b"Bearer ";
        let Some(value) = authorization else {
            return false;
        };
        if value.len() < SCHEME.len() || !value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
            return false;
        }
        let given: [u8; 32] = Sha256::digest(&value[SCHEME.len()..]).into();
        given.ct_eq(&self.digest).into()
    }
}

/// Tells clients apart by the configured [`ClientKey`].
struct Clients {
    key: ClientKey,
    /// Whether the first request without a client key has been logged as an error.
    reported_missing_key: AtomicBool,
}

impl Clients {
    /// The client of a request; `None` (logged) for one the configured [`ClientKey`] cannot
    /// place.
    fn of(&self, request: &Request) -> Option<Client> {
        let address = match &self.key {
            ClientKey::Shared => return Some(Client::Everyone),
            ClientKey::PeerAddress => request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0.ip()),
            ClientKey::TrustedHeader(name) => header_address(request.headers(), name),
        };
        if address.is_none() {
            let message = match &self.key {
                ClientKey::TrustedHeader(name) => format!(
                    "refused a request without a client address in the `{name}` header (ClientKey::TrustedHeader)"
                ),
                _ => "refused a request without a peer address: serve the router with into_make_service_with_connect_info::<SocketAddr>(), or choose another ClientKey".to_owned(),
            };
            // Once as an error (a deployment mistake), then quietly, so it cannot flood the log.
            if self.reported_missing_key.swap(true, Ordering::Relaxed) {
                tracing::debug!("{message}");
            } else {
                tracing::error!("{message}");
            }
        }
        address.map(|address| Client::Address(bucket_of(address)))
    }
}

/// The last comma-separated entry of `name`, as an IP address (an `ip:port` or `[ipv6]:port`
/// form is accepted too).
fn header_address(headers: &HeaderMap, name: &HeaderName) -> Option<IpAddr> {
    let value = headers.get_all(name).iter().next_back()?.to_str().ok()?;
    let last = value.rsplit(',').next()?.trim();
    last.parse::<IpAddr>()
        .ok()
        .or_else(|| last.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// One bucket per IPv4 address and per IPv6 /64.
fn bucket_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

/// What a route does with a request that carries the right token but comes from a client whose
/// budget is exhausted. It is answered 429 either way, like every request of that client, so the
/// answer tells nothing about the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WhenThrottled {
    /// The request is not run (`/invoke`: a 429 never stands for a call that started).
    Refuse,
    /// The request is run behind the 429, on its body as far as it arrived with the request,
    /// and its own answer dropped (`/cancel_tool_call`: the runtime neither reads the answer
    /// nor retries, so a cancel refused here would be lost).
    ApplyBehind429,
}

/// The policy in front of `/invoke` and `/cancel_tool_call`, put on their routes as layers by
/// [`guard`](Self::guard). `/.well-known/rap-toolset` is open: it has none of them.
pub(super) struct Admission {
    gate: Arc<Gate>,
    body_limit: usize,
}

/// The admission layer's state, shared by both routes.
struct Gate {
    clients: Clients,
    bearer: Option<Bearer>,
    /// Each client's budget of failed authentications: only with a rate limit and a bearer
    /// token (without a token nothing can fail authentication, so nothing would spend it).
    limiter: Option<Limiter>,
    /// The body limit, for a cancel applied behind a 429.
    body_limit: usize,
}

/// The admission layer's state on one route.
#[derive(Clone)]
struct Door {
    gate: Arc<Gate>,
    /// Whether the client is identified (and put in the request's extensions as a [`Client`]).
    identify: bool,
    when_throttled: WhenThrottled,
}

impl Admission {
    /// The policy of a [`ToolServerBuilder`](super::ToolServerBuilder): its rate limit
    /// (`(per_second, burst)`, or none), client key, bearer token and body limit.
    pub(super) fn new(
        rate: Option<(NonZeroU32, NonZeroU32)>,
        key: ClientKey,
        bearer_token: Option<&str>,
        body_limit: usize,
    ) -> Self {
        let clients = Clients {
            key,
            reported_missing_key: AtomicBool::new(false),
        };
        let bearer = bearer_token.map(Bearer::new);
        let limiter = rate
            .filter(|_| bearer.is_some())
            .map(|(per_second, burst)| Limiter::new(per_second, burst));
        Admission {
            gate: Arc::new(Gate {
                clients,
                bearer,
                limiter,
                body_limit,
            }),
            body_limit,
        }
    }

    /// `route` behind the admission layer (client, bearer token, budget), then the body limit.
    ///
    /// The admission layer identifies the client (500 if it cannot) when there is a budget
    /// or `need_client` (a per-client share of running calls), checks the token in constant
    /// time, and then looks at the client's budget the same way whatever the token: a wrong
    /// or missing token spends one request of it (401 while there was budget), the right one
    /// spends nothing. A client without budget gets 429 for every request, the right token
    /// included; behind that 429 an authentic request is still run or not as `when_throttled`
    /// says. The body is read last, so a client without the token cannot make the server read
    /// anything. A handler behind the guard gets the whole body, within the limit, as its
    /// `Bytes`. Route layers only: a wrong method is still 405.
    pub(super) fn guard<S>(
        &self,
        route: MethodRouter<S>,
        need_client: bool,
        when_throttled: WhenThrottled,
    ) -> MethodRouter<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        // The layer added last runs first.
        let mut route = route
            // The body layer has buffered the body within its own limit already.
            .route_layer(DefaultBodyLimit::disable())
            .route_layer(from_fn_with_state(self.body_limit, limit_body));
        let identify = self.gate.limiter.is_some() || need_client;
        if identify || self.gate.bearer.is_some() {
            let door = Door {
                gate: Arc::clone(&self.gate),
                identify,
                when_throttled,
            };
            route = route.route_layer(from_fn_with_state(door, admit));
        }
        route
    }

    /// How many clients the rate limiter remembers (0 without a rate limit or a bearer token).
    pub(super) fn rate_limited_clients(&self) -> usize {
        self.gate.limiter.as_ref().map_or(0, Limiter::len)
    }
}

/// The admission layer: identifies the client (500 if it cannot), checks the token, looks at
/// the client's budget (spending from it for a failed authentication), and answers 429, 401,
/// or hands the request (with its [`Client`]) on.
async fn admit(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let gate = &door.gate;
    let client = if door.identify {
        let Some(client) = gate.clients.of(&request) else {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({
                    "error": "the server cannot identify the client for its rate limit"
                })),
            )
                .into_response();
        };
        Some(client)
    } else {
        None
    };
    // Always checked, in constant time: a throttled client's cancel is applied if authentic.
    let authentic = gate.bearer.as_ref().is_none_or(|bearer| {
        let given = request.headers().get(header::AUTHORIZATION);
        bearer.accepts(given.map(header::HeaderValue::as_bytes))
    });
    if let (Some(limiter), Some(client)) = (&gate.limiter, client)
        && !limiter.check(client, !authentic)
    {
        // The same work before the same answer whatever the token: the request goes to a task
        // that applies an authentic cancel and drops anything else unread.
        if door.when_throttled == WhenThrottled::ApplyBehind429 {
            tokio::spawn(apply_behind_429(request, next, authentic, gate.body_limit));
        }
        return StatusCode::TOO_MANY_REQUESTS.into_response();
    }
    if !authentic {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Some(client) = client {
        request.extensions_mut().insert(client);
    }
    next.run(request).await
}

/// Runs a throttled client's `request` (answered 429 already) through the rest of its route if
/// it is `authentic`, on its body as far as it arrived with it; drops its answer. A request
/// that is not authentic is dropped with its body unread.
async fn apply_behind_429(request: Request, next: Next, authentic: bool, limit: usize) {
    if !authentic {
        return;
    }
    let (parts, body) = request.into_parts();
    let Some(body) = arrived(body, limit).await else {
        tracing::warn!(
            "dropped a request with the right token from a throttled client: its body had not arrived with it, or was over the limit"
        );
        return;
    };
    let answer = next.run(Request::from_parts(parts, Body::from(body))).await;
    tracing::debug!(
        status = answer.status().as_u16(),
        "applied a request with the right token from a throttled client behind its 429"
    );
}

/// A throttled request's body as far as it has arrived: read without waiting for the client
/// (between frames it only yields to the connection's task, at most [`ARRIVAL_POLLS`] times
/// when nothing new is there), so that an authentic request keeps its connection no longer
/// than a refused one. `None` if it is not all there, fails, or is over `limit` bytes.
async fn arrived(mut body: Body, limit: usize) -> Option<Bytes> {
    let mut bytes = Vec::new();
    let mut idle = 0;
    while !body.is_end_stream() {
        let polled = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx)));
        match polled.await {
            Poll::Ready(None) => break,
            Poll::Ready(Some(Err(_))) => return None,
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > limit {
                        return None;
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Poll::Pending => {
                idle += 1;
                if idle >= ARRIVAL_POLLS {
                    return None;
                }
                tokio::task::yield_now().await;
            }
        }
    }
    Some(bytes.into())
}

/// The body layer: reads the whole body, 413 beyond `limit` bytes (whether or not the request
/// declared its length), and hands it on buffered.
async fn limit_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    next.run(Request::from_parts(parts, body.into())).await
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_bearer_check_accepts_only_the_token() {
        let bearer = Bearer::new("s3cret");
        assert!(bearer.accepts(Some(b"Bearer s3cret")));
        assert!(
            bearer.accepts(Some(b"bearer s3cret")),
            "the scheme is case-insensitive"
        );
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret ",
            b"Bearer S3cret",
            b"Basic s3cret",
            b"s3cret",
            b"Bearer",
            b"",
        ] {
            assert!(
                !bearer.accepts(Some(wrong)),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(!bearer.accepts(None));
    }

    /// A guess wrong in its first byte and one wrong only in its last take the same time: a
    /// byte-by-byte comparison would answer the first at once and the second after reading
    /// the whole token, which lets a client find the token byte by byte.
    #[test]
    fn the_bearer_check_takes_as_long_wherever_a_guess_goes_wrong() {
        let token = "t".repeat(256 * 1024);
        let bearer = Bearer::new(&token);
        let wrong_first = format!("Bearer x{}", &token[1..]);
        let wrong_last = format!("Bearer {}x", &token[..token.len() - 1]);
        let once = |guess: &str| {
            let started = Instant::now();
            assert!(!black_box(
                bearer.accepts(Some(black_box(guess.as_bytes())))
            ));
            started.elapsed()
        };
        let (mut first, mut last) = (Duration::MAX, Duration::MAX);
        for _ in 0..15 {
            first = first.min(once(&wrong_first));
            last = last.min(once(&wrong_last));
        }
        let ratio = last.as_secs_f64() / first.as_secs_f64();
        assert!(
            (0.5..2.0).contains(&ratio),
            "wrong in the first byte: {first:?}, in the last: {last:?}"
        );
    }

    #[test]
    fn clients_are_bucketed_by_ipv4_address_and_ipv6_prefix() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(bucket_of(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(bucket_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(bucket_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            bucket_of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            bucket_of(ip("2001:db8:1:2::9"))
        );
        assert_ne!(
            bucket_of(ip("2001:db8:1:3::1")),
            bucket_of(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn a_trusted_header_gives_its_last_entry() {
        let name = HeaderName::from_static("x-forwarded-for");
        let mut headers = HeaderMap::new();
        assert_eq!(header_address(&headers, &name), None);
        headers.insert(&name, "203.0.113.9, 198.51.100.4".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("198.51.100.4".parse().unwrap())
        );
        headers.insert(&name, "[2001:db8::1]:4711".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("2001:db8::1".parse().unwrap())
        );
        headers.insert(&name, "198.51.100.4:80".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("198.51.100.4".parse().unwrap())
        );
        headers.insert(&name, "unknown".parse().unwrap());
        assert_eq!(header_address(&headers, &name), None);
    }
}
