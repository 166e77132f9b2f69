//! Who may reach a tool server's endpoints, as route layers on `/invoke` and
//! `/cancel_tool_call`: the per-client rate limit (429), the bearer token (401) and the body
//! limit (413), in that order; and how clients are told apart.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ClientKey;

/// Who sent a request, as far as the server tells clients apart: a request extension, set by
/// the client layer (see [`Admission::guard`]) on the routes that know their clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Client {
    /// One IPv4 address, or one IPv6 /64.
    Address(IpAddr),
    /// Every client, under [`ClientKey::Shared`].
    Everyone,
}

/// The limiter sweeps out clients whose budget is full again every this many requests...
const PRUNE_EVERY_CHECKS: u64 = 1024;
/// ...and on the first request after this long without a sweep.
const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

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

/// The per-client rate limit, and when to sweep it.
struct Limiter {
    keyed: DefaultKeyedRateLimiter<Client>,
    started: Instant,
    /// Requests checked so far (every [`PRUNE_EVERY_CHECKS`]-th sweeps).
    checks: AtomicU64,
    /// When the next timed sweep is due, in milliseconds since `started`.
    next_prune_ms: AtomicU64,
}

impl Limiter {
    /// `per_second` requests a second per client, in bursts of up to `burst`.
    fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Self {
        Limiter {
            keyed: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            started: Instant::now(),
            checks: AtomicU64::new(0),
            next_prune_ms: AtomicU64::new(PRUNE_INTERVAL.as_millis() as u64),
        }
    }

    /// Spends one request of `client`'s budget; sweeps forgotten clients now and then.
    fn admit(&self, client: Client) -> bool {
        let admitted = self.keyed.check_key(&client).is_ok();
        let count = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = self.started.elapsed().as_millis() as u64;
        let due = self.next_prune_ms.load(Ordering::Relaxed);
        if (count.is_multiple_of(PRUNE_EVERY_CHECKS) || now_ms >= due)
            && self
                .next_prune_ms
                .compare_exchange(
                    due,
                    now_ms + PRUNE_INTERVAL.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.keyed.retain_recent();
            self.keyed.shrink_to_fit();
        }
        admitted
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

/// The policy in front of `/invoke` and `/cancel_tool_call`, put on their routes as layers by
/// [`guard`](Self::guard). `/.well-known/rap-toolset` is open: it has none of them.
pub(super) struct Admission {
    gate: Arc<Gate>,
    bearer: Option<Arc<Bearer>>,
    body_limit: usize,
}

/// The client layer's state: who sent a request, and each client's budget of requests.
struct Gate {
    clients: Clients,
    limiter: Option<Limiter>,
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
        let limiter = rate.map(|(per_second, burst)| Limiter::new(per_second, burst));
        Admission {
            gate: Arc::new(Gate { clients, limiter }),
            bearer: bearer_token.map(|token| Arc::new(Bearer::new(token))),
            body_limit,
        }
    }

    /// `route` behind the rate limit, then the bearer check, then the body limit. The limit
    /// comes first so that every attempt, a wrong token included, spends the client's budget:
    /// token guessing is throttled, and a throttled client learns nothing about its token
    /// (429 either way). The body is read last, so a client without the token cannot make the
    /// server read anything.
    ///
    /// The client is identified (and put in the request's extensions as a [`Client`]) when
    /// the rate limit is on or `need_client` (a per-client share of running calls); a request
    /// that cannot be placed is refused with 500. A handler behind the guard gets the whole
    /// body, within the limit, as its `Bytes`. Route layers only: a wrong method is still 405.
    pub(super) fn guard<S>(&self, route: MethodRouter<S>, need_client: bool) -> MethodRouter<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        // The layer added last runs first.
        let mut route = route
            // The body layer has buffered the body within its own limit already.
            .route_layer(DefaultBodyLimit::disable())
            .route_layer(from_fn_with_state(self.body_limit, limit_body));
        if let Some(bearer) = &self.bearer {
            route = route.route_layer(from_fn_with_state(Arc::clone(bearer), require_bearer));
        }
        if self.gate.limiter.is_some() || need_client {
            route = route.route_layer(from_fn_with_state(Arc::clone(&self.gate), limit_rate));
        }
        route
    }

    /// How many clients the rate limiter remembers (0 without a rate limit).
    pub(super) fn rate_limited_clients(&self) -> usize {
        self.gate.limiter.as_ref().map_or(0, |l| l.keyed.len())
    }
}

/// The client layer: identifies the client (500 if it cannot), spends one request of its
/// budget (429 when there is none left) and hands the [`Client`] on as an extension.
async fn limit_rate(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let Some(client) = gate.clients.of(&request) else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({
                "error": "the server cannot identify the client for its rate limit"
            })),
        )
            .into_response();
    };
    if let Some(limiter) = &gate.limiter
        && !limiter.admit(client)
    {
        return StatusCode::TOO_MANY_REQUESTS.into_response();
    }
    request.extensions_mut().insert(client);
    next.run(request).await
}

/// The bearer layer: 401 unless `Authorization` carries the token.
async fn require_bearer(
    State(bearer): State<Arc<Bearer>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(reqwest::header::HeaderValue::as_bytes);
    if !bearer.accepts(given) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    next.run(request).await
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
