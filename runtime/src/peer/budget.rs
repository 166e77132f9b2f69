//! Budgets: the bound on what a queue may hold (bytes, or a count), as a semaphore.
//!
//! A producer takes room before it queues something and the consumer gives it back once the
//! thing is gone, so a queue's contents never exceed its budget: whoever meets the bound either
//! waits ([`Budget::take`], back-pressure) or is refused ([`Budget::try_take`]). A single item
//! larger than the whole budget costs the whole budget, so it still passes, alone.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;

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
    pub(crate) fn take(&self, cost: u32) -> impl Future<Output = bool> + Send + 'static {
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
        let waiting = tokio::spawn(budget.take(200));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        budget.give_back(900);
        assert!(waiting.await.unwrap());
        assert_eq!(budget.in_use(), 200);
        budget.close();
        assert!(!budget.take(1).await);
        assert!(!budget.try_take(1));
    }
}
