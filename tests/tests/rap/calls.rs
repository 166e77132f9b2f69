//! Calls through the tool server's router: results, cancelled process groups, the cancel
//! endpoint, and cancels racing results.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cancelkit::rap::{self, ToolCall, ToolOutput};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::harness::{GRACE, KillGroup, TOKEN, live_group_members, rig};

/// When a cancelled process group was seen, counted from just before the cancel was sent.
struct Stopped {
    /// The last time a process of the group was seen running.
    last_seen_alive: Duration,
    /// The first time no process of the group was running and its directory was gone.
    gone: Duration,
}

/// Runs `prelude` then two background sleeps in a process tool, cancels it, and checks that
/// the whole group is gone, its directory removed and no result sent; returns when the group
/// was last seen and when it was gone.
async fn cancel_process_group(prelude: &str) -> Stopped {
    let r = rig(|b| b).await;
    let marker = tempfile::NamedTempFile::new().unwrap();
    let marker_path = marker.path().to_str().unwrap().to_owned();
    let script = format!(
        "{prelude} sleep 300 & sleep 300 & touch inside && printf '%s %s' \"$$\" \"$PWD\" > {marker_path}.ready && mv {marker_path}.ready {marker_path}; wait"
    );
    std::fs::remove_file(&marker_path).unwrap();
    assert_eq!(
        r.invoke("run", "call_proc", json!({"script": script}))
            .await,
        200
    );
    let (pgid, dir) = loop {
        if let Ok(text) = std::fs::read_to_string(&marker_path)
            && let Some((pid, dir)) = text.split_once(' ')
        {
            break (pid.parse::<i32>().unwrap(), dir.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _cleanup = KillGroup(pgid);
    assert!(
        live_group_members(pgid).len() >= 3,
        "the shell and its two sleeps run"
    );
    assert!(Path::new(&dir).join("inside").exists());

    let cancelled = Instant::now();
    assert_eq!(
        r.cancel("thread_1", "call_proc").await,
        (200, String::new())
    );
    let mut last_seen_alive = Duration::ZERO;
    let mut gone = None;
    while cancelled.elapsed() < Duration::from_secs(10) {
        let seen = Instant::now();
        if live_group_members(pgid).is_empty() {
            if !Path::new(&dir).exists() {
                gone = Some(seen - cancelled);
                break;
            }
        } else {
            last_seen_alive = seen - cancelled;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group is left"
    );
    assert!(
        !Path::new(&dir).exists(),
        "the call's temporary directory is gone"
    );
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        r.callbacks.all(),
        Vec::<Value>::new(),
        "no result after the cancel"
    );
    let _ = std::fs::remove_file(&marker_path);
    Stopped {
        last_seen_alive,
        gone: gone.expect("checked above"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_terminates_the_process_group_removes_its_directory_and_sends_no_result() {
    let stopped = cancel_process_group("").await;
    assert!(
        stopped.gone < Duration::from_millis(300),
        "SIGTERM was enough: gone after {:?}",
        stopped.gone
    );
}

/// A group that ignores SIGTERM outlives the SIGTERM and is killed with SIGKILL once the grace
/// period is over, not long after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_is_killed_after_the_grace_period() {
    let stopped = cancel_process_group("trap '' TERM;").await;
    // The cancel reaches the server after `cancelled`, so its SIGKILL comes at GRACE or later;
    // polling /proc, we saw the group running until shortly before that.
    assert!(
        stopped.last_seen_alive >= GRACE * 3 / 4,
        "SIGTERM alone did not stop it: last seen running {:?} after the cancel",
        stopped.last_seen_alive
    );
    assert!(
        stopped.gone >= GRACE,
        "killed only after the grace period: gone after {:?}",
        stopped.gone
    );
    assert!(
        stopped.gone <= GRACE + Duration::from_millis(1000),
        "killed soon after the grace period: gone after {:?}",
        stopped.gone
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_posts_its_result_with_the_call_id() {
    let r = rig(|b| b).await;
    assert_eq!(
        r.invoke("echo", "call_1", json!({"text": "hello"})).await,
        200
    );
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_1", "call_id": "c-call_1", "text": "hello"})
    );
    // The process tool's output comes back the same way, and its directory is removed.
    assert_eq!(
        r.invoke("run", "call_2", json!({"script": "pwd"})).await,
        200
    );
    let results = r.callbacks.wait_for(2).await;
    let dir = results[1]["text"].as_str().unwrap().trim().to_owned();
    assert!(dir.contains("cancelkit-tool-"), "{dir}");
    assert!(!Path::new(&dir).exists());
}

/// A tool that panics is reported as a failed call and leaves nothing running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_reports_an_error_result() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("panic", "call_p", json!({})).await, 200);
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["text"], "the tool panicked");
    r.wait_running(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_endpoint_never_reveals_call_state() {
    let r = rig(|b| b).await;
    assert_eq!(
        r.invoke("sleep", "call_s", json!({"ms": 60_000})).await,
        200
    );
    r.wait_running(1).await;
    // Running, duplicate, unknown, invalid ids, malformed body: all the same empty 200.
    let answers = vec![
        r.cancel("thread_1", "call_s").await,
        r.cancel("thread_1", "call_s").await,
        r.cancel("thread_1", "call_404").await,
        r.cancel("thread 1", "call_s").await,
        r.cancel("thread_1", &"x".repeat(300)).await,
        r.cancel("../../etc", "call_s").await,
        r.post("/cancel_tool_call", Some(TOKEN), "{not json").await,
        r.post("/cancel_tool_call", Some(TOKEN), r#"{"thread_id": 1}"#)
            .await,
    ];
    for answer in answers {
        assert_eq!(answer, (200, String::new()));
    }
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(r.callbacks.all(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_ids_cancel_nothing() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("sleep", "call_v", json!({"ms": 200})).await, 200);
    r.wait_running(1).await;
    assert_eq!(r.cancel("thread_1 ", "call_v").await, (200, String::new()));
    assert_eq!(r.cancel("thread_1", "call_v\n").await, (200, String::new()));
    let results = r.callbacks.wait_for(1).await;
    assert_eq!(
        results[0]["text"], "call_v slept",
        "the call ran to completion"
    );
}

/// What became of each call of the `gate` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Waiting for its gate to open.
    Waiting,
    /// Its gate opened and it returned its result.
    Finished,
    /// Stopped (its future dropped) before its gate opened.
    Stopped,
}

/// The `gate` tool's calls wait until the test opens their gate, and record their fate.
#[derive(Clone, Default)]
struct Gates {
    gates: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    fates: Arc<Mutex<HashMap<String, Fate>>>,
}

impl Gates {
    fn gate(&self, id: &str) -> Arc<Notify> {
        self.gates
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    fn open(&self, id: &str) {
        self.gate(id).notify_one(); // kept as a permit if the call is not waiting yet
    }

    fn fate(&self, id: &str) -> Option<Fate> {
        self.fates.lock().unwrap().get(id).copied()
    }

    async fn wait_fate(&self, id: &str, fate: Fate) {
        for _ in 0..500 {
            if self.fate(id) == Some(fate) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{id}: expected {fate:?}, is {:?}", self.fate(id));
    }

    /// Adds the `gate` operation to a tool server.
    fn tool(&self, builder: rap::ToolServerBuilder) -> rap::ToolServerBuilder {
        let gates = self.clone();
        builder.operation(
            "gate",
            "Waits until the test opens its gate",
            json!({"type": "object"}),
            move |_args: Value, call: ToolCall| {
                let gates = gates.clone();
                async move {
                    /// Records `Stopped` if dropped before the gate opened.
                    struct Record(Gates, String, bool);
                    impl Drop for Record {
                        fn drop(&mut self) {
                            let fate = if self.2 {
                                Fate::Finished
                            } else {
                                Fate::Stopped
                            };
                            self.0.fates.lock().unwrap().insert(self.1.clone(), fate);
                        }
                    }
                    let id = call.tool_call_id;
                    let gate = gates.gate(&id);
                    gates
                        .fates
                        .lock()
                        .unwrap()
                        .insert(id.clone(), Fate::Waiting);
                    let mut record = Record(gates, id, false);
                    gate.notified().await;
                    record.2 = true;
                    Ok(ToolOutput::from("released"))
                }
            },
        )
    }
}

/// A cancel and a result for the same call: the cancel stops a call that has not finished, it
/// comes too late for one that has, and a call never delivers more than one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_result_delivers_at_most_one_result() {
    let gates = Gates::default();
    let r = rig(|b| gates.tool(b.rate_limit(10_000, 10_000))).await;
    let results_for = |id: &str| {
        r.callbacks
            .all()
            .into_iter()
            .filter(|result| result["id"] == id)
            .count()
    };

    // The cancel wins: the waiting tool is stopped, and opening its gate afterwards posts
    // nothing.
    for i in 0..5 {
        let id = format!("cancel_wins_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        assert_eq!(r.cancel("thread_1", &id).await, (200, String::new()));
        gates.wait_fate(&id, Fate::Stopped).await;
        gates.open(&id);
    }
    r.wait_running(0).await;

    // The result wins: the tool finishes and posts its result; the late cancel changes nothing.
    for i in 0..5 {
        let id = format!("result_wins_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        gates.open(&id);
        gates.wait_fate(&id, Fate::Finished).await;
        for _ in 0..500 {
            if results_for(&id) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(r.cancel("thread_1", &id).await, (200, String::new()));
    }

    // A real race: the gate opens while the cancel is on its way. Either branch may win, but
    // the call's fate and its result agree.
    let mut races = Vec::new();
    for i in 0..20 {
        let id = format!("race_{i}");
        assert_eq!(r.invoke("gate", &id, json!({})).await, 200);
        gates.wait_fate(&id, Fate::Waiting).await;
        let open_after = Duration::from_micros(250 * (i % 8));
        tokio::join!(r.cancel("thread_1", &id), async {
            tokio::time::sleep(open_after).await;
            gates.open(&id);
        });
        races.push(id);
    }
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    for i in 0..5 {
        let id = format!("cancel_wins_{i}");
        assert_eq!(gates.fate(&id), Some(Fate::Stopped), "{id}");
        assert_eq!(results_for(&id), 0, "{id}: no result after the cancel won");
        let id = format!("result_wins_{i}");
        assert_eq!(gates.fate(&id), Some(Fate::Finished), "{id}");
        assert_eq!(results_for(&id), 1, "{id}: exactly one result");
    }
    let (mut stopped, mut delivered, mut held_back) = (0, 0, 0);
    for id in &races {
        match (gates.fate(id), results_for(id)) {
            (Some(Fate::Stopped), 0) => stopped += 1,
            (Some(Fate::Finished), 1) => delivered += 1,
            // Finished just as the cancel arrived: the server holds the result back.
            (Some(Fate::Finished), 0) => held_back += 1,
            (fate, results) => panic!("{id}: {fate:?} with {results} results"),
        }
    }
    eprintln!("races: {stopped} stopped, {delivered} delivered, {held_back} held back");
    assert_eq!(stopped + delivered + held_back, races.len());
}
