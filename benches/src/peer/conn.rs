//! One client connection of any stack, and the scenarios every stack runs the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::work::{Receivers, mono_ns};

/// A boxed future of a cancel.
pub type BoxFut = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A client connected to a server of its own stack, in whatever transport.
pub trait Conn: Clone + Send + Sync + 'static {
    /// A `noop` request carrying `text`, awaited to its answer.
    fn call(&self, text: Arc<str>) -> impl Future<Output = ()> + Send + 'static;
    /// A `park` request labelled `label` carrying `text`: a future of its answer, polled by the
    /// caller (lazy stacks send it on the first poll).
    fn park(&self, label: u64, text: &Arc<str>) -> Box<dyn Parked>;
    /// A `heap` request (the server reports its live heap bytes), awaited to its answer.
    fn heap(&self) -> impl Future<Output = ()> + Send + 'static;
}

/// A parked request in flight.
pub trait Parked: Future<Output = ()> + Send + Unpin {
    /// Cancels the request the way the stack's users do (drop it, or call its cancel); the future
    /// resolves once the client is done with it (for ACP: when the -32800 answer was read).
    fn cancel(self: Box<Self>) -> BoxFut;
    /// Whether a cancelled request is answered (ACP) or not (MCP).
    fn answered(&self) -> bool;
}

/// How long any one wait of a scenario may take before the benchmark gives up on the stack.
pub const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("gave up waiting for {what}"))
}

/// Round trips per second: `total` no-op requests from `window` concurrent callers.
pub async fn throughput<C: Conn>(conn: &C, text: &Arc<str>, total: usize, window: usize) -> f64 {
    let per_caller = total / window;
    let start = mono_ns();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..window {
        let conn = conn.clone();
        let text = text.clone();
        callers.spawn(async move {
            for _ in 0..per_caller {
                conn.call(text.clone()).await;
            }
        });
    }
    within("the throughput callers", callers.join_all()).await;
    (per_caller * window) as f64 / ((mono_ns() - start) as f64 / 1e9)
}

/// Latency samples of one cancel scenario, in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Cancels {
    /// Cancel → the server's handler stopped.
    pub stopped: Vec<f64>,
    /// Cancel → the client read the -32800 answer (ACP only).
    pub answered: Vec<f64>,
}

/// Starts a parked request and waits until its handler runs.
async fn start_parked<C: Conn>(
    conn: &C,
    rx: &mut Receivers,
    label: u64,
    text: &Arc<str>,
) -> Box<dyn Parked> {
    let mut call = conn.park(label, text);
    within("a parked handler to start", async {
        tokio::select! {
            biased;
            started = rx.started.recv() => {
                assert_eq!(started, Some(label), "the handler just sent starts");
            }
            () = &mut call => panic!("a parked request was answered before it was cancelled"),
        }
    })
    .await;
    call
}

/// One cancel: of a request whose handler runs, until the handler stopped.
async fn one_cancel<C: Conn>(
    conn: &C,
    rx: &mut Receivers,
    label: u64,
    text: &Arc<str>,
    into: &mut Cancels,
) {
    let call = start_parked(conn, rx, label, text).await;
    let answered = call.answered();
    let t0 = mono_ns();
    call.cancel().await;
    let read = mono_ns();
    let stopped = within("a cancelled handler to stop", rx.stopped.recv())
        .await
        .expect("the server reports stops");
    into.stopped.push(stopped.saturating_sub(t0) as f64 / 1e3);
    if answered {
        into.answered.push(read.saturating_sub(t0) as f64 / 1e3);
    }
}

/// `samples` cancels on an otherwise idle connection.
pub async fn idle<C: Conn>(
    conn: &C,
    rx: &mut Receivers,
    samples: usize,
    text: &Arc<str>,
) -> Cancels {
    let mut cancels = Cancels::default();
    for label in 0..samples as u64 {
        one_cancel(conn, rx, label, text, &mut cancels).await;
    }
    cancels
}

/// `samples` cancels, each of a fresh request started on top of `background` requests whose
/// handlers all run (no limit on any stack).
pub async fn loaded<C: Conn>(
    conn: &C,
    rx: &mut Receivers,
    background: usize,
    samples: usize,
    text: &Arc<str>,
) -> Cancels {
    let held: FuturesUnordered<Box<dyn Parked>> = (0..background as u64)
        .map(|i| conn.park(1_000_000 + i, text))
        .collect();
    // The application awaits its requests in a task of its own (they are never answered here;
    // the runtime is dropped at the end of the run).
    tokio::spawn(async move {
        let mut held = held;
        while held.next().await.is_some() {}
    });
    within("the background handlers to start", async {
        for _ in 0..background {
            rx.started.recv().await.expect("the server reports starts");
        }
    })
    .await;
    let mut cancels = Cancels::default();
    for i in 0..samples as u64 {
        one_cancel(conn, rx, 2_000_000 + i, text, &mut cancels).await;
    }
    cancels
}

/// Heap bytes per in-flight request, measured in the client's process and reported by the
/// server's, with `requests` parked requests whose handlers all run. The same procedure for
/// every stack: a fresh connection, warmed by 32 round trips, one cancelled request and one
/// heap report; the caller's vector is allocated before the first reading; both readings are
/// taken with the connection idle but for the heap request itself.
pub async fn heap<C: Conn>(conn: &C, rx: &mut Receivers, requests: usize) -> (f64, f64) {
    let empty: Arc<str> = "".into();
    for _ in 0..32 {
        conn.call(empty.clone()).await;
    }
    let mut warm = Cancels::default();
    one_cancel(conn, rx, 0, &empty, &mut warm).await;
    let server_report = async |rx: &mut Receivers| {
        conn.heap().await;
        within("a heap report", rx.heap.recv())
            .await
            .expect("the server reports its heap")
    };
    server_report(rx).await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let mut held: Vec<Box<dyn Parked>> = Vec::with_capacity(requests);
    let client_before = crate::alloc::live_bytes();
    let server_before = server_report(rx).await;
    for i in 0..requests as u64 {
        held.push(conn.park(1 + i, &empty));
    }
    let mut started = 0;
    within(
        "the parked handlers to start",
        std::future::poll_fn(|cx| {
            for call in &mut held {
                if Pin::new(call).poll(cx).is_ready() {
                    panic!("a parked request was answered");
                }
            }
            while let Poll::Ready(Some(_)) = rx.started.poll_recv(cx) {
                started += 1;
            }
            if started == requests {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let client_after = crate::alloc::live_bytes();
    let server_after = server_report(rx).await;
    drop(held);
    let per = |after: f64, before: f64| (after - before) / requests as f64;
    (
        per(client_after as f64, client_before as f64),
        per(server_after as f64, server_before as f64),
    )
}
