//! The gateway's connections: its own accept loop over hyper, so that no client, with a token
//! or without one, can hold the gateway's sockets or descriptors for long.
//!
//! - A request head must arrive within `header_timeout`, or the connection is closed; a
//!   kept-alive connection waiting for its next request is on the same clock, so an idle
//!   connection is closed after it too.
//! - At most `max_connections` connections are served at once, `max_connections_per_ip` of
//!   them from one address. The cap never uses the descriptors kept in reserve for upstreams,
//!   Redis and the log (`fd_reserve`): at start the soft descriptor limit is raised to the hard
//!   one, and the cap lowered to fit under it if need be.
//! - At a cap, a new connection is still accepted and answered once, with its own short head
//!   timeout: `GET /health` as usual, anything else 503 naming the cap (with
//!   `Connection: close` and `Retry-After`). At most [`OVERFLOW`] such connections at once
//!   ([`OVERFLOW_PER_IP`] from one address); beyond, a connection is closed at once. Callers
//!   on connections already served go on as before.
//! - HTTP/2 (cleartext, by prior knowledge) is served only when `http2` is on, then with at
//!   most [`H2_MAX_STREAMS`] streams per connection and hyper's reset-flood bounds.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::Listener;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::config::Connections;
use crate::config::DEFAULT_FD_RESERVE;

/// How many connections beyond a cap are answered (once each) at the same time.
pub const OVERFLOW: usize = 64;
/// How many of those may come from one address.
pub const OVERFLOW_PER_IP: usize = 4;
/// The head timeout of a connection beyond a cap.
pub const OVERFLOW_HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// Streams per HTTP/2 connection, when HTTP/2 is on.
pub const H2_MAX_STREAMS: u32 = 100;

/// The bounds in force, after the descriptor limit was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Connections served at once.
    pub max_connections: usize,
    /// Of those, from one address.
    pub max_per_ip: usize,
}

/// Raises the soft descriptor limit to the hard one and fits the caps of `config` under it,
/// keeping `fd_reserve` descriptors (and the overflow's) for everything else. An error when
/// not even one connection fits.
pub fn bounds(config: &Connections) -> Result<Bounds, String> {
    let limit = raise_descriptor_limit();
    fit(config, limit)
}

/// The caps of `config` under a descriptor limit of `limit` (`None`: unknown, no fitting).
///
/// The reserve is the configured one, or [`DEFAULT_FD_RESERVE`] fitted to the limit (a quarter
/// of it at most, so a limit of 256 still serves 128 connections); a configured reserve that
/// leaves no room is an error, as nothing else can honour it. The per-address cap is the
/// configured one, or a sixteenth of the connections in force (at least 1), within them.
fn fit(config: &Connections, limit: Option<u64>) -> Result<Bounds, String> {
    let mut max_connections = config.max_connections;
    if let Some(limit) = limit {
        let limit_fds = usize::try_from(limit).unwrap_or(usize::MAX);
        let reserve = config
            .fd_reserve
            .unwrap_or_else(|| DEFAULT_FD_RESERVE.min(limit_fds / 4));
        let spare = limit_fds.saturating_sub(reserve + OVERFLOW);
        if spare == 0 {
            let what = if config.fd_reserve.is_some() {
                "`connections.fd_reserve`"
            } else {
                "the descriptors kept in reserve"
            };
            return Err(format!(
                "the descriptor limit ({limit}) leaves no room for connections beside {what} \
                 ({reserve}) and {OVERFLOW} for connections beyond the cap: raise `ulimit -n`{}",
                if config.fd_reserve.is_some() {
                    " or lower the reserve"
                } else {
                    ""
                }
            ));
        }
        if spare < max_connections {
            tracing::warn!(
                configured = max_connections,
                fitted = spare,
                descriptor_limit = limit,
                fd_reserve = reserve,
                "connections.max_connections lowered to fit the descriptor limit"
            );
            max_connections = spare;
        }
    }
    let max_per_ip = config
        .max_connections_per_ip
        .unwrap_or((max_connections / 16).max(1));
    Ok(Bounds {
        max_connections,
        max_per_ip: max_per_ip.min(max_connections),
    })
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; the soft limit now in force.
fn raise_descriptor_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// Connections counted per address and in all.
#[derive(Debug, Default)]
struct Counts {
    served: usize,
    overflow: usize,
    by_ip: HashMap<IpAddr, (usize, usize)>,
}

/// The connection counts, shared by the accept loop and each connection's guard.
#[derive(Debug)]
struct Admission {
    bounds: Bounds,
    counts: Mutex<Counts>,
}

/// How a new connection is served.
enum Admitted {
    /// Served in full.
    Served(Guard),
    /// Beyond a cap: answered once.
    Overflow(Guard, &'static str),
}

/// Uncounts its connection when dropped.
struct Guard {
    admission: Arc<Admission>,
    ip: IpAddr,
    overflow: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut counts = self.admission.counts();
        let emptied = match counts.by_ip.get_mut(&self.ip) {
            Some((served, overflow)) => {
                if self.overflow {
                    *overflow -= 1;
                } else {
                    *served -= 1;
                }
                *served == 0 && *overflow == 0
            }
            None => false,
        };
        if emptied {
            counts.by_ip.remove(&self.ip);
        }
        if self.overflow {
            counts.overflow -= 1;
        } else {
            counts.served -= 1;
        }
        metrics::gauge!("cancelkit_gateway_connections").set(counts.served as f64);
    }
}

impl Admission {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a connection from `ip`, as served or as overflow; `None`: close it at once.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Admitted> {
        let mut counts = self.counts();
        let (served, overflow) = counts.by_ip.get(&ip).copied().unwrap_or((0, 0));
        let refused = if counts.served >= self.bounds.max_connections {
            "the gateway's connection limit (connections.max_connections)"
        } else if served >= self.bounds.max_per_ip {
            "the connection limit per address (connections.max_connections_per_ip)"
        } else {
            counts.served += 1;
            counts.by_ip.entry(ip).or_default().0 += 1;
            metrics::gauge!("cancelkit_gateway_connections").set(counts.served as f64);
            return Some(Admitted::Served(self.guard(ip, false)));
        };
        metrics::counter!("cancelkit_gateway_connections_refused_total").increment(1);
        if counts.overflow >= OVERFLOW || overflow >= OVERFLOW_PER_IP {
            return None;
        }
        counts.overflow += 1;
        counts.by_ip.entry(ip).or_default().1 += 1;
        Some(Admitted::Overflow(self.guard(ip, true), refused))
    }

    fn guard(self: &Arc<Self>, ip: IpAddr, overflow: bool) -> Guard {
        Guard {
            admission: Arc::clone(self),
            ip,
            overflow,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then lets every connection finish
/// what it is serving (hyper's graceful shutdown) and returns once all are closed.
pub async fn serve<L>(
    mut listener: L,
    router: axum::Router,
    overflow: axum::Router,
    config: &Connections,
    bounds: Bounds,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: Listener<Addr = SocketAddr>,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let admission = Arc::new(Admission {
        bounds,
        counts: Mutex::default(),
    });
    let builder = builder(config.header_timeout, config.http2);
    let once = {
        let mut once = Builder::new(TokioExecutor::new()).http1_only();
        once.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(OVERFLOW_HEAD_TIMEOUT.min(config.header_timeout))
            .keep_alive(false);
        once
    };
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let Some(admitted) = admission.admit(peer.ip()) else {
            tracing::debug!(%peer, "connection closed at once: beyond every cap");
            continue;
        };
        let io = TokioIo::new(io);
        match admitted {
            Admitted::Served(guard) => {
                let service = TowerToHyperService::new(router.clone());
                let connection = graceful.watch(builder.serve_connection(io, service).into_owned());
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                    drop(guard);
                });
            }
            Admitted::Overflow(guard, cap) => {
                let service =
                    TowerToHyperService::new(overflow.clone().layer(axum::Extension(Refused(cap))));
                let connection = graceful.watch(once.serve_connection(io, service).into_owned());
                tokio::spawn(async move {
                    let _ = connection.await;
                    drop(guard);
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The builder of served connections.
fn builder(header_timeout: Duration, http2: bool) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    if !http2 {
        return builder.http1_only();
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(64 * 1024)
        .max_pending_accept_reset_streams(Some(20))
        .max_local_error_reset_streams(Some(1024))
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    builder
}

/// Which cap a connection beyond it met (in its request's extensions).
#[derive(Debug, Clone, Copy)]
pub struct Refused(pub &'static str);

/// The answer on a connection beyond a cap, to anything but `/health`.
pub async fn over_capacity(axum::Extension(Refused(cap)): axum::Extension<Refused>) -> Response {
    let mut response = super::front::detail(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("Service Unavailable: {cap} is reached; retry shortly"),
    );
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_connections: usize, per_ip: usize) -> Connections {
        Connections {
            max_connections,
            max_connections_per_ip: Some(per_ip),
            ..Connections::default()
        }
    }

    #[test]
    fn the_cap_fits_under_the_descriptor_limit_with_the_reserve_kept() {
        let config = config(4096, 256);
        let fitted = fit(&config, Some(1024)).unwrap();
        assert_eq!(fitted.max_connections, 1024 - DEFAULT_FD_RESERVE - OVERFLOW);
        assert_eq!(fit(&config, Some(1_000_000)).unwrap().max_connections, 4096);
        assert_eq!(fit(&config, None).unwrap().max_connections, 4096);
        // The default reserve fits a small limit: 256 descriptors still serve 128 connections
        // (a quarter kept in reserve, 64 for connections beyond the cap).
        let small = fit(&Connections::default(), Some(256)).unwrap();
        assert_eq!(small.max_connections, 256 - 64 - OVERFLOW);
        assert_eq!(small.max_per_ip, small.max_connections / 16);
        // A configured reserve is kept as given: one that leaves nothing is an error.
        let given = Connections {
            fd_reserve: Some(256),
            ..Connections::default()
        };
        let error = fit(&given, Some(256)).unwrap_err();
        assert!(error.contains("fd_reserve"), "{error}");
        let error = fit(&Connections::default(), Some(64)).unwrap_err();
        assert!(error.contains("ulimit -n"), "{error}");
    }

    #[test]
    fn the_per_address_cap_follows_the_connections_in_force() {
        let derived = fit(&Connections::default(), None).unwrap();
        assert_eq!((derived.max_connections, derived.max_per_ip), (4096, 256));
        let few = Connections {
            max_connections: 8,
            ..Connections::default()
        };
        assert_eq!(fit(&few, None).unwrap().max_per_ip, 1);
        assert_eq!(fit(&config(3, 10), None).unwrap().max_per_ip, 3);
    }

    #[test]
    fn admission_counts_per_address_and_overflows_then_closes() {
        let admission = Arc::new(Admission {
            bounds: Bounds {
                max_connections: 3,
                max_per_ip: 2,
            },
            counts: Mutex::default(),
        });
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let served = |admitted: Option<Admitted>| match admitted {
            Some(Admitted::Served(guard)) => guard,
            _ => panic!("not served"),
        };
        let first = served(admission.admit(a));
        let _second = served(admission.admit(a));
        // a is at its share: overflow, naming the per-address cap; b is still served.
        let Some(Admitted::Overflow(_, cap)) = admission.admit(a) else {
            panic!("a's third is not overflow")
        };
        assert!(cap.contains("per address"), "{cap}");
        let _third = served(admission.admit(b));
        // Everyone is at the global cap now.
        let Some(Admitted::Overflow(_, cap)) = admission.admit(b) else {
            panic!("b's second is not overflow")
        };
        assert!(cap.contains("max_connections)"), "{cap}");
        // One address holds at most OVERFLOW_PER_IP overflow connections.
        let held: Vec<_> = (0..OVERFLOW_PER_IP)
            .map_while(|_| admission.admit(a))
            .collect();
        assert_eq!(held.len(), OVERFLOW_PER_IP);
        assert!(admission.admit(a).is_none());
        // A closed connection makes room.
        drop(first);
        drop(held);
        let _fourth = served(admission.admit(a));
        assert_eq!(admission.counts().served, 3);
    }
}
