//! The Redis cluster against a real `redis-server`: two or three [`Cluster`]s in one process,
//! each with a fake worker standing in for the registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit_gateway::cluster::{Cluster, LocalRuns, RemoteCancel, Settings};
use cancelkit_gateway::runs::record::{RunRecord, RunState, Tombstone, new_run_id, unix_now};
use cancelkit_tests::redis::RedisServer;
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long any condition may take to come true.
const DEADLINE: Duration = Duration::from_secs(10);

/// A fake worker: its runs and tombstones in maps, and the cancels it applied.
#[derive(Debug)]
struct Worker {
    name: String,
    records: Mutex<HashMap<String, RunRecord>>,
    tombstones: Mutex<Vec<Tombstone>>,
    applied: Mutex<Vec<(String, Option<String>)>>,
}

impl Worker {
    fn new(name: &str) -> Arc<Worker> {
        Arc::new(Worker {
            name: name.to_owned(),
            records: Mutex::default(),
            tombstones: Mutex::default(),
            applied: Mutex::default(),
        })
    }

    /// A live run of this worker's, known locally (not yet written to Redis).
    fn run(&self, id: RequestId) -> RunRecord {
        let record = RunRecord {
            run_id: new_run_id().to_string(),
            worker: self.name.clone(),
            owner: "alice".into(),
            request_id: id,
            name: Some("demo-sleep".into()),
            // Whole milliseconds: serde_json (without `float_roundtrip`) may read a float with
            // more digits back one ulp off, and the tests compare records whole.
            registered_at: (unix_now() * 1000.0).round() / 1000.0,
            state: RunState::Running,
            cancelled_at: None,
            cancel_reason: None,
            cancel_source: None,
        };
        self.records
            .lock()
            .unwrap()
            .insert(record.run_id.clone(), record.clone());
        record
    }

    fn applied(&self, run_id: &str) -> Option<Option<String>> {
        self.applied
            .lock()
            .unwrap()
            .iter()
            .find(|(id, _)| id == run_id)
            .map(|(_, reason)| reason.clone())
    }

    fn has_tombstone(&self, id: &str) -> bool {
        self.tombstones.lock().unwrap().iter().any(|t| t.id == id)
    }
}

impl LocalRuns for Worker {
    fn apply_cancel(&self, run_id: &str, reason: Option<String>) -> bool {
        let mut records = self.records.lock().unwrap();
        let Some(record) = records.get_mut(run_id) else {
            return false;
        };
        match record.state {
            RunState::Running => {
                record.state = RunState::Cancelled;
                record.cancelled_at = Some(unix_now());
                record.cancel_reason = reason.clone();
                self.applied
                    .lock()
                    .unwrap()
                    .push((run_id.to_owned(), reason));
                true
            }
            RunState::Cancelled => true,
            _ => false,
        }
    }

    fn add_tombstone(&self, tombstone: Tombstone) {
        let mut tombstones = self.tombstones.lock().unwrap();
        if !tombstones.iter().any(|t| t.id == tombstone.id) {
            tombstones.push(tombstone);
        }
    }

    fn records(&self) -> Vec<RunRecord> {
        self.records.lock().unwrap().values().cloned().collect()
    }

    fn tombstones(&self) -> Vec<Tombstone> {
        self.tombstones.lock().unwrap().clone()
    }
}

fn settings(url: &str, worker: &str) -> Settings {
    Settings {
        url: url.to_owned(),
        worker: worker.to_owned(),
        retention: Duration::from_secs(60),
        run_ttl: Duration::from_secs(60),
        tombstone_ttl: Duration::from_secs(30),
        ack_timeout: Duration::from_secs(2),
        lookup_timeout: Duration::from_millis(500),
        max_pending: 64,
    }
}

/// A worker and its cluster.
struct Node {
    worker: Arc<Worker>,
    cluster: Cluster,
}

impl Node {
    fn start(url: &str, name: &str) -> Node {
        Node::with(settings(url, name))
    }

    fn with(settings: Settings) -> Node {
        let worker = Worker::new(&settings.worker);
        let weak: Weak<dyn LocalRuns> = Arc::downgrade(&(worker.clone() as Arc<dyn LocalRuns>));
        let cluster = Cluster::start(settings, weak);
        Node { worker, cluster }
    }

    /// A live run, known locally and recorded in Redis.
    fn run(&self, id: RequestId) -> RunRecord {
        let record = self.worker.run(id);
        self.cluster.record(&record);
        record
    }

    async fn connected(&self) -> &Node {
        let cluster = self.cluster.clone();
        wait_until("the cluster connects", || cluster.is_connected()).await;
        self
    }
}

/// Polls `condition` until it holds; panics naming `what` after [`DEADLINE`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn tombstone(selector: &str) -> Tombstone {
    Tombstone {
        id: format!("t-{}", new_run_id()),
        selector: selector.to_owned(),
        scope: None,
        reason: Some("early".into()),
        expires_at: unix_now() + 30.0,
    }
}

/// A TCP proxy to Redis that can cut one worker off (drop its connections, refuse new ones)
/// while the others stay connected.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    pumps: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let pumps = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn({
            let (cut, pumps) = (cut.clone(), pumps.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        continue;
                    }
                    let pump = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    pumps.lock().unwrap().push(pump);
                }
            }
        });
        Proxy {
            port,
            cut,
            pumps,
            accept,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for pump in self.pumps.lock().unwrap().drain(..) {
            pump.abort();
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_cancel_reaches_the_owner_and_resolves_stopped() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    a.connected().await;
    b.connected().await;
    let run = a.run(RequestId::Number(7));

    let outcome = b.cluster.cancel_remote(&run, Some("operator".into())).await;

    assert_eq!(outcome, RemoteCancel::Stopped);
    assert_eq!(a.worker.applied(&run.run_id), Some(Some("operator".into())));
    assert_eq!(b.worker.applied(&run.run_id), None, "b does not own it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_message_is_exactly_contextforges_payload_and_a_marker_is_stored() {
    let redis = RedisServer::start();
    let mut raw = redis::Client::open(redis.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    raw.subscribe("cancellation:cancel").await.unwrap();
    let mut settings = settings(&redis.url(), "b");
    settings.ack_timeout = Duration::from_millis(200);
    let b = Node::with(settings);
    b.connected().await;
    // A run of a worker that is not there: nobody acks.
    let run = Worker::new("gone").run(RequestId::String("x".into()));

    let outcome = b.cluster.cancel_remote(&run, Some("why".into())).await;
    assert_eq!(outcome, RemoteCancel::Sent);

    let message = tokio::time::timeout(DEADLINE, raw.on_message().next())
        .await
        .expect("a message on cancellation:cancel")
        .expect("the subscription is open");
    let payload: String = message.get_payload().unwrap();
    assert_eq!(
        payload,
        format!(r#"{{"run_id":"{}","reason":"why"}}"#, run.run_id)
    );
    let marker = redis.command(&["GET", &format!("cancelkit:cancel:{}", run.run_id)]);
    assert_eq!(marker, r#"{"reason":"why"}"#);
    let ttl: i64 = redis
        .command(&["PTTL", &format!("cancelkit:cancel:{}", run.run_id)])
        .parse()
        .unwrap();
    assert!(
        ttl > 0 && ttl <= 30_000,
        "the marker has the tombstone ttl: {ttl}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_by_run_id_and_by_typed_bare_ids_drops_expired_and_unreadable_records() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    let c = Node::start(&redis.url(), "c");
    a.connected().await;
    b.connected().await;
    c.connected().await;
    let number = a.run(RequestId::Number(1));
    let string = b.run(RequestId::String("1".into()));
    let other = b.run(RequestId::String("x".into()));
    let gone = a.run(RequestId::Number(1));
    wait_until("the writes are sent", || {
        a.cluster.pending_writes() == 0 && b.cluster.pending_writes() == 0
    })
    .await;
    let ttl: i64 = redis
        .command(&["PTTL", "cancelkit:rid:n:1"])
        .parse()
        .unwrap();
    assert!(ttl > 60_000, "the index set has a ttl: {ttl}");
    // `gone`'s record expired; a garbage record sits in the string set.
    redis.command(&["DEL", &format!("cancelkit:run:{}", gone.run_id)]);
    let garbage = new_run_id().to_string();
    redis.command(&["SET", &format!("cancelkit:run:{garbage}"), "not json"]);
    redis.command(&["ZADD", "cancelkit:rid:s:1", "99999999999999", &garbage]);

    let mut found = c.cluster.find("1", None).await.unwrap();
    found.sort_by_key(|r| matches!(r.request_id, RequestId::String(_)));
    assert_eq!(found, vec![number.clone(), string.clone()]);
    assert_eq!(found[0].request_id, RequestId::Number(1));
    assert_eq!(found[1].request_id, RequestId::String("1".into()));

    assert_eq!(
        c.cluster.find(&number.run_id, None).await.unwrap(),
        vec![number.clone()]
    );
    assert_eq!(
        a.cluster.find(&other.run_id, None).await.unwrap(),
        vec![other.clone()]
    );
    assert_eq!(c.cluster.find("x", None).await.unwrap(), vec![other]);
    assert_eq!(c.cluster.find("2", None).await.unwrap(), vec![]);
    assert_eq!(c.cluster.find(&gone.run_id, None).await.unwrap(), vec![]);
    // The expired id is taken out of its set.
    wait_until("the expired id is pruned", || {
        !redis
            .command(&["ZRANGE", "cancelkit:rid:n:1", "0", "-1"])
            .contains(&gone.run_id)
    })
    .await;
    assert!(
        redis
            .command(&["ZRANGE", "cancelkit:rid:n:1", "0", "-1"])
            .contains(&number.run_id)
    );

    // A user's lookup reads the user's own index: alice's runs are there (hex "alice"), and an
    // entry whose time is up leaves the index with the next write to it.
    let own = "cancelkit:urid:616c696365:n:1";
    assert!(
        redis
            .command(&["ZRANGE", own, "0", "-1"])
            .contains(&number.run_id)
    );
    let mut own_found = c.cluster.find("1", Some("alice")).await.unwrap();
    own_found.sort_by_key(|r| matches!(r.request_id, RequestId::String(_)));
    assert_eq!(own_found, vec![number.clone(), string.clone()]);
    assert_eq!(c.cluster.find("1", Some("bob")).await.unwrap(), vec![]);
    redis.command(&["ZADD", own, "1", "run-expired-long-ago"]);
    let _later = a.run(RequestId::Number(1));
    wait_until("the writes are sent", || a.cluster.pending_writes() == 0).await;
    assert!(
        !redis
            .command(&["ZRANGE", own, "0", "-1"])
            .contains("run-expired-long-ago"),
        "an index drops its expired entries on every write"
    );

    // A key of the wrong type where an index set belongs costs only that index entry.
    redis.command(&[
        "SET",
        "cancelkit:rid:s:broken",
        "a string, not a sorted set",
    ]);
    let broken = a.run(RequestId::String("broken".into()));
    let after = a.run(RequestId::String("after".into()));
    wait_until("the writes are sent", || a.cluster.pending_writes() == 0).await;
    assert_eq!(c.cluster.find("broken", None).await.unwrap(), vec![]);
    assert_eq!(
        c.cluster.find(&broken.run_id, None).await.unwrap(),
        vec![broken]
    );
    assert_eq!(c.cluster.find("after", None).await.unwrap(), vec![after]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_when_the_cancel_went_out_applies_it_from_the_marker_after_reconnecting() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port()).await;
    let a = Node::start(&proxy.url(), "a");
    let mut settings = settings(&redis.url(), "b");
    settings.ack_timeout = Duration::from_millis(300);
    let b = Node::with(settings);
    a.connected().await;
    b.connected().await;
    let run = a.run(RequestId::Number(3));
    wait_until("a's record is written", || a.cluster.pending_writes() == 0).await;

    proxy.cut();
    wait_until("a notices it is cut off", || !a.cluster.is_connected()).await;
    // Published while a cannot hear it.
    assert_eq!(
        b.cluster.cancel_remote(&run, Some("late".into())).await,
        RemoteCancel::Sent
    );
    assert_eq!(a.worker.applied(&run.run_id), None);

    proxy.restore();
    wait_until("a applies the marked cancel", || {
        a.worker.applied(&run.run_id).is_some()
    })
    .await;
    assert_eq!(a.worker.applied(&run.run_id), Some(Some("late".into())));
    assert!(a.cluster.is_connected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_gone_local_calls_return_at_once_or_within_their_timeouts() {
    let mut redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    a.connected().await;
    let run = a.run(RequestId::Number(1));
    let other = Worker::new("b").run(RequestId::Number(2));

    redis.kill();
    wait_until("a notices redis is gone", || !a.cluster.is_connected()).await;

    let started = Instant::now();
    a.cluster.record(&run);
    a.cluster.tombstone(&tombstone("9"));
    a.cluster.ack(&run.run_id);
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "{:?}",
        started.elapsed()
    );

    let limit = settings("", "").lookup_timeout + Duration::from_millis(200);
    let started = Instant::now();
    assert!(a.cluster.find("1", None).await.is_err());
    assert!(
        started.elapsed() < limit,
        "find took {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    assert_eq!(
        a.cluster.cancel_remote(&other, None).await,
        RemoteCancel::Deferred
    );
    assert!(
        started.elapsed() < limit,
        "cancel_remote took {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    assert!(
        a.cluster.claim_tombstone("t-unknown").await,
        "the local copy decides"
    );
    assert!(
        started.elapsed() < limit,
        "claim_tombstone took {:?}",
        started.elapsed()
    );
    assert!(!a.cluster.is_connected());
    assert!(a.cluster.pending_writes() >= 3, "the writes wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_restarts_empty_records_tombstones_and_deferred_cancels_come_back() {
    let mut redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    a.connected().await;
    b.connected().await;
    let a_run = a.run(RequestId::String("job".into()));
    let b_run = b.run(RequestId::Number(5));
    let early = tombstone("later");
    a.worker.add_tombstone(early.clone());
    a.cluster.tombstone(&early);
    wait_until("b hears of the tombstone", || {
        b.worker.has_tombstone(&early.id)
    })
    .await;

    redis.kill();
    wait_until("both notice", || {
        !a.cluster.is_connected() && !b.cluster.is_connected()
    })
    .await;
    assert_eq!(
        a.cluster
            .cancel_remote(&b_run, Some("while away".into()))
            .await,
        RemoteCancel::Deferred
    );
    let b_late = b.run(RequestId::Number(6));
    redis.restart();
    assert_eq!(redis.command(&["DBSIZE"]), "0", "the new server is empty");

    wait_until("both reconnect", || {
        a.cluster.is_connected() && b.cluster.is_connected()
    })
    .await;
    wait_until("b applies the deferred cancel", || {
        b.worker.applied(&b_run.run_id).is_some()
    })
    .await;
    assert_eq!(
        b.worker.applied(&b_run.run_id),
        Some(Some("while away".into()))
    );
    let c = Node::start(&redis.url(), "c");
    c.connected().await;
    assert_eq!(c.cluster.find("job", None).await.unwrap(), vec![a_run]);
    assert_eq!(
        c.cluster.find(&b_late.run_id, None).await.unwrap(),
        vec![b_late]
    );
    assert!(
        c.worker.has_tombstone(&early.id),
        "a new worker reads the tombstone a wrote back"
    );
    // The tombstone is there to be claimed, once.
    assert!(c.cluster.claim_tombstone(&early.id).await);
    assert!(!b.cluster.claim_tombstone(&early.id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_is_published_and_claimed_by_one_worker_only() {
    let mut redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    let c = Node::start(&redis.url(), "c");
    a.connected().await;
    b.connected().await;
    c.connected().await;
    let shared = tombstone("1");
    a.cluster.tombstone(&shared);
    wait_until("b and c hear of it", || {
        b.worker.has_tombstone(&shared.id) && c.worker.has_tombstone(&shared.id)
    })
    .await;
    let (by_b, by_c) = tokio::join!(
        b.cluster.claim_tombstone(&shared.id),
        c.cluster.claim_tombstone(&shared.id)
    );
    assert!(by_b ^ by_c, "exactly one claim wins: b {by_b}, c {by_c}");

    // A tombstone claimed before it reached Redis never does.
    redis.kill();
    wait_until("a notices", || !a.cluster.is_connected()).await;
    let local = tombstone("2");
    a.cluster.tombstone(&local);
    assert!(a.cluster.claim_tombstone(&local.id).await);
    redis.restart();
    a.connected().await;
    wait_until("a's queue is flushed", || a.cluster.pending_writes() == 0).await;
    let key = format!("cancelkit:tombstone:{}", local.id);
    assert_eq!(redis.command(&["EXISTS", &key]), "0", "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_waiting_for_redis_are_coalesced_per_run_and_bounded_oldest_first() {
    let mut redis = RedisServer::start();
    let mut settings = settings(&redis.url(), "a");
    settings.max_pending = 4;
    let a = Node::with(settings);
    a.connected().await;
    redis.kill();
    wait_until("a notices", || !a.cluster.is_connected()).await;

    let runs: Vec<RunRecord> = (0..6).map(|n| a.worker.run(RequestId::Number(n))).collect();
    for run in &runs {
        a.cluster.record(run);
    }
    assert_eq!(a.cluster.pending_writes(), 4, "the bound holds");
    let mut coalesced = a.worker.run(RequestId::Number(100));
    for n in 0..10 {
        coalesced.name = Some(format!("v{n}"));
        a.cluster.record(&coalesced);
    }
    assert_eq!(a.cluster.pending_writes(), 4, "one record per run waits");

    // Only the queue is written back: forget the local runs.
    a.worker.records.lock().unwrap().clear();
    redis.restart();
    a.connected().await;
    wait_until("a's queue is flushed", || a.cluster.pending_writes() == 0).await;
    for (n, run) in runs.iter().enumerate() {
        let found = a.cluster.find(&run.run_id, None).await.unwrap();
        assert_eq!(
            found.len(),
            usize::from(n >= 3),
            "run {n}: the oldest went first"
        );
    }
    assert_eq!(
        a.cluster.find(&coalesced.run_id, None).await.unwrap(),
        vec![coalesced]
    );
}

// One thread: the link cannot send the last record between `record` and `shutdown`, only after.
#[tokio::test(flavor = "current_thread")]
async fn shutting_down_sends_the_last_writes_and_leaves_the_channels() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    a.connected().await;
    b.connected().await;
    let subscribers = || redis.command(&["PUBSUB", "NUMSUB", "cancellation:cancel"]);
    assert_eq!(subscribers(), "cancellation:cancel\n2");

    let last = a.run(RequestId::Number(1));
    a.cluster.shutdown();
    assert!(!a.cluster.is_connected());
    wait_until("a leaves the channels", || {
        subscribers() == "cancellation:cancel\n1"
    })
    .await;
    assert_eq!(
        b.cluster.find(&last.run_id, None).await.unwrap(),
        vec![last]
    );
}
