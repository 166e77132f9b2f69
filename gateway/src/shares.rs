//! Per-user shares of the gateway's bounds: a bound that every user draws from, and the part of
//! it one user may hold, so that one user at their limit is refused while every other user is
//! still served.
//!
//! A [`Share`] counts slots: [`Share::take`] gives a [`Slot`] (released when dropped) or says
//! which limit refused it. The per-user counts are a map with at most as many entries as the
//! global bound (a user without a slot has no entry), so the map is bounded by the bound itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The counter of refusals at a limit (labels `limit`: the configuration key, `scope`: `user`
/// or `global`).
pub const METRIC_REFUSED: &str = "cancelkit_gateway_limit_refused_total";

/// A bound with a per-user share.
#[derive(Debug)]
pub struct Share {
    /// The configuration key of the global bound, e.g. `limits.max_runs`.
    global_key: &'static str,
    /// The configuration key of the per-user share, e.g. `limits.max_runs_per_user`.
    user_key: &'static str,
    global: usize,
    per_user: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    users: HashMap<Arc<str>, usize>,
}

/// Why a slot was refused: the limit reached, to be named in the error the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The user holds their whole share.
    #[error("you hold {limit} of them, your share ({key})")]
    User {
        /// The configuration key.
        key: &'static str,
        /// The share.
        limit: usize,
    },
    /// Every user together holds the whole bound.
    #[error("the gateway holds {limit} of them, its bound ({key})")]
    Global {
        /// The configuration key.
        key: &'static str,
        /// The bound.
        limit: usize,
    },
}

impl Refused {
    /// Whether the user's own share refused it (rather than the global bound).
    pub fn is_user(&self) -> bool {
        matches!(self, Refused::User { .. })
    }
}

/// One slot of a [`Share`], held by one user; dropping it gives it back.
#[derive(Debug)]
pub struct Slot {
    share: Arc<Share>,
    user: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.share.release(&self.user);
    }
}

impl Share {
    /// A bound of `global` slots of which one user may hold `per_user` (at most `global`).
    pub fn new(
        global_key: &'static str,
        global: usize,
        user_key: &'static str,
        per_user: usize,
    ) -> Arc<Share> {
        Arc::new(Share {
            global_key,
            user_key,
            global,
            per_user: per_user.min(global),
            counts: Mutex::new(Counts::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `user`, or the limit that refuses it (counted in [`METRIC_REFUSED`]).
    pub fn take(self: &Arc<Self>, user: &Arc<str>) -> Result<Slot, Refused> {
        let refused = {
            let mut counts = self.lock();
            let held = counts.users.get(user).copied().unwrap_or(0);
            if held >= self.per_user {
                Some(Refused::User {
                    key: self.user_key,
                    limit: self.per_user,
                })
            } else if counts.total >= self.global {
                Some(Refused::Global {
                    key: self.global_key,
                    limit: self.global,
                })
            } else {
                counts.total += 1;
                *counts.users.entry(Arc::clone(user)).or_insert(0) += 1;
                None
            }
        };
        match refused {
            Some(refused) => {
                let (key, scope) = match &refused {
                    Refused::User { key, .. } => (*key, "user"),
                    Refused::Global { key, .. } => (*key, "global"),
                };
                metrics::counter!(METRIC_REFUSED, "limit" => key, "scope" => scope).increment(1);
                Err(refused)
            }
            None => Ok(Slot {
                share: Arc::clone(self),
                user: Arc::clone(user),
            }),
        }
    }

    fn release(&self, user: &Arc<str>) {
        let mut counts = self.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(held) = counts.users.get_mut(user) {
            *held -= 1;
            if *held == 0 {
                counts.users.remove(user);
            }
        }
    }

    /// Slots held in all, and by how many users.
    pub fn held(&self) -> (usize, usize) {
        let counts = self.lock();
        (counts.total, counts.users.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn a_user_at_their_share_is_refused_while_others_are_served() {
        let share = Share::new("limits.max_runs", 5, "limits.max_runs_per_user", 2);
        let (alice, bob) = (user("alice"), user("bob"));
        let a1 = share.take(&alice).unwrap();
        let _a2 = share.take(&alice).unwrap();
        let refused = share.take(&alice).unwrap_err();
        assert!(refused.is_user(), "{refused:?}");
        assert!(refused.to_string().contains("limits.max_runs_per_user"));
        let _b1 = share.take(&bob).unwrap();
        drop(a1);
        let _a3 = share.take(&alice).unwrap();
        assert_eq!(share.held(), (3, 2));
    }

    #[test]
    fn the_global_bound_holds_across_users_and_slots_come_back() {
        let share = Share::new("limits.max_runs", 3, "limits.max_runs_per_user", 2);
        let slots: Vec<Slot> = ["a", "b", "c"]
            .iter()
            .map(|u| share.take(&user(u)).unwrap())
            .collect();
        let refused = share.take(&user("d")).unwrap_err();
        assert_eq!(
            refused,
            Refused::Global {
                key: "limits.max_runs",
                limit: 3
            }
        );
        drop(slots);
        assert_eq!(
            share.held(),
            (0, 0),
            "every slot and every user entry is gone"
        );
        assert!(share.take(&user("d")).is_ok());
    }
}
