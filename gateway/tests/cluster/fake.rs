//! A fake worker standing in for the registry, a [`Node`] (the worker and its cluster), and a
//! TCP proxy that cuts connections to Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit_gateway::cluster::{Cluster, LocalRuns, Settings};
use cancelkit_gateway::runs::record::{RunRecord, RunState, Tombstone, new_run_id, unix_now};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long any condition may take to come true.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A fake worker: its runs and tombstones in maps, and the cancels it applied.
#[derive(Debug)]
pub struct Worker {
    pub name: String,
    pub records: Mutex<HashMap<String, RunRecord>>,
    pub tombstones: Mutex<Vec<Tombstone>>,
    pub applied: Mutex<Vec<(String, Option<String>)>>,
}

impl Worker {
    pub fn new(name: &str) -> Arc<Worker> {
        Arc::new(Worker {
            name: name.to_owned(),
            records: Mutex::default(),
            tombstones: Mutex::default(),
            applied: Mutex::default(),
        })
    }

    /// A live run of this worker's, known locally (not yet written to Redis).
    pub fn run(&self, id: RequestId) -> RunRecord {
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
            cancel_queued_at: None,
        };
        self.records
            .lock()
            .unwrap()
            .insert(record.run_id.clone(), record.clone());
        record
    }

    /// The reason of the cancel applied to `run_id`, if one was.
    pub fn applied(&self, run_id: &str) -> Option<Option<String>> {
        self.applied
            .lock()
            .unwrap()
            .iter()
            .find(|(id, _)| id == run_id)
            .map(|(_, reason)| reason.clone())
    }

    /// How many cancels it applied.
    pub fn applied_count(&self) -> usize {
        self.applied.lock().unwrap().len()
    }

    pub fn has_tombstone(&self, id: &str) -> bool {
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

    fn forget_tombstone(&self, id: &str) {
        self.tombstones.lock().unwrap().retain(|t| t.id != id);
    }

    fn tombstones(&self) -> Vec<Tombstone> {
        self.tombstones.lock().unwrap().clone()
    }
}

pub fn settings(url: &str, worker: &str) -> Settings {
    Settings {
        url: url.to_owned(),
        worker: worker.to_owned(),
        retention: Duration::from_secs(60),
        heartbeat_ttl: Duration::from_secs(3),
        tombstone_ttl: Duration::from_secs(30),
        ack_timeout: Duration::from_secs(2),
        lookup_timeout: Duration::from_millis(500),
        max_pending: 64,
    }
}

/// A worker and its cluster.
pub struct Node {
    pub worker: Arc<Worker>,
    pub cluster: Cluster,
}

impl Node {
    pub fn start(url: &str, name: &str) -> Node {
        Node::with(settings(url, name))
    }

    pub fn with(settings: Settings) -> Node {
        Node::of(Worker::new(&settings.worker), settings)
    }

    /// A node for an existing fake worker.
    pub fn of(worker: Arc<Worker>, settings: Settings) -> Node {
        let weak: Weak<dyn LocalRuns> = Arc::downgrade(&(worker.clone() as Arc<dyn LocalRuns>));
        let cluster = Cluster::start(settings, weak);
        Node { worker, cluster }
    }

    /// A live run, known locally and recorded in Redis.
    pub fn run(&self, id: RequestId) -> RunRecord {
        let record = self.worker.run(id);
        self.cluster.record(&record);
        record
    }

    pub async fn connected(&self) -> &Node {
        let cluster = self.cluster.clone();
        wait_until("the cluster connects", || cluster.is_connected()).await;
        self
    }
}

/// Polls `condition` until it holds; panics naming `what` after [`DEADLINE`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An admin's tombstone for `selector`, living 30 s.
pub fn tombstone(selector: &str) -> Tombstone {
    Tombstone {
        id: format!("t-{}", new_run_id()),
        selector: selector.to_owned(),
        scope: None,
        reason: Some("early".into()),
        made_at: unix_now(),
        expires_at: unix_now() + 30.0,
    }
}

/// A TCP proxy to Redis that can cut one worker off (drop its connections, refuse new ones)
/// while the others stay connected, or cut every connection some time after it opened.
pub struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    pumps: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: u16) -> Proxy {
        Proxy::with_lifetime(target, None).await
    }

    /// A proxy whose every connection is cut `lifetime` after it opened (if given).
    pub async fn with_lifetime(target: u16, lifetime: Option<Duration>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let pumps: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn({
            let (cut, pumps) = (cut.clone(), pumps.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        continue;
                    }
                    let pump = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                            let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                            match lifetime {
                                Some(lifetime) => {
                                    let _ = tokio::time::timeout(lifetime, copy).await;
                                }
                                None => {
                                    let _ = copy.await;
                                }
                            }
                        }
                    });
                    let mut pumps = pumps.lock().unwrap();
                    pumps.retain(|pump| !pump.is_finished());
                    pumps.push(pump);
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

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for pump in self.pumps.lock().unwrap().drain(..) {
            pump.abort();
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
