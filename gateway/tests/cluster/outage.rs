//! Cancels while Redis is away: none dropped however long it lasts, none evicted by another
//! user's, and a tombstone stops one run at most when its claims meet Redis errors.

use std::time::Duration;

use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit_gateway::cluster::{QueueFull, RemoteCancel};
use cancelkit_gateway::runs::record::{Tombstone, unix_now};
use cancelkit_tests::redis::RedisServer;

use super::fake::{Node, Proxy, Worker, settings, tombstone, wait_until};

/// `scope`'s tombstone for `selector` (`None`: an admin's), living `ttl`.
fn scoped(selector: &str, scope: Option<&str>, ttl: Duration) -> Tombstone {
    Tombstone {
        scope: scope.map(str::to_owned),
        made_at: unix_now(),
        expires_at: unix_now() + ttl.as_secs_f64(),
        ..tombstone(selector)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn cancels_queued_longer_than_their_ttl_are_delivered_when_redis_comes_back() {
    let mut redis = RedisServer::start();
    let ttl = Duration::from_secs(1);
    let mut a_settings = settings(&redis.url(), "a");
    a_settings.tombstone_ttl = ttl;
    let a = Node::with(a_settings);
    let b = Node::start(&redis.url(), "b");
    a.connected().await;
    b.connected().await;
    let b_run = b.run(RequestId::Number(5));
    wait_until("b's record is written", || b.cluster.pending_writes() == 0).await;

    redis.kill();
    wait_until("both notice", || {
        !a.cluster.is_connected() && !b.cluster.is_connected()
    })
    .await;
    let queued = a
        .cluster
        .cancel_remote(&b_run, Some("queued".into()), None)
        .await;
    assert_eq!(queued, Ok(RemoteCancel::Deferred));
    let early = scoped("later", None, ttl);
    a.cluster.tombstone(&early).unwrap();
    // The outage outlasts the tombstone ttl.
    tokio::time::sleep(ttl * 3).await;
    redis.restart();

    wait_until("b applies the cancel queued 3 s ago", || {
        b.worker.applied(&b_run.run_id).is_some()
    })
    .await;
    assert_eq!(b.worker.applied(&b_run.run_id), Some(Some("queued".into())));
    wait_until("b hears of the tombstone", || {
        b.worker.has_tombstone(&early.id)
    })
    .await;
    let key = format!("cancelkit:tombstone:{}", early.id);
    let left: i64 = redis.command(&["PTTL", &key]).parse().unwrap();
    assert!(
        left > 500,
        "the tombstone lives its ttl from when it was written: {left} ms"
    );
    let stored: Tombstone = serde_json::from_str(&redis.command(&["GET", &key])).unwrap();
    assert!(
        stored.expires_at > unix_now() + 0.5,
        "its expiry moved by the time it waited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn at_the_bound_new_cancels_are_refused_and_queued_ones_never_evicted() {
    let mut redis = RedisServer::start();
    // A queue of 16 writes: a user's share is 2 cancels, users' together 8.
    let mut a_settings = settings(&redis.url(), "a");
    a_settings.max_pending = 16;
    let a = Node::with(a_settings);
    a.connected().await;
    let remote = Worker::new("b").run(RequestId::Number(1));
    redis.kill();
    wait_until("a notices", || !a.cluster.is_connected()).await;

    let hour = Duration::from_secs(3600);
    let mut queued = Vec::new();
    // The admin's first: they must survive whatever users do next.
    for n in 0..4 {
        let t = scoped(&format!("admin-{n}"), None, hour);
        a.cluster.tombstone(&t).unwrap();
        queued.push(t.id);
    }
    let alice = scoped("alice-1", Some("alice"), hour);
    a.cluster.tombstone(&alice).unwrap();
    queued.push(alice.id.clone());
    assert_eq!(
        a.cluster
            .cancel_remote(&remote, Some("alice".into()), Some("alice"))
            .await,
        Ok(RemoteCancel::Deferred)
    );
    // Alice is at her share: refused, nothing evicted.
    assert_eq!(
        a.cluster.tombstone(&scoped("alice-2", Some("alice"), hour)),
        Err(QueueFull::User { limit: 2 })
    );
    // Mallory floods: her share, then users' together...
    let mut refused = 0;
    for n in 0..40 {
        let mallory = format!("mallory-{}", n % 20);
        match a.cluster.tombstone(&scoped("x", Some(&mallory), hour)) {
            Ok(()) => {}
            Err(QueueFull::User { .. } | QueueFull::Users { .. }) => refused += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(refused, 40 - 6, "users together hold 8 cancels at most");
    // ... and records, many of them: they are what goes.
    for n in 0..100 {
        a.worker.run(RequestId::Number(1000 + n));
        let record = a.worker.run(RequestId::Number(n));
        a.cluster.record(&record);
    }
    // The admin still has room: 12 cancels wait, 4 more fit.
    for n in 0..4 {
        let admin = scoped(&format!("admin-late-{n}"), None, hour);
        a.cluster.tombstone(&admin).unwrap();
        queued.push(admin.id);
    }
    assert_eq!(
        a.cluster.tombstone(&scoped("admin-over", None, hour)),
        Err(QueueFull::All { limit: 16 }),
        "16 cancels wait: the bound"
    );

    redis.restart();
    a.connected().await;
    wait_until("a's queue is flushed", || a.cluster.pending_writes() == 0).await;
    for id in &queued {
        let key = format!("cancelkit:tombstone:{id}");
        assert_eq!(redis.command(&["EXISTS", &key]), "1", "{key} was delivered");
    }
    let marker = format!("cancelkit:cancel:{}", remote.run_id);
    assert_eq!(
        redis.command(&["EXISTS", &marker]),
        "1",
        "alice's cancel too"
    );
    // Every record was written back all the same (the resync writes them).
    let records: i64 = redis
        .command(&["EVAL", "return #redis.call('KEYS', 'cancelkit:run:*')", "0"])
        .parse()
        .unwrap();
    assert_eq!(records, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_tombstone_stops_at_most_one_run_when_its_claims_meet_redis_errors() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port()).await;
    let a = Node::start(&proxy.url(), "a");
    let b = Node::start(&redis.url(), "b");
    let c = Node::start(&redis.url(), "c");
    a.connected().await;
    b.connected().await;
    c.connected().await;

    // A is cut off when the run that matches registers there; B claims while up.
    let first = tombstone("job-1");
    c.cluster.tombstone(&first).unwrap();
    wait_until("a and b hear of it", || {
        a.worker.has_tombstone(&first.id) && b.worker.has_tombstone(&first.id)
    })
    .await;
    proxy.cut();
    wait_until("a notices", || !a.cluster.is_connected()).await;
    let a_run = a.run(RequestId::String("job-1".into()));
    let b_run = b.run(RequestId::String("job-1".into()));
    assert!(
        !a.cluster.claim_tombstone(&first, &a_run.run_id).await,
        "no claim while cut off"
    );
    assert!(b.cluster.claim_tombstone(&first, &b_run.run_id).await);
    proxy.restore();
    a.connected().await;
    wait_until("a's deferred claim is made", || {
        a.cluster.pending_writes() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.worker.applied(&a_run.run_id), None, "b's claim won");

    // Redis stalls while both claim: each times out; once it answers, one claim wins.
    let second = tombstone("job-2");
    c.cluster.tombstone(&second).unwrap();
    wait_until("a and b hear of it", || {
        a.worker.has_tombstone(&second.id) && b.worker.has_tombstone(&second.id)
    })
    .await;
    let a_run = a.run(RequestId::String("job-2".into()));
    let b_run = b.run(RequestId::String("job-2".into()));
    redis.command(&["CLIENT", "PAUSE", "1500", "ALL"]);
    let (by_a, by_b) = tokio::join!(
        a.cluster.claim_tombstone(&second, &a_run.run_id),
        b.cluster.claim_tombstone(&second, &b_run.run_id)
    );
    assert!(!by_a && !by_b, "neither claim answered in time: both wait");
    wait_until("one claim wins after the pause", || {
        a.worker.applied(&a_run.run_id).is_some() || b.worker.applied(&b_run.run_id).is_some()
    })
    .await;
    wait_until("both queues are flushed", || {
        a.cluster.is_connected()
            && b.cluster.is_connected()
            && a.cluster.pending_writes() == 0
            && b.cluster.pending_writes() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let applied = usize::from(a.worker.applied(&a_run.run_id).is_some())
        + usize::from(b.worker.applied(&b_run.run_id).is_some());
    assert_eq!(applied, 1, "one tombstone, one run stopped");
    assert_eq!(a.worker.applied_count() + b.worker.applied_count(), 1);
}
