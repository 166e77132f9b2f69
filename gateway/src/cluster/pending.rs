//! The writes waiting for Redis: bounded, coalesced per key, oldest dropped first.
//!
//! Every non-blocking call of [`Cluster`](super::Cluster) lands here and the link task writes it
//! (at once while Redis is up; after the reconnect otherwise). A newer write for the same key
//! (the same run's record, the same run's cancel, ...) replaces the older one and moves to the
//! back. At the bound the oldest waiting write is dropped, counted in
//! `cancelkit_gateway_redis_dropped_total` and warned about once per outage.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use crate::runs::record::{RunRecord, Tombstone};

/// One write.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// A run's record and its bare-id index.
    Record(RunRecord),
    /// A tombstone: stored and published.
    Tombstone(Tombstone),
    /// A cancel for another worker's run: the marker stored and the message published.
    Cancel {
        /// The run.
        run_id: String,
        /// The reason given with the cancel.
        reason: Option<String>,
    },
    /// This worker stopped a run: the ack published.
    Ack(String),
    /// A run id whose record expired, to take out of a bare-id index set.
    Prune {
        /// The index set.
        set: String,
        /// The run id.
        run_id: String,
    },
}

impl Op {
    /// What a newer write replaces.
    fn key(&self) -> Key {
        match self {
            Op::Record(record) => Key::Record(record.run_id.clone()),
            Op::Tombstone(tombstone) => Key::Tombstone(tombstone.id.clone()),
            Op::Cancel { run_id, .. } => Key::Cancel(run_id.clone()),
            Op::Ack(run_id) => Key::Ack(run_id.clone()),
            Op::Prune { set, run_id } => Key::Prune(set.clone(), run_id.clone()),
        }
    }

    /// The metrics label.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Op::Record(_) => "record",
            Op::Tombstone(_) => "tombstone",
            Op::Cancel { .. } => "cancel",
            Op::Ack(_) => "ack",
            Op::Prune { .. } => "prune",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Record(String),
    Tombstone(String),
    Cancel(String),
    Ack(String),
    Prune(String, String),
}

/// A write taken out to be sent, with what it takes to put it back where it was.
#[derive(Debug)]
pub(super) struct Taken {
    seq: u64,
    /// The write.
    pub op: Op,
    /// When it was first queued.
    pub queued_at: Instant,
}

#[derive(Debug)]
struct Entry {
    seq: u64,
    op: Op,
    queued_at: Instant,
}

/// The queue.
#[derive(Debug)]
pub(super) struct Pending {
    bound: usize,
    next_seq: u64,
    /// Oldest first.
    order: BTreeMap<u64, Key>,
    entries: HashMap<Key, Entry>,
    /// Tombstones taken out and being written now.
    tombstones_in_flight: HashSet<String>,
    /// Of those, the ones this worker claimed meanwhile (to delete once written).
    claimed_in_flight: HashSet<String>,
    /// How many writes were taken out and are being sent.
    in_flight: usize,
    /// Drops since the last time Redis was reachable.
    dropped_in_outage: u64,
}

/// What [`Pending::push`] had to drop to stay within its bound.
#[derive(Debug)]
pub(super) struct Dropped {
    /// The metrics label of the dropped write.
    pub kind: &'static str,
    /// Whether it is the first drop of this outage (the one to warn about).
    pub first_in_outage: bool,
}

impl Pending {
    /// An empty queue holding at most `bound` writes (at least 1).
    pub(super) fn new(bound: usize) -> Pending {
        Pending {
            bound: bound.max(1),
            next_seq: 0,
            order: BTreeMap::new(),
            entries: HashMap::new(),
            tombstones_in_flight: HashSet::new(),
            claimed_in_flight: HashSet::new(),
            in_flight: 0,
            dropped_in_outage: 0,
        }
    }

    /// How many writes wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many writes wait or are being sent.
    pub(super) fn unsent(&self) -> usize {
        self.entries.len() + self.in_flight
    }

    /// Queues `op`, replacing a waiting write for the same key; drops the oldest writes beyond
    /// the bound and says which.
    pub(super) fn push(&mut self, op: Op) -> Vec<Dropped> {
        let key = op.key();
        let seq = self.next_seq;
        self.next_seq += 1;
        let queued_at = match self.entries.remove(&key) {
            Some(old) => {
                self.order.remove(&old.seq);
                // A coalesced write keeps its age: expiry counts from the first request.
                old.queued_at
            }
            None => Instant::now(),
        };
        self.order.insert(seq, key.clone());
        self.entries.insert(key, Entry { seq, op, queued_at });
        self.enforce_bound()
    }

    /// Takes up to `max` of the oldest writes out to send them; tombstones among them count as
    /// in flight until [`finish`](Self::finish).
    pub(super) fn take(&mut self, max: usize) -> Vec<Taken> {
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some((seq, key)) = self.order.pop_first() else {
                break;
            };
            let Some(entry) = self.entries.remove(&key) else {
                continue;
            };
            if let Op::Tombstone(tombstone) = &entry.op {
                self.tombstones_in_flight.insert(tombstone.id.clone());
            }
            taken.push(Taken {
                seq,
                op: entry.op,
                queued_at: entry.queued_at,
            });
        }
        self.in_flight = taken.len();
        taken
    }

    /// Puts writes that could not be sent back in their old places, unless a newer write for
    /// the same key arrived meanwhile; then enforces the bound (the put-back writes are the
    /// oldest, so they go first).
    pub(super) fn put_back(&mut self, taken: Vec<Taken>) -> Vec<Dropped> {
        self.in_flight = 0;
        self.tombstones_in_flight.clear();
        self.claimed_in_flight.clear();
        for Taken { seq, op, queued_at } in taken {
            let key = op.key();
            if self.entries.contains_key(&key) {
                continue;
            }
            self.order.insert(seq, key.clone());
            self.entries.insert(key, Entry { seq, op, queued_at });
        }
        self.enforce_bound()
    }

    /// The batch was written: returns the tombstones claimed while they were in flight (their
    /// keys must go).
    pub(super) fn finish(&mut self) -> Vec<String> {
        self.in_flight = 0;
        self.tombstones_in_flight.clear();
        self.claimed_in_flight.drain().collect()
    }

    /// Claims tombstone `id` locally if it has not reached Redis yet: a waiting write is dropped
    /// (no other worker ever saw it), one in flight is deleted once written. Returns whether it
    /// was either.
    pub(super) fn claim_unwritten_tombstone(&mut self, id: &str) -> bool {
        let key = Key::Tombstone(id.to_owned());
        if let Some(entry) = self.entries.remove(&key) {
            self.order.remove(&entry.seq);
            return true;
        }
        if self.tombstones_in_flight.contains(id) {
            self.claimed_in_flight.insert(id.to_owned());
            return true;
        }
        false
    }

    /// Redis is reachable again: returns how many writes were dropped while it was away.
    pub(super) fn end_outage(&mut self) -> u64 {
        std::mem::take(&mut self.dropped_in_outage)
    }

    fn enforce_bound(&mut self) -> Vec<Dropped> {
        let mut dropped = Vec::new();
        while self.entries.len() > self.bound {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&key) {
                self.dropped_in_outage += 1;
                dropped.push(Dropped {
                    kind: entry.op.kind(),
                    first_in_outage: self.dropped_in_outage == 1,
                });
            }
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(id: &str) -> Op {
        Op::Ack(id.to_owned())
    }

    fn names(taken: &[Taken]) -> Vec<String> {
        taken
            .iter()
            .map(|t| match &t.op {
                Op::Ack(id) => id.clone(),
                Op::Cancel { run_id, reason } => {
                    format!("{run_id}:{}", reason.as_deref().unwrap_or(""))
                }
                other => other.kind().to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_oldest_write_goes_at_the_bound() {
        let mut pending = Pending::new(2);
        assert!(pending.push(ack("a")).is_empty());
        assert!(pending.push(ack("b")).is_empty());
        let dropped = pending.push(ack("c"));
        assert_eq!(dropped.len(), 1);
        assert!(dropped[0].first_in_outage);
        assert!(!pending.push(ack("d"))[0].first_in_outage);
        assert_eq!(names(&pending.take(10)), ["c", "d"]);
        assert_eq!(pending.end_outage(), 2);
    }

    #[test]
    fn a_newer_write_for_the_same_key_replaces_the_older_and_moves_back() {
        let mut pending = Pending::new(3);
        let cancel = |reason: &str| Op::Cancel {
            run_id: "r".into(),
            reason: Some(reason.into()),
        };
        pending.push(cancel("old"));
        pending.push(ack("x"));
        pending.push(cancel("new"));
        assert_eq!(pending.len(), 2);
        assert_eq!(names(&pending.take(10)), ["x", "r:new"]);
    }

    #[test]
    fn put_back_keeps_places_and_yields_to_newer_writes() {
        let mut pending = Pending::new(10);
        pending.push(ack("a"));
        pending.push(ack("b"));
        let taken = pending.take(10);
        pending.push(ack("c"));
        pending.push(ack("a"));
        assert!(pending.put_back(taken).is_empty());
        // "b" is back in front; "a" is the newer copy, behind "c".
        assert_eq!(names(&pending.take(10)), ["b", "c", "a"]);
    }
}
