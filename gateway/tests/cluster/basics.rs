//! What the cluster does while Redis is up, and the basics of an outage.

use std::time::{Duration, Instant};

use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit_gateway::cluster::{LocalRuns, RemoteCancel};
use cancelkit_gateway::runs::record::{RunRecord, RunState, new_run_id};
use cancelkit_tests::redis::RedisServer;
use futures_util::StreamExt;

use super::fake::{DEADLINE, Node, Proxy, Worker, settings, tombstone, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_remote_cancel_reaches_the_owner_and_resolves_stopped() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    a.connected().await;
    b.connected().await;
    let run = a.run(RequestId::Number(7));

    let outcome = b
        .cluster
        .cancel_remote(&run, Some("operator".into()), None)
        .await;

    assert_eq!(outcome, Ok(RemoteCancel::Stopped));
    assert_eq!(a.worker.applied(&run.run_id), Some(Some("operator".into())));
    assert_eq!(b.worker.applied(&run.run_id), None, "b does not own it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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

    let outcome = b
        .cluster
        .cancel_remote(&run, Some("why".into()), None)
        .await;
    assert_eq!(outcome, Ok(RemoteCancel::Sent));

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
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
        b.cluster
            .cancel_remote(&run, Some("late".into()), None)
            .await,
        Ok(RemoteCancel::Sent)
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
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
    a.cluster.tombstone(&tombstone("9")).unwrap();
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
        a.cluster.cancel_remote(&other, None, None).await,
        Ok(RemoteCancel::Deferred)
    );
    assert!(
        started.elapsed() < limit,
        "cancel_remote took {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    assert!(
        !a.cluster
            .claim_tombstone(&tombstone("written-elsewhere"), &run.run_id)
            .await,
        "a claim fails closed while redis is away"
    );
    assert!(
        started.elapsed() < limit,
        "claim_tombstone took {:?}",
        started.elapsed()
    );
    assert!(!a.cluster.is_connected());
    assert!(
        a.cluster.pending_writes() >= 4,
        "the writes wait, the claim too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
    a.cluster.tombstone(&early).unwrap();
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
            .cancel_remote(&b_run, Some("while away".into()), None)
            .await,
        Ok(RemoteCancel::Deferred)
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
    let c_run = c.run(RequestId::String("later".into()));
    let b_run = b.run(RequestId::String("later".into()));
    assert!(c.cluster.claim_tombstone(&early, &c_run.run_id).await);
    assert!(!b.cluster.claim_tombstone(&early, &b_run.run_id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_tombstone_is_published_and_claimed_by_one_worker_only() {
    let mut redis = RedisServer::start();
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&redis.url(), "b");
    let c = Node::start(&redis.url(), "c");
    a.connected().await;
    b.connected().await;
    c.connected().await;
    let shared = tombstone("1");
    a.cluster.tombstone(&shared).unwrap();
    wait_until("b and c hear of it", || {
        b.worker.has_tombstone(&shared.id) && c.worker.has_tombstone(&shared.id)
    })
    .await;
    let (b_run, c_run) = (b.run(RequestId::Number(1)), c.run(RequestId::Number(1)));
    let (by_b, by_c) = tokio::join!(
        b.cluster.claim_tombstone(&shared, &b_run.run_id),
        c.cluster.claim_tombstone(&shared, &c_run.run_id)
    );
    assert!(by_b ^ by_c, "exactly one claim wins: b {by_b}, c {by_c}");

    // A tombstone claimed before it reached Redis never does.
    redis.kill();
    wait_until("a notices", || !a.cluster.is_connected()).await;
    let local = tombstone("2");
    a.cluster.tombstone(&local).unwrap();
    let a_run = a.run(RequestId::Number(2));
    assert!(a.cluster.claim_tombstone(&local, &a_run.run_id).await);
    redis.restart();
    a.connected().await;
    wait_until("a's queue is flushed", || a.cluster.pending_writes() == 0).await;
    let key = format!("cancelkit:tombstone:{}", local.id);
    assert_eq!(redis.command(&["EXISTS", &key]), "0", "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
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
    // Written; and A took its heartbeat with it, so the run it left running is lost.
    let lost = RunRecord {
        state: RunState::Lost,
        ..last.clone()
    };
    assert_eq!(
        b.cluster.find(&last.run_id, None).await.unwrap(),
        vec![lost]
    );
    assert_eq!(redis.command(&["EXISTS", "cancelkit:worker:a"]), "0");
}
