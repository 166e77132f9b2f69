//! What Redis holds over time: cancels written again after it restarts empty, keys that go
//! with what they index, and a resync that gets a large registry written however often the
//! link breaks.

use std::time::{Duration, Instant};

use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit_gateway::cluster::{LocalRuns, RemoteCancel};
use cancelkit_gateway::runs::record::RunState;
use cancelkit_tests::redis::RedisServer;

use super::fake::{Node, Proxy, Worker, settings, tombstone, wait_until};

/// Keys matching `pattern` (a test server holds few enough for `KEYS`).
fn keys(redis: &RedisServer, pattern: &str) -> Vec<String> {
    let text = redis.command(&["KEYS", pattern]);
    text.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// How many keys match `pattern`, counted in Redis.
fn count(redis: &RedisServer, pattern: &str) -> usize {
    let script = format!("return #redis.call('KEYS', '{pattern}')");
    redis.command(&["EVAL", &script, "0"]).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn after_redis_restarts_empty_cancels_not_acked_yet_are_written_again() {
    let mut redis = RedisServer::start();
    let mut a_settings = settings(&redis.url(), "a");
    a_settings.ack_timeout = Duration::from_millis(200);
    let a = Node::with(a_settings);
    a.connected().await;
    // B's run, while B is away: nobody acks the cancel.
    let b_worker = Worker::new("b");
    let b_run = b_worker.run(RequestId::Number(4));
    assert_eq!(
        a.cluster
            .cancel_remote(&b_run, Some("marked".into()), None)
            .await,
        Ok(RemoteCancel::Sent)
    );
    // A tombstone A made, and a copy of one another worker made.
    let made = tombstone("mine");
    a.worker.add_tombstone(made.clone());
    a.cluster.tombstone(&made).unwrap();
    let copy = tombstone("theirs");
    a.worker.add_tombstone(copy.clone());
    wait_until("a's writes are sent", || a.cluster.pending_writes() == 0).await;
    let marker = format!("cancelkit:cancel:{}", b_run.run_id);
    assert_eq!(redis.command(&["EXISTS", &marker]), "1");

    redis.restart();
    assert_eq!(redis.command(&["DBSIZE"]), "0");
    a.connected().await;
    assert_eq!(
        redis.command(&["EXISTS", &marker]),
        "1",
        "the marker is written again"
    );
    let left: i64 = redis.command(&["PTTL", &marker]).parse().unwrap();
    assert!(
        left > 0 && left <= 30_000,
        "with what was left of its life: {left}"
    );
    let made_key = format!("cancelkit:tombstone:{}", made.id);
    assert_eq!(redis.command(&["EXISTS", &made_key]), "1");
    let copy_key = format!("cancelkit:tombstone:{}", copy.id);
    assert_eq!(
        redis.command(&["EXISTS", &copy_key]),
        "0",
        "only its maker writes a tombstone again (it may have been claimed)"
    );

    // B comes back: the marker stops its run.
    let b = Node::of(b_worker, settings(&redis.url(), "b"));
    b.connected().await;
    assert_eq!(b.worker.applied(&b_run.run_id), Some(Some("marked".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn index_keys_expire_with_the_records_they_name_and_running_records_are_leased() {
    let redis = RedisServer::start();
    let mut a_settings = settings(&redis.url(), "a");
    a_settings.retention = Duration::from_secs(1);
    a_settings.heartbeat_ttl = Duration::from_millis(900);
    let a = Node::with(a_settings);
    a.connected().await;
    let running = a.run(RequestId::String("still-running".into()));
    for n in 0..20 {
        let id = if n % 2 == 0 {
            RequestId::String(format!("id-{n}"))
        } else {
            RequestId::Number(n)
        };
        let mut record = a.run(id);
        record.state = RunState::Completed;
        a.worker
            .records
            .lock()
            .unwrap()
            .insert(record.run_id.clone(), record.clone());
        a.cluster.record(&record);
    }
    wait_until("the writes are sent", || a.cluster.pending_writes() == 0).await;
    assert_eq!(keys(&redis, "cancelkit:rid:*").len(), 21);
    assert_eq!(keys(&redis, "cancelkit:urid:*").len(), 21);
    let running_key = format!("cancelkit:run:{}", running.run_id);
    let lease: i64 = redis.command(&["PTTL", &running_key]).parse().unwrap();
    assert!(
        lease > 0 && lease <= 1_900,
        "a running record lives a lease (heartbeat ttl + retention), not a day: {lease} ms"
    );

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = keys(&redis, "cancelkit:*")
            .into_iter()
            .filter(|k| !k.contains(&running.run_id) && !k.contains("still-running"))
            .filter(|k| k != "cancelkit:worker:a")
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "keys outlive the records they index: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The running record's lease is renewed meanwhile: it is still there, as is its index.
    assert_eq!(redis.command(&["EXISTS", &running_key]), "1");
    assert_eq!(keys(&redis, "cancelkit:rid:s:still-running").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_resync_writes_100000_retained_runs_however_often_the_link_breaks() {
    const RUNS: usize = 100_000;
    let redis = RedisServer::start();
    let worker = Worker::new("a");
    {
        let template = worker.run(RequestId::Number(0));
        let mut records = worker.records.lock().unwrap();
        records.clear();
        for n in 0..RUNS {
            let mut record = template.clone();
            record.run_id = format!("run-{n:032x}");
            record.request_id = RequestId::Number((n % 100) as i64);
            record.state = RunState::Completed;
            records.insert(record.run_id.clone(), record);
        }
    }
    // Every connection to Redis is cut a second after it opened.
    let proxy = Proxy::with_lifetime(redis.port(), Some(Duration::from_secs(1))).await;
    let started = Instant::now();
    let _a = Node::of(worker, settings(&proxy.url(), "a"));
    let deadline = started + Duration::from_secs(60);
    loop {
        let written = count(&redis, "cancelkit:run:*");
        if written == RUNS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{written} of {RUNS} records written in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("{RUNS} records written in {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_running_record_reads_lost_once_its_worker_stops_answering_or_restarts() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port()).await;
    let a = Node::start(&redis.url(), "a");
    let b = Node::start(&proxy.url(), "b");
    a.connected().await;
    b.connected().await;
    let run = b.run(RequestId::Number(9));
    wait_until("b's record is written", || b.cluster.pending_writes() == 0).await;
    let state = || async { a.cluster.find(&run.run_id, None).await.unwrap()[0].state };
    assert_eq!(state().await, RunState::Running);

    // B stops answering (cut off: no heartbeat) for longer than its heartbeat ttl (3 s).
    proxy.cut();
    let deadline = Instant::now() + Duration::from_secs(10);
    while state().await != RunState::Lost {
        assert!(Instant::now() < deadline, "the run never reads lost");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A cancel of a lost run is stored and published, and answered at once (no ack awaited).
    let started = Instant::now();
    let sent = a.cluster.cancel_remote(&run, None, None).await;
    let record = a.cluster.find(&run.run_id, None).await.unwrap().remove(0);
    assert_eq!(record.state, RunState::Lost);
    let sent_lost = a
        .cluster
        .cancel_remote(&record, Some("late".into()), None)
        .await;
    assert_eq!(sent_lost, Ok(RemoteCancel::Sent));
    assert!(
        started.elapsed() < Duration::from_millis(2_900),
        "one ack wait at most: {:?}",
        started.elapsed()
    );
    assert_eq!(sent, Ok(RemoteCancel::Sent));

    // B comes back: its run is running again, and the stored cancel reaches it.
    proxy.restore();
    b.connected().await;
    wait_until("b applies the cancel", || {
        b.worker.applied(&run.run_id).is_some()
    })
    .await;

    // A worker restarted under the same id: the runs of its predecessor are lost.
    let old = b.run(RequestId::Number(10));
    wait_until("b's record is written", || b.cluster.pending_writes() == 0).await;
    drop(b);
    let again = Node::start(&redis.url(), "b");
    again.connected().await;
    let found = a.cluster.find(&old.run_id, None).await.unwrap();
    assert_eq!(found[0].state, RunState::Lost, "{found:?}");
}
