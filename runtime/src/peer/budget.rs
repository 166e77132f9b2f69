//! Budgets: the bound on what a queue may hold (bytes, or a count).
//!
//! A producer takes room before it queues something and the consumer gives it back once the
//! thing is gone, so a queue's contents never exceed its budget. [`Budget`] is for queues whose
//! producers wait for room (back-pressure); [`Counter`] for bounds that only ever refuse, and
//! so need no waiting list. An item larger than the whole budget costs the whole budget, so it
//! still passes, alone.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore};

/// Fixed per-item overhead counted on top of an item's bytes (its queue slot, its allocation's
/// header, the structs around it), so that a flood of tiny items is bounded too.
pub(crate) const ITEM_OVERHEAD: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct Budget {
    room: Arc<Semaphore>,
    max: u32,
}

impl Budget {
    /// A budget of `max` units (at most `u32::MAX`, and at least 1).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.clamp(1, (u32::MAX as usize).min(Semaphore::MAX_PERMITS)) as u32;
        Self {
            room: Arc::new(Semaphore::new(max as usize)),
            max,
        }
    }

    /// What an item of `bytes` bytes costs: its bytes plus [`ITEM_OVERHEAD`], at most the
    /// whole budget.
    pub(crate) fn cost_of_bytes(&self, bytes: usize) -> u32 {
        bytes.saturating_add(ITEM_OVERHEAD).min(self.max as usize) as u32
    }

    /// Takes `cost` units if there is room now.
    pub(crate) fn try_take(&self, cost: u32) -> bool {
        match self.room.try_acquire_many(cost) {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }

    /// Waits for room, then takes `cost` units; `false` once the budget is closed.
    pub(crate) async fn take(&self, cost: u32) -> bool {
        if self.try_take(cost) {
            return true;
        }
        match self.room.acquire_many(cost).await {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }

    /// [`take`](Self::take) as a future that owns what it needs, to be stored.
    pub(crate) fn take_owned(&self, cost: u32) -> impl Future<Output = bool> + Send + 'static {
        let room = Arc::clone(&self.room);
        async move {
            match room.acquire_many_owned(cost).await {
                Ok(permit) => {
                    permit.forget();
                    true
                }
                Err(_) => false,
            }
        }
    }

    /// Gives back units taken earlier.
    pub(crate) fn give_back(&self, cost: u32) {
        if cost > 0 {
            self.room.add_permits(cost as usize);
        }
    }

    /// Wakes every waiter with `false` and refuses all later takes.
    pub(crate) fn close(&self) {
        self.room.close();
    }

    /// How many units are taken right now.
    pub(crate) fn in_use(&self) -> usize {
        (self.max as usize).saturating_sub(self.room.available_permits())
    }
}

/// A bound that refuses at once and never makes anyone wait: a count of units in use.
#[derive(Debug)]
pub(crate) struct Counter {
    used: AtomicUsize,
    max: usize,
    /// Set once someone waits for the count to reach zero ([`Counter::emptied`]); only then is
    /// reaching zero announced.
    watched: AtomicBool,
    empty: Notify,
}

impl Counter {
    /// A counter allowing `max` units (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            max: max.max(1),
            watched: AtomicBool::new(false),
            empty: Notify::new(),
        }
    }

    /// The most units it allows.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// What an item of `bytes` bytes costs: its bytes plus [`ITEM_OVERHEAD`], at most `max`.
    pub(crate) fn cost_of_bytes(&self, bytes: usize) -> usize {
        bytes.saturating_add(ITEM_OVERHEAD).min(self.max)
    }

    /// Takes `n` units if that stays within the bound.
    pub(crate) fn try_add(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + n <= self.max).then_some(used + n)
            })
            .is_ok()
    }

    /// Gives `n` units back.
    pub(crate) fn sub(&self, n: usize) {
        let before = self.used.fetch_sub(n, Ordering::AcqRel);
        if before == n && self.watched.load(Ordering::Acquire) {
            self.empty.notify_waiters();
        }
    }

    /// Completes once no unit is in use.
    pub(crate) async fn emptied(&self) {
        self.watched.store(true, Ordering::Release);
        loop {
            let notified = self.empty.notified();
            if self.used.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn takers_wait_for_room_and_big_items_pass_alone() {
        let budget = Budget::new(1_000);
        assert_eq!(budget.cost_of_bytes(100), 164);
        assert_eq!(budget.cost_of_bytes(10_000), 1_000);
        assert!(budget.try_take(900));
        assert!(!budget.try_take(200));
        let waiting = tokio::spawn(budget.take_owned(200));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        budget.give_back(900);
        assert!(waiting.await.unwrap());
        assert_eq!(budget.in_use(), 200);
        budget.close();
        assert!(!budget.take(1).await);
        assert!(!budget.try_take(1));
    }

    #[tokio::test]
    async fn a_counter_refuses_beyond_its_bound_and_tells_when_it_empties() {
        let counter = Arc::new(Counter::new(3));
        assert_eq!(counter.cost_of_bytes(10), 3);
        assert!(counter.try_add(2));
        assert!(!counter.try_add(2));
        assert!(counter.try_add(1));
        let emptied = tokio::spawn({
            let counter = Arc::clone(&counter);
            async move { counter.emptied().await }
        });
        tokio::task::yield_now().await;
        counter.sub(1);
        tokio::task::yield_now().await;
        assert!(!emptied.is_finished());
        counter.sub(2);
        emptied.await.unwrap();
    }
}
