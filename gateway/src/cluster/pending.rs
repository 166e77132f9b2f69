//! The writes waiting for Redis: bounded, coalesced per key, and fair.
//!
//! Every non-blocking call of [`Cluster`](super::Cluster) lands here and the link task writes it
//! (at once while Redis is up; after the reconnect otherwise). A newer write for the same key
//! (the same run's record, the same run's cancel, ...) replaces the older one and moves to the
//! back. Two kinds of write wait:
//! - *cancels* (a cancel for another worker's run, a tombstone, a deferred tombstone claim):
//!   one that was admitted stays until it is written, however long Redis is away. They are
//!   admitted within shares ([`Shares`]): a user's cancels, all users' together, and the whole
//!   bound. A NEW cancel beyond a share is refused ([`QueueFull`]); a queued one is never
//!   dropped to make room, and never for a record.
//! - *the rest* (records, acks, index prunes): at the bound the oldest of these goes, counted
//!   in `cancelkit_gateway_redis_dropped_total` and warned about once per outage. A dropped
//!   record is written again by the resync (the worker still holds the run), an ack nobody
//!   waits for any more means nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;

use super::QueueFull;
use crate::runs::record::{RunRecord, Tombstone};

/// One write.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// A run's record and its bare-id index.
    Record(RunRecord),
    /// A tombstone: stored, indexed and published.
    Tombstone(Tombstone),
    /// A cancel for another worker's run: the marker stored and the message published.
    Cancel {
        /// The run.
        run_id: String,
        /// The reason given with the cancel.
        reason: Option<String>,
        /// Who asked (a user's subject), or `None` for an admin.
        by: Option<String>,
    },
    /// A claim of a tombstone for a run of this worker that could not be made at once: made
    /// after the reconnect (or after the tombstone's own write), and the run cancelled if it
    /// wins.
    Claim {
        /// The tombstone.
        tombstone: Tombstone,
        /// The run it would cancel.
        run_id: String,
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
            Op::Claim { tombstone, .. } => Key::Claim(tombstone.id.clone()),
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
            Op::Claim { .. } => "claim",
            Op::Ack(_) => "ack",
            Op::Prune { .. } => "prune",
        }
    }

    /// Whose share a cancel draws from; `None` for the writes that may be dropped.
    fn share(&self) -> Option<Owner> {
        let owner = |user: &Option<String>| match user {
            Some(user) => Owner::User(user.clone()),
            None => Owner::Admin,
        };
        match self {
            Op::Tombstone(tombstone) => Some(owner(&tombstone.scope)),
            Op::Claim { tombstone, .. } => Some(owner(&tombstone.scope)),
            Op::Cancel { by, .. } => Some(owner(by)),
            Op::Record(_) | Op::Ack(_) | Op::Prune { .. } => None,
        }
    }
}

/// Who a queued cancel counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Owner {
    /// An admin's (a cancel that may act on anyone's run): bounded by the whole queue only.
    Admin,
    /// One user's.
    User(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Record(String),
    Tombstone(String),
    Cancel(String),
    Claim(String),
    Ack(String),
    Prune(String, String),
}

/// A write taken out to be sent, with what it takes to put it back where it was.
#[derive(Debug)]
pub(super) struct Taken {
    seq: u64,
    share: Option<Owner>,
    /// The write.
    pub op: Op,
    /// When it was first queued.
    pub queued_at: Instant,
}

#[derive(Debug)]
struct Entry {
    seq: u64,
    share: Option<Owner>,
    op: Op,
    queued_at: Instant,
}

/// How many cancels may wait: in all, for all users together, and for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shares {
    /// Every write (and so every cancel).
    pub all: usize,
    /// The cancels of users without admin rights, together: half the bound, so an admin's
    /// cancels always find room.
    pub users: usize,
    /// One user's cancels: an eighth of the bound.
    pub user: usize,
}

impl Shares {
    /// The shares of a queue of `bound` writes (at least 1 each).
    pub(super) fn of(bound: usize) -> Shares {
        let all = bound.max(1);
        Shares {
            all,
            users: (all / 2).max(1),
            user: (all / 8).max(1),
        }
    }
}

/// The cancels held (waiting or being written), by whose share they draw from.
#[derive(Debug, Default)]
struct Held {
    all: usize,
    users: usize,
    by_user: HashMap<String, usize>,
}

impl Held {
    fn add(&mut self, owner: &Owner) {
        self.all += 1;
        if let Owner::User(user) = owner {
            self.users += 1;
            *self.by_user.entry(user.clone()).or_insert(0) += 1;
        }
    }

    fn release(&mut self, owner: &Owner) {
        self.all = self.all.saturating_sub(1);
        if let Owner::User(user) = owner {
            self.users = self.users.saturating_sub(1);
            if let Some(count) = self.by_user.get_mut(user) {
                *count -= 1;
                if *count == 0 {
                    self.by_user.remove(user);
                }
            }
        }
    }
}

/// The queue.
#[derive(Debug)]
pub(super) struct Pending {
    shares: Shares,
    next_seq: u64,
    /// Every waiting write, oldest first.
    order: BTreeMap<u64, Key>,
    /// The waiting writes that may be dropped at the bound, oldest first.
    droppable: BTreeSet<u64>,
    entries: HashMap<Key, Entry>,
    held: Held,
    /// Tombstones taken out and being written now.
    tombstones_in_flight: HashSet<String>,
    /// How many writes were taken out and are being sent.
    in_flight: usize,
    /// Drops since the last time Redis was reachable.
    dropped_in_outage: u64,
    /// A record was dropped since the last full rewrite of this worker's records.
    records_dropped: bool,
}

/// Whether a tombstone had reached Redis ([`Pending::claim_unwritten_tombstone`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unwritten {
    /// It was waiting: claimed here (dropped from the queue).
    Claimed,
    /// It is being written now.
    Writing,
    /// It is not queued (written, or never this worker's).
    No,
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
            shares: Shares::of(bound),
            next_seq: 0,
            order: BTreeMap::new(),
            droppable: BTreeSet::new(),
            entries: HashMap::new(),
            held: Held::default(),
            tombstones_in_flight: HashSet::new(),
            in_flight: 0,
            dropped_in_outage: 0,
            records_dropped: false,
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

    /// How many cancels wait or are being sent.
    pub(super) fn cancels(&self) -> usize {
        self.held.all
    }

    /// Queues `op`, replacing a waiting write for the same key (which keeps its age and its
    /// place in its share). A new cancel beyond its share is refused; other writes beyond the
    /// bound drop the oldest droppable write (possibly `op` itself), and say which.
    pub(super) fn push(&mut self, op: Op) -> Result<Vec<Dropped>, QueueFull> {
        let key = op.key();
        let seq = self.next_seq;
        self.next_seq += 1;
        let (queued_at, share) = match self.entries.remove(&key) {
            Some(old) => {
                self.order.remove(&old.seq);
                self.droppable.remove(&old.seq);
                // A coalesced write keeps its age and the share it was admitted in.
                (old.queued_at, old.share)
            }
            None => {
                let share = op.share();
                if let Some(owner) = &share {
                    self.admit(owner)?;
                    self.held.add(owner);
                }
                (Instant::now(), share)
            }
        };
        self.insert(
            key,
            Entry {
                seq,
                share,
                op,
                queued_at,
            },
        );
        Ok(self.enforce_bound())
    }

    /// Whether a new cancel of `owner`'s fits its shares.
    fn admit(&self, owner: &Owner) -> Result<(), QueueFull> {
        let shares = self.shares;
        if self.held.all >= shares.all {
            return Err(QueueFull::All { limit: shares.all });
        }
        if let Owner::User(user) = owner {
            if self.held.by_user.get(user).copied().unwrap_or(0) >= shares.user {
                return Err(QueueFull::User { limit: shares.user });
            }
            if self.held.users >= shares.users {
                return Err(QueueFull::Users {
                    limit: shares.users,
                });
            }
        }
        Ok(())
    }

    fn insert(&mut self, key: Key, entry: Entry) {
        self.order.insert(entry.seq, key.clone());
        if entry.share.is_none() {
            self.droppable.insert(entry.seq);
        }
        self.entries.insert(key, entry);
    }

    /// Takes up to `max` of the oldest writes out to send them; tombstones among them count as
    /// in flight until [`finish`](Self::finish) (or [`put_back`](Self::put_back)), and cancels
    /// keep their place in their share.
    pub(super) fn take(&mut self, max: usize) -> Vec<Taken> {
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some((seq, key)) = self.order.pop_first() else {
                break;
            };
            self.droppable.remove(&seq);
            let Some(entry) = self.entries.remove(&key) else {
                continue;
            };
            if let Op::Tombstone(tombstone) = &entry.op {
                self.tombstones_in_flight.insert(tombstone.id.clone());
            }
            taken.push(Taken {
                seq,
                share: entry.share,
                op: entry.op,
                queued_at: entry.queued_at,
            });
        }
        self.in_flight = taken.len();
        taken
    }

    /// Puts writes that could not be sent back in their old places, unless a newer write for
    /// the same key arrived meanwhile; then enforces the bound (on droppable writes only: the
    /// put-back ones are the oldest, so they go first).
    pub(super) fn put_back(&mut self, taken: Vec<Taken>) -> Vec<Dropped> {
        self.in_flight = self.in_flight.saturating_sub(taken.len());
        self.tombstones_in_flight.clear();
        for Taken {
            seq,
            share,
            op,
            queued_at,
        } in taken
        {
            let key = op.key();
            if self.entries.contains_key(&key) {
                // The newer write was admitted on its own.
                if let Some(owner) = &share {
                    self.held.release(owner);
                }
                continue;
            }
            self.insert(
                key,
                Entry {
                    seq,
                    share,
                    op,
                    queued_at,
                },
            );
        }
        self.enforce_bound()
    }

    /// The batch was written: its cancels leave their shares.
    pub(super) fn finish(&mut self, batch: &[Taken]) {
        for taken in batch {
            if let Some(owner) = &taken.share {
                self.held.release(owner);
            }
        }
        self.in_flight = self.in_flight.saturating_sub(batch.len());
        self.tombstones_in_flight.clear();
    }

    /// Claims tombstone `id` locally if it has not reached Redis yet: a waiting write is
    /// dropped (no other worker ever saw it). One being written may be published already: it
    /// must be claimed in Redis, after its write.
    pub(super) fn claim_unwritten_tombstone(&mut self, id: &str) -> Unwritten {
        let key = Key::Tombstone(id.to_owned());
        if let Some(entry) = self.entries.remove(&key) {
            self.order.remove(&entry.seq);
            self.droppable.remove(&entry.seq);
            if let Some(owner) = &entry.share {
                self.held.release(owner);
            }
            return Unwritten::Claimed;
        }
        if self.tombstones_in_flight.contains(id) {
            return Unwritten::Writing;
        }
        Unwritten::No
    }

    /// Redis is reachable again: returns how many writes were dropped while it was away.
    pub(super) fn end_outage(&mut self) -> u64 {
        std::mem::take(&mut self.dropped_in_outage)
    }

    /// Whether a record was dropped since the last call (then every record must be written
    /// again).
    pub(super) fn take_records_dropped(&mut self) -> bool {
        std::mem::take(&mut self.records_dropped)
    }

    fn enforce_bound(&mut self) -> Vec<Dropped> {
        let mut dropped = Vec::new();
        while self.entries.len() > self.shares.all {
            let Some(seq) = self.droppable.pop_first() else {
                break;
            };
            let Some(key) = self.order.remove(&seq) else {
                continue;
            };
            if let Some(entry) = self.entries.remove(&key) {
                self.dropped_in_outage += 1;
                if matches!(entry.op, Op::Record(_)) {
                    self.records_dropped = true;
                }
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
#[path = "pending_tests.rs"]
mod tests;
