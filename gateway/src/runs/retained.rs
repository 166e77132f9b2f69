//! The statuses of finished runs, kept for the retention: bounded in all (`max_retained`) and
//! per user (`max_retained_per_user`), so one user's many calls never push out another user's
//! statuses.
//!
//! - A user beyond their share loses their own oldest status.
//! - At the global bound the oldest status of the user who holds the most goes: a user within
//!   their share loses a status only when every user holds as many as they do or more.
//! - Statuses expire in the order they finished (one retention for every run), each in
//!   O(log n); nothing is ever scanned.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::record::RunRecord;

/// When a status expires, and a sequence number that makes the key unique.
type Order = (Instant, u64);

#[derive(Debug)]
struct Kept {
    record: RunRecord,
    owner: Arc<str>,
    order: Order,
}

/// Finished runs' statuses.
#[derive(Debug, Default)]
pub(super) struct Retained {
    by_id: HashMap<Arc<str>, Kept>,
    /// Every status by expiry.
    order: BTreeMap<Order, Arc<str>>,
    /// Each owner's statuses, oldest first.
    by_owner: HashMap<Arc<str>, VecDeque<(Order, Arc<str>)>>,
    /// (how many statuses, owner) for every owner holding one: the largest holder is the last.
    holders: BTreeSet<(usize, Arc<str>)>,
    seq: u64,
}

/// Why a status went before its retention ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Evicted {
    /// It expired.
    Expired,
    /// Its owner was over their share.
    UserShare,
    /// The gateway was at its bound and its owner held the most.
    Global,
}

impl Retained {
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(super) fn get(&self, run_id: &str) -> Option<&RunRecord> {
        self.by_id.get(run_id).map(|k| &k.record)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &RunRecord> {
        self.by_id.values().map(|k| &k.record)
    }

    /// Keeps `record` until `expires`; returns the statuses that went to make room.
    pub(super) fn insert(
        &mut self,
        run_id: Arc<str>,
        record: RunRecord,
        expires: Instant,
        per_user: usize,
        global: usize,
    ) -> Vec<(RunRecord, Evicted)> {
        let owner: Arc<str> = Arc::from(record.owner.as_str());
        self.seq += 1;
        let order = (expires, self.seq);
        let held = self.by_owner.get(&owner).map_or(0, VecDeque::len);
        if let Some(old) = self.by_id.insert(
            Arc::clone(&run_id),
            Kept {
                record,
                owner: Arc::clone(&owner),
                order,
            },
        ) {
            // The same run finished twice (cannot happen): forget the older entry's place.
            self.unlink(&old.owner, old.order);
        }
        self.order.insert(order, Arc::clone(&run_id));
        self.by_owner
            .entry(Arc::clone(&owner))
            .or_default()
            .push_back((order, run_id));
        self.holders.remove(&(held, Arc::clone(&owner)));
        self.holders.insert((held + 1, Arc::clone(&owner)));

        let mut evicted = Vec::new();
        while self.by_owner.get(&owner).map_or(0, VecDeque::len) > per_user {
            match self.pop_oldest_of(&owner) {
                Some(record) => evicted.push((record, Evicted::UserShare)),
                None => break,
            }
        }
        while self.by_id.len() > global {
            let Some((_, largest)) = self.holders.last().cloned() else {
                break;
            };
            match self.pop_oldest_of(&largest) {
                Some(record) => evicted.push((record, Evicted::Global)),
                None => break,
            }
        }
        evicted
    }

    /// Forgets the statuses whose retention ran out by `now`.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<(RunRecord, Evicted)> {
        let mut expired = Vec::new();
        while let Some((&order, _)) = self.order.first_key_value() {
            if order.0 > now {
                break;
            }
            let Some(run_id) = self.order.remove(&order) else {
                break;
            };
            if let Some(kept) = self.by_id.remove(&run_id) {
                self.unlink(&kept.owner, kept.order);
                expired.push((kept.record, Evicted::Expired));
            }
        }
        expired
    }

    fn pop_oldest_of(&mut self, owner: &Arc<str>) -> Option<RunRecord> {
        let (order, run_id) = self.by_owner.get(owner)?.front().cloned()?;
        self.order.remove(&order);
        let kept = self.by_id.remove(&run_id)?;
        self.unlink(&kept.owner, kept.order);
        Some(kept.record)
    }

    /// Removes the entry at `order` from its owner's list and the holders.
    fn unlink(&mut self, owner: &Arc<str>, order: Order) {
        let Some(list) = self.by_owner.get_mut(owner) else {
            return;
        };
        let held = list.len();
        // Almost always the front: statuses go oldest first.
        match list.iter().position(|(o, _)| *o == order) {
            Some(0) => {
                list.pop_front();
            }
            Some(i) => {
                list.remove(i);
            }
            None => return,
        }
        self.holders.remove(&(held, Arc::clone(owner)));
        if list.is_empty() {
            self.by_owner.remove(owner);
        } else {
            self.holders.insert((held - 1, Arc::clone(owner)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cancelkit::protocol::jsonrpc::RequestId;

    use super::super::record::{RunState, new_run_id, unix_now};
    use super::*;

    fn record(owner: &str, n: i64) -> (Arc<str>, RunRecord) {
        let run_id = new_run_id();
        let record = RunRecord {
            run_id: run_id.to_string(),
            worker: "w".into(),
            owner: owner.into(),
            request_id: RequestId::Number(n),
            name: None,
            registered_at: unix_now(),
            state: RunState::Completed,
            cancelled_at: None,
            cancel_reason: None,
            cancel_source: None,
            cancel_queued_at: None,
        };
        (run_id, record)
    }

    fn keep(kept: &mut Retained, owner: &str, n: i64, per_user: usize, global: usize) -> Arc<str> {
        let (id, r) = record(owner, n);
        let later = Instant::now() + Duration::from_secs(300);
        kept.insert(Arc::clone(&id), r, later, per_user, global);
        id
    }

    #[test]
    fn a_user_beyond_their_share_loses_their_own_oldest() {
        let mut kept = Retained::default();
        let bob = keep(&mut kept, "bob", 0, 3, 100);
        let first = keep(&mut kept, "alice", 1, 3, 100);
        for n in 2..=10 {
            keep(&mut kept, "alice", n, 3, 100);
        }
        assert!(
            kept.get(&bob).is_some(),
            "bob's status survives alice's calls"
        );
        assert!(kept.get(&first).is_none());
        assert_eq!(kept.len(), 4);
    }

    #[test]
    fn at_the_global_bound_the_largest_holder_gives_way() {
        let mut kept = Retained::default();
        let bob = keep(&mut kept, "bob", 0, 10, 5);
        let carol = keep(&mut kept, "carol", 0, 10, 5);
        for n in 1..=20 {
            keep(&mut kept, "alice", n, 10, 5);
        }
        assert!(kept.get(&bob).is_some() && kept.get(&carol).is_some());
        assert_eq!(kept.len(), 5);
        let alice = kept.by_owner.get("alice").map_or(0, VecDeque::len);
        assert_eq!(alice, 3);
    }

    #[test]
    fn statuses_expire_in_order_and_leave_nothing_behind() {
        let mut kept = Retained::default();
        let (id, r) = record("alice", 1);
        let now = Instant::now();
        kept.insert(id, r, now, 10, 10);
        let (later, r) = record("alice", 2);
        kept.insert(Arc::clone(&later), r, now + Duration::from_secs(60), 10, 10);
        assert_eq!(kept.expire(now).len(), 1);
        assert!(kept.get(&later).is_some());
        assert_eq!(kept.expire(now + Duration::from_secs(61)).len(), 1);
        assert!(kept.by_id.is_empty() && kept.order.is_empty());
        assert!(kept.by_owner.is_empty() && kept.holders.is_empty());
    }
}
