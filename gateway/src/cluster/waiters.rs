//! Remote cancellers waiting for the owner's ack: a bounded map from run id to waiters.
//!
//! At the bound a canceller does not wait (it gets [`RemoteCancel::Sent`](super::RemoteCancel)
//! at once); a waiter that gives up (timeout, or its future dropped) takes itself out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::Shared;

/// The map.
#[derive(Debug)]
pub(super) struct Waiters {
    bound: usize,
    next_id: u64,
    count: usize,
    by_run: HashMap<String, Vec<(u64, oneshot::Sender<()>)>>,
}

impl Waiters {
    /// An empty map holding at most `bound` waiters (at least 1).
    pub(super) fn new(bound: usize) -> Waiters {
        Waiters {
            bound: bound.max(1),
            next_id: 0,
            count: 0,
            by_run: HashMap::new(),
        }
    }

    fn add(&mut self, run_id: &str) -> Option<(u64, oneshot::Receiver<()>)> {
        if self.count >= self.bound {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        self.by_run
            .entry(run_id.to_owned())
            .or_default()
            .push((id, tx));
        self.count += 1;
        Some((id, rx))
    }

    fn remove(&mut self, run_id: &str, id: u64) {
        if let Some(list) = self.by_run.get_mut(run_id) {
            let before = list.len();
            list.retain(|(other, _)| *other != id);
            self.count -= before - list.len();
            if list.is_empty() {
                self.by_run.remove(run_id);
            }
        }
    }

    /// The owner acked `run_id`: wakes everyone waiting for it.
    pub(super) fn fire(&mut self, run_id: &str) {
        if let Some(list) = self.by_run.remove(run_id) {
            self.count -= list.len();
            for (_, tx) in list {
                let _ = tx.send(());
            }
        }
    }

    /// How many wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.count
    }
}

/// One canceller's place in the map; leaves it when dropped.
pub(super) struct Waiter {
    shared: Arc<Shared>,
    run_id: String,
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
}

impl Waiter {
    /// Starts waiting for `run_id`'s ack; `None` at the bound.
    pub(super) fn register(shared: &Arc<Shared>, run_id: &str) -> Option<Waiter> {
        let (id, rx) = shared.waiters().add(run_id)?;
        Some(Waiter {
            shared: shared.clone(),
            run_id: run_id.to_owned(),
            id,
            rx: Some(rx),
        })
    }

    /// Whether the ack came within `limit`.
    pub(super) async fn wait(mut self, limit: Duration) -> bool {
        let Some(rx) = self.rx.take() else {
            return false;
        };
        matches!(tokio::time::timeout(limit, rx).await, Ok(Ok(())))
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.shared.waiters().remove(&self.run_id, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_is_bounded_and_empties_itself() {
        let mut waiters = Waiters::new(2);
        let (a, mut rx_a) = waiters.add("r").unwrap();
        let (_, mut rx_b) = waiters.add("r").unwrap();
        assert!(waiters.add("s").is_none(), "at the bound");
        waiters.remove("r", a);
        assert_eq!(waiters.len(), 1);
        waiters.fire("r");
        assert_eq!(waiters.len(), 0);
        assert!(rx_b.try_recv().is_ok());
        assert!(rx_a.try_recv().is_err());
        assert!(waiters.by_run.is_empty());
    }
}
