//! Chaos: three worker processes on one real `redis-server`, slow calls and cancels in flight
//! (each cancel sent to another worker than the run's) while a worker is frozen (SIGSTOP) and
//! thawed, Redis is killed and restarted empty (for longer than the tombstone ttl), and a
//! worker is killed (SIGKILL). At the end every cancel answered `cancelled` or `queued` was
//! applied (its call answered -32800, or its status says `cancelled`) or is visibly reported
//! (its worker was killed and its status says `lost`), no run nobody cancelled was cancelled,
//! and a cancel that waited for its run (a tombstone) stopped one run of the two it matched.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cancelkit_tests::redis::RedisServer;
use serde_json::{Value, json};
use support::workers::wait_redis;
use support::{Gateway, Options, client, config, token, tools_call};

/// The tombstone ttl the workers run with: the Redis outage lasts longer.
const TOMBSTONE_TTL_SECS: u64 = 3;
/// How long Redis stays away.
const OUTAGE: Duration = Duration::from_secs(5);
/// How long the frozen worker stays frozen (below the heartbeat ttl, 15 s).
const FROZEN: Duration = Duration::from_secs(3);

/// What became of a call.
#[derive(Debug, Clone)]
enum Outcome {
    /// Still running (no answer yet).
    Pending,
    /// Answered -32800.
    Cancelled,
    /// Answered otherwise.
    Answered(Value),
    /// The connection failed (its worker was killed).
    Failed(String),
}

/// A call: the worker it runs on, its user, its JSON-RPC id, and what became of it.
#[derive(Debug, Clone)]
struct Call {
    on: usize,
    user: &'static str,
    id: String,
    outcome: Outcome,
}

/// The calls, by name.
#[derive(Default)]
struct Calls {
    calls: Mutex<HashMap<String, Call>>,
}

impl Calls {
    fn get(&self, name: &str) -> Call {
        self.calls.lock().unwrap()[name].clone()
    }

    fn outcome(&self, name: &str) -> Outcome {
        self.get(name).outcome
    }

    fn set(&self, name: &str, outcome: Outcome) {
        self.calls.lock().unwrap().get_mut(name).unwrap().outcome = outcome;
    }

    fn len(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

/// A cancel the API answered, and what it named.
#[derive(Debug, Clone)]
#[allow(dead_code)] // `via` and `selector` are read through Debug when a check fails.
struct Answered {
    call: String,
    selector: String,
    via: usize,
    status: u16,
    answer: String,
}

struct Chaos {
    workers: Vec<Gateway>,
    calls: Arc<Calls>,
    cancels: Mutex<Vec<Answered>>,
    next: Mutex<usize>,
}

fn worker(name: &'static str, redis: &RedisServer) -> Gateway {
    let extra = format!("[cancellation]\ntombstone_ttl = \"{TOMBSTONE_TTL_SECS}s\"\n");
    Gateway::with(Options {
        config: config(&extra),
        env: vec![("REDIS_URL", redis.url())],
        worker: Some(name),
        ..Options::default()
    })
}

fn signal(gateway: &Gateway, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &gateway.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

impl Chaos {
    /// Starts a slow call with JSON-RPC id `id` on worker `on` as `user`, tracked as `name`.
    fn call(&self, on: usize, user: &'static str, id: &str, name: &str) {
        let call = Call {
            on,
            user,
            id: id.to_owned(),
            outcome: Outcome::Pending,
        };
        self.calls
            .calls
            .lock()
            .unwrap()
            .insert(name.to_owned(), call);
        let request = client()
            .post(self.workers[on].url("/rpc"))
            .bearer_auth(token(user))
            .json(&tools_call(
                json!(id),
                "demo-sleep",
                json!({"seconds": 600}),
            ));
        let (calls, name) = (Arc::clone(&self.calls), name.to_owned());
        tokio::spawn(async move {
            let outcome = match request.send().await {
                Ok(response) => match response.json::<Value>().await {
                    Ok(body) if body["error"]["code"] == -32800 => Outcome::Cancelled,
                    Ok(body) => Outcome::Answered(body),
                    Err(e) => Outcome::Failed(e.to_string()),
                },
                Err(e) => Outcome::Failed(e.to_string()),
            };
            calls.set(&name, outcome);
        });
    }

    /// Starts `n` calls on each of `on`, alternating alice and bob; returns their names.
    fn calls(&self, on: &[usize], n: usize) -> Vec<String> {
        let mut names = Vec::new();
        for &worker in on {
            for _ in 0..n {
                let next = {
                    let mut next = self.next.lock().unwrap();
                    *next += 1;
                    *next
                };
                let name = format!("call-{next}");
                let user = if next % 2 == 0 { "alice" } else { "bob" };
                self.call(worker, user, &name, &name);
                names.push(name);
            }
        }
        names
    }

    /// Waits until worker `on` has started `n` sleeps in all.
    async fn started(&self, on: usize, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let gateway = &self.workers[on];
        while gateway.count_stderr("demo-upstream: started tools/call sleep") < n {
            assert!(
                Instant::now() < deadline,
                "worker {on} started fewer than {n} calls:\n{}",
                gateway.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Cancels call `name` through worker `via`: as its user by its bare id, or as the admin
    /// by its run id (read from the status first) when `by_admin` and the status can be read.
    async fn cancel(&self, name: &str, via: usize, by_admin: bool) {
        let call = self.calls.get(name);
        if by_admin {
            let (code, body) = status(&self.workers[via], call.user, &call.id).await;
            if code == 200
                && let Some(run_id) = body["run_id"].as_str()
            {
                return self.cancel_as(name, run_id, "admin", via).await;
            }
        }
        self.cancel_as(name, &call.id, call.user, via).await;
    }

    /// `POST /cancellation/cancel` of `selector` as `user` through worker `via`, recorded as a
    /// cancel of `name`.
    async fn cancel_as(&self, name: &str, selector: &str, user: &str, via: usize) {
        let response = client()
            .post(self.workers[via].url("/cancellation/cancel"))
            .bearer_auth(token(user))
            .json(&json!({"requestId": selector, "reason": format!("chaos {name}")}))
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .expect("the cancel is answered");
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        self.cancels.lock().unwrap().push(Answered {
            call: name.to_owned(),
            selector: selector.to_owned(),
            via,
            status,
            answer: body["status"].as_str().unwrap_or("").to_owned(),
        });
    }

    /// Cancels each of `names` at once, each through a worker of `via` other than its own,
    /// half by the user and half by the admin.
    async fn cancel_all(&self, names: &[String], via: &[usize]) {
        let mut cancels = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let on = self.calls.get(name).on;
            let choices: Vec<usize> = via.iter().copied().filter(|w| *w != on).collect();
            let through = choices[i % choices.len()];
            cancels.push(self.cancel(name, through, i % 2 == 1));
        }
        futures_util::future::join_all(cancels).await;
    }

    /// The workers' log lines that name what `answers` named.
    fn logs(&self, answers: &[&Answered]) -> String {
        let mut text = String::new();
        for (w, gateway) in self.workers.iter().enumerate() {
            for line in gateway.stderr().lines() {
                let names = |a: &&Answered| {
                    line.contains(&a.selector)
                        || line.contains(&format!("\"{}\"", self.calls.get(&a.call).id))
                };
                if answers.iter().any(names) || line.contains("redis") {
                    text.push_str(&format!("[{w}] {line}\n"));
                }
            }
        }
        text
    }

    /// The names of `names` whose calls run on worker `on`.
    fn on(&self, on: usize, names: &[String]) -> Vec<String> {
        names
            .iter()
            .filter(|n| self.calls.get(n).on == on)
            .cloned()
            .collect()
    }
}

async fn status(gateway: &Gateway, user: &str, request_id: &str) -> (u16, Value) {
    let response = client()
        .get(gateway.url(&format!("/cancellation/status/{request_id}")))
        .bearer_auth(token(user))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    match response {
        Ok(response) => {
            let code = response.status().as_u16();
            (code, response.json().await.unwrap_or(Value::Null))
        }
        Err(e) => (0, json!(e.to_string())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn cancels_survive_frozen_and_killed_workers_and_redis_restarting_empty() {
    let started = Instant::now();
    let mut redis = RedisServer::start();
    let (a, b, c) = (0, 1, 2);
    let all = [a, b, c];
    let chaos = Chaos {
        workers: vec![
            worker("a", &redis),
            worker("b", &redis),
            worker("c", &redis),
        ],
        calls: Arc::default(),
        cancels: Mutex::default(),
        next: Mutex::new(0),
    };
    for w in &chaos.workers {
        wait_redis(w, "connected").await;
    }

    // Steady: 8 calls on each worker, 6 of each cancelled through another worker.
    let steady = chaos.calls(&all, 8);
    for w in all {
        chaos.started(w, 8).await;
    }
    let (mut cancelled, mut kept) = pick(&steady, 3, 4);
    chaos.cancel_all(&cancelled, &all).await;

    // C frozen: cancels of its runs (and of others) go through A and B, and wait for C's ack
    // in vain; C applies them when it thaws.
    let more = chaos.calls(&[a, b], 4);
    chaos.started(a, 12).await;
    chaos.started(b, 12).await;
    signal(&chaos.workers[c], "-STOP");
    let frozen = Instant::now();
    let on_c = chaos.on(c, &kept);
    let (others, rest) = pick(&more, 1, 2);
    let targets: Vec<String> = on_c.iter().chain(&others).cloned().collect();
    chaos.cancel_all(&targets, &[a, b]).await;
    kept.retain(|n| !on_c.contains(n));
    kept.extend(rest);
    cancelled.extend(targets);
    tokio::time::sleep(FROZEN.saturating_sub(frozen.elapsed())).await;
    signal(&chaos.workers[c], "-CONT");

    // Redis killed, for longer than the tombstone ttl: calls start and are cancelled
    // meanwhile (each cancel waits in the queue of the worker it was sent to).
    redis.kill();
    let outage = Instant::now();
    for w in &chaos.workers {
        wait_redis(w, "disconnected").await;
    }
    let during = chaos.calls(&all, 3);
    chaos.started(a, 15).await;
    chaos.started(b, 15).await;
    chaos.started(c, 11).await;
    let (old, still) = pick(&kept, 1, 2);
    let (new, fresh) = pick(&during, 2, 3);
    let targets: Vec<String> = old.iter().chain(&new).cloned().collect();
    chaos.cancel_all(&targets, &all).await;
    cancelled.extend(targets);
    kept = still.into_iter().chain(fresh).collect();
    // Cancels of runs not registered yet (through B), then two matching runs each, on A and
    // on C: each cancel must stop exactly one of them.
    let mut pairs = Vec::new();
    for k in 0..3 {
        let id = format!("pre-{k}");
        chaos.cancel_as(&id, &id, "alice", b).await;
        let (on_a, on_c) = (format!("{id}@a"), format!("{id}@c"));
        chaos.call(a, "alice", &id, &on_a);
        chaos.call(c, "alice", &id, &on_c);
        pairs.push((id, on_a, on_c));
    }
    chaos.started(a, 18).await;
    chaos.started(c, 14).await;
    tokio::time::sleep(OUTAGE.saturating_sub(outage.elapsed())).await;
    redis.restart();
    for w in &chaos.workers {
        wait_redis(w, "connected").await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (id, on_a, on_c) in &pairs {
        while stopped(&chaos, on_a, on_c) == 0 {
            assert!(
                Instant::now() < deadline,
                "{id} stopped neither of its runs"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // A killed: cancels of its runs go through B and C.
    signal(&chaos.workers[a], "-KILL");
    let on_a = chaos.on(a, &kept);
    chaos.cancel_all(&on_a, &[b, c]).await;
    kept.retain(|n| !on_a.contains(n));
    cancelled.extend(on_a);

    // Every cancel was answered `cancelled` or `queued`...
    let cancels = chaos.cancels.lock().unwrap().clone();
    for cancel in &cancels {
        assert!(
            cancel.status == 200 && ["cancelled", "queued"].contains(&cancel.answer.as_str()),
            "a cancel was refused: {cancel:?}"
        );
    }
    // ... and is applied, or its run's worker was killed and its status says so.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut unsettled = cancelled.clone();
    while !unsettled.is_empty() {
        let mut left = Vec::new();
        for name in unsettled {
            let call = chaos.calls.get(&name);
            let settled = match call.outcome {
                Outcome::Cancelled => true,
                Outcome::Answered(body) => panic!("{name} answered {body} despite its cancel"),
                Outcome::Failed(e) if call.on != a => panic!("{name} failed: {e}"),
                Outcome::Pending if call.on != a => false,
                Outcome::Pending | Outcome::Failed(_) => {
                    let (code, body) = status(&chaos.workers[b], call.user, &call.id).await;
                    let state = body["state"].as_str().unwrap_or("");
                    code == 200 && ["lost", "cancelled"].contains(&state)
                }
            };
            if !settled {
                left.push(name);
            }
        }
        unsettled = left;
        if !unsettled.is_empty() {
            let answers: Vec<&Answered> = cancels
                .iter()
                .filter(|c| unsettled.contains(&c.call))
                .collect();
            assert!(
                Instant::now() < deadline,
                "answered cancelled or queued, but neither applied nor reported: {answers:#?}\n{}",
                chaos.logs(&answers)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Nothing stopped what nobody cancelled, and no cancel stopped two runs.
    for name in &kept {
        assert!(
            !matches!(chaos.calls.outcome(name), Outcome::Cancelled),
            "{name} was cancelled, but nobody cancelled it"
        );
    }
    for (id, on_a, on_c) in &pairs {
        assert_eq!(stopped(&chaos, on_a, on_c), 1, "{id} stopped two runs");
    }
    assert!(cancels.len() >= 30, "{} cancels", cancels.len());
    eprintln!(
        "chaos: {} calls, {} cancels, {:?}",
        chaos.calls.len(),
        cancels.len(),
        started.elapsed()
    );
}

/// How many of the two calls were cancelled.
fn stopped(chaos: &Chaos, one: &str, other: &str) -> usize {
    [one, other]
        .iter()
        .filter(|n| matches!(chaos.calls.outcome(n), Outcome::Cancelled))
        .count()
}

/// Splits `names` into every `of`-th group of `take` (the first `take` of each `of`), and the
/// rest.
fn pick(names: &[String], take: usize, of: usize) -> (Vec<String>, Vec<String>) {
    let (mut picked, mut rest) = (Vec::new(), Vec::new());
    for (i, name) in names.iter().enumerate() {
        if i % of < take {
            picked.push(name.clone());
        } else {
            rest.push(name.clone());
        }
    }
    (picked, rest)
}
