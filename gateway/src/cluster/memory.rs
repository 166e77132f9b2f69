//! What this worker wrote to Redis and must write again if Redis restarts empty: the cancels
//! it sent to other workers' runs that were not acked yet, and the tombstones it made.
//!
//! Both are kept while they mean something (a marker for the tombstone ttl after it was
//! written, a tombstone until it expires) and bounded: beyond the bound the oldest is
//! forgotten (it is in Redis already; only a Redis that restarts empty in the meantime loses
//! it), counted in `cancelkit_gateway_redis_dropped_total{kind="remembered"}`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::METRIC_DROPPED;

/// A cancel sent to another worker's run, not acked yet.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sent {
    /// The reason given with the cancel.
    pub reason: Option<String>,
    /// Until when its marker lives.
    pub until: Instant,
}

/// Entries by key, each until an instant, the oldest forgotten beyond a bound.
#[derive(Debug)]
struct Expiring<V> {
    bound: usize,
    next: u64,
    entries: HashMap<String, (u64, Instant, V)>,
    /// Keys in the order they were (last) inserted; an entry reinserted since leaves a stale
    /// copy here, skipped and compacted away.
    order: VecDeque<(u64, String)>,
}

impl<V> Expiring<V> {
    fn new(bound: usize) -> Expiring<V> {
        Expiring {
            bound: bound.max(1),
            next: 0,
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn insert(&mut self, key: String, until: Instant, value: V) {
        let seq = self.next;
        self.next += 1;
        self.entries.insert(key.clone(), (seq, until, value));
        self.order.push_back((seq, key));
        while self.entries.len() > self.bound {
            let Some((seq, key)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&key).is_some_and(|(s, _, _)| *s == seq) {
                self.entries.remove(&key);
                metrics::counter!(METRIC_DROPPED, "kind" => "remembered").increment(1);
            }
        }
        if self.order.len() > 2 * self.bound + 16 {
            let entries = &self.entries;
            self.order
                .retain(|(seq, key)| entries.get(key).is_some_and(|(s, _, _)| s == seq));
        }
    }

    fn remove(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Forgets what expired.
    fn expire(&mut self, now: Instant) {
        self.entries.retain(|_, (_, until, _)| *until > now);
        let entries = &self.entries;
        self.order
            .retain(|(seq, key)| entries.get(key).is_some_and(|(s, _, _)| s == seq));
    }

    fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    fn iter(&self) -> impl Iterator<Item = (&String, Instant, &V)> {
        self.entries
            .iter()
            .map(|(key, (_, until, value))| (key, *until, value))
    }
}

/// The two lists.
#[derive(Debug)]
pub(super) struct Memory {
    sent: Expiring<Option<String>>,
    tombstones: Expiring<()>,
}

impl Memory {
    /// Empty, each list holding at most `bound` entries.
    pub(super) fn new(bound: usize) -> Memory {
        Memory {
            sent: Expiring::new(bound),
            tombstones: Expiring::new(bound),
        }
    }

    /// A cancel for `run_id` was written (its marker lives `ttl`).
    pub(super) fn sent(&mut self, run_id: &str, reason: Option<String>, ttl: Duration) {
        self.sent
            .insert(run_id.to_owned(), Instant::now() + ttl, reason);
    }

    /// The run's worker acked a cancel: nothing to write again.
    pub(super) fn acked(&mut self, run_id: &str) {
        self.sent.remove(run_id);
    }

    /// This worker made tombstone `id`, which lives `left`.
    pub(super) fn made(&mut self, id: &str, left: Duration) {
        self.tombstones
            .insert(id.to_owned(), Instant::now() + left, ());
    }

    /// Tombstone `id` was claimed (or is gone): not to be written again.
    pub(super) fn claimed(&mut self, id: &str) {
        self.tombstones.remove(id);
    }

    /// Whether this worker made tombstone `id` and it was not claimed.
    pub(super) fn is_mine(&self, id: &str) -> bool {
        self.tombstones.contains(id)
    }

    /// The cancels to write again, with what is left of their markers' lives.
    pub(super) fn unacked(&mut self) -> Vec<(String, Sent)> {
        let now = Instant::now();
        self.sent.expire(now);
        self.tombstones.expire(now);
        self.sent
            .iter()
            .map(|(run_id, until, reason)| {
                (
                    run_id.clone(),
                    Sent {
                        reason: reason.clone(),
                        until,
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lists_are_bounded_and_forget_what_was_acked_claimed_or_expired() {
        let mut memory = Memory::new(2);
        memory.sent("a", None, Duration::from_secs(30));
        memory.sent("b", Some("why".into()), Duration::from_secs(30));
        memory.sent("a", Some("again".into()), Duration::from_secs(30));
        memory.sent("c", None, Duration::from_secs(30));
        let mut unacked: Vec<String> = memory.unacked().into_iter().map(|(id, _)| id).collect();
        unacked.sort();
        assert_eq!(unacked, ["a", "c"], "b was the oldest");
        memory.acked("a");
        memory.sent("gone", None, Duration::ZERO);
        let unacked: Vec<String> = memory.unacked().into_iter().map(|(id, _)| id).collect();
        assert_eq!(unacked, ["c"]);

        memory.made("t1", Duration::from_secs(30));
        memory.made("t2", Duration::from_secs(30));
        memory.made("t3", Duration::from_secs(30));
        assert!(!memory.is_mine("t1") && memory.is_mine("t2") && memory.is_mine("t3"));
        memory.claimed("t2");
        assert!(!memory.is_mine("t2"));
        // Reinserting over and over keeps the order list compact.
        for _ in 0..100 {
            memory.made("t3", Duration::from_secs(30));
        }
        assert!(memory.tombstones.order.len() <= 2 * 2 + 16);
    }
}
