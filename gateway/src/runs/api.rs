//! What the cancellation API asks of the registry: the runs a selector names (here, and on
//! the other workers), a run's status, a cancel, and the tombstone a cancel that finds nothing
//! leaves — within its maker's share and the bound.

use std::sync::Arc;
use std::time::Instant;

use crate::auth::Caller;
use crate::cluster::RemoteCancel;

use super::record::{self, CancelSource, RunRecord, RunState, Tombstone, unix_now};
use super::{ApiError, CancelOutcome, Runs};

impl Runs {
    /// Every run on this worker the selector names (live first, then retained).
    pub(super) fn local_matches(&self, selector: &str) -> Vec<RunRecord> {
        let mut state = self.lock();
        self.expire(&mut state);
        let record = |run_id: &str| {
            state
                .live
                .get(run_id)
                .map(|l| &l.record)
                .or_else(|| state.retained.get(run_id))
        };
        let by_run_id = record(selector).filter(|r| r.matches(selector));
        // A run id names its run only, never a client's string id that happens to equal it.
        let by_request = state
            .by_request
            .get(selector)
            .filter(|_| !record::is_run_id(selector))
            .into_iter()
            .flatten()
            .filter_map(|run_id| record(run_id))
            .filter(|r| r.run_id != selector);
        let mut found: Vec<RunRecord> = by_run_id.into_iter().chain(by_request).cloned().collect();
        // Live first, then retained.
        found.sort_by_key(|r| !state.live.contains_key(r.run_id.as_str()));
        found
    }

    /// The runs the caller may see that `selector` names, on every worker; and whether the
    /// other workers could be asked.
    async fn visible(&self, selector: &str, caller: &Caller) -> (Vec<RunRecord>, bool) {
        let mut found = self.local_matches(selector);
        let mut complete = true;
        // A run id names one run: found here, there is nothing to ask the others.
        let settled = record::is_run_id(selector) && found.iter().any(|r| r.run_id == selector);
        if let Some(cluster) = self.cluster().filter(|_| !settled) {
            // A user's lookup reads only its own index: exact however many runs others have.
            let owner = (!caller.is_admin()).then_some(&*caller.sub);
            match cluster.find(selector, owner).await {
                Ok(remote) => {
                    for record in remote {
                        if !found.iter().any(|r| r.run_id == record.run_id) {
                            found.push(record);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!("lookup on the other workers failed: {e}");
                    complete = false;
                }
            }
        }
        found.retain(|r| caller.may_act_for(&r.owner) && r.matches(selector));
        (found, complete)
    }

    /// `GET /cancellation/status/{requestId}`.
    pub async fn status(&self, selector: &str, caller: &Caller) -> Result<RunRecord, ApiError> {
        let (mut found, _) = self.visible(selector, caller).await;
        match found.len() {
            0 if caller.is_admin() => Err(ApiError::NotFound),
            0 => Err(ApiError::Forbidden),
            1 => Ok(found.remove(0)),
            n => Err(ApiError::Ambiguous(n)),
        }
    }

    /// `POST /cancellation/cancel`. `user` (an admin's only) says whose run a cancel that
    /// finds nothing waits for.
    pub async fn cancel(
        &self,
        selector: &str,
        caller: &Caller,
        reason: Option<String>,
        user: Option<&str>,
    ) -> Result<CancelOutcome, ApiError> {
        if user.is_some() && !caller.is_admin() {
            return Err(ApiError::UserNotAllowed);
        }
        let (mut found, complete) = self.visible(selector, caller).await;
        if let Some(user) = user {
            found.retain(|r| r.owner == user);
        }
        match found.len() {
            0 => {
                // Nothing the caller may see. An admin's cancel waits for the run: one run id
                // names one run whoever owns it, a bare id only the runs of the user the admin
                // names. A user's own cancel waits when the other workers cannot be asked
                // (their run may be there).
                let scope = if caller.is_admin() {
                    match user {
                        Some(user) => Some(user.to_owned()),
                        None if record::is_run_id(selector) => None,
                        None => return Err(ApiError::NoRunYet),
                    }
                } else if !complete {
                    Some(caller.sub.to_string())
                } else {
                    return Err(ApiError::Forbidden);
                };
                self.leave_tombstone(selector, scope, reason, &caller.sub)?;
                Ok(CancelOutcome::Queued)
            }
            1 => {
                let record = found.remove(0);
                if record.worker == self.settings.worker {
                    if self.cancel_live(&record.run_id, CancelSource::Api, reason) {
                        return Ok(CancelOutcome::Cancelled);
                    }
                    // Ended meanwhile, or retained.
                    let now = self.local_matches(&record.run_id);
                    let cancelled = now.first().unwrap_or(&record).state == RunState::Cancelled;
                    return Ok(if cancelled {
                        CancelOutcome::Cancelled
                    } else {
                        CancelOutcome::Queued
                    });
                }
                match record.state {
                    RunState::Cancelled => Ok(CancelOutcome::Cancelled),
                    RunState::Completed | RunState::Failed => Ok(CancelOutcome::Queued),
                    // A lost run's worker stopped answering: the cancel is sent (it may come
                    // back) and answered `queued`, never `cancelled`.
                    RunState::Running | RunState::Lost => {
                        let Some(cluster) = self.cluster() else {
                            return Ok(CancelOutcome::Queued);
                        };
                        let by = (!caller.is_admin()).then_some(&*caller.sub);
                        match cluster.cancel_remote(&record, reason, by).await {
                            Ok(RemoteCancel::Stopped) => Ok(CancelOutcome::Cancelled),
                            Ok(RemoteCancel::Sent | RemoteCancel::Deferred) => {
                                Ok(CancelOutcome::Queued)
                            }
                            Err(full) => Err(queue_full(full)),
                        }
                    }
                }
            }
            n => Err(ApiError::Ambiguous(n)),
        }
    }

    /// Keeps a cancel for a run not registered yet, within `maker`'s share and the bound.
    fn leave_tombstone(
        &self,
        selector: &str,
        scope: Option<String>,
        reason: Option<String>,
        maker: &Arc<str>,
    ) -> Result<(), ApiError> {
        let tombstone = Tombstone {
            id: uuid::Uuid::new_v4().simple().to_string(),
            selector: selector.to_owned(),
            scope,
            reason,
            expires_at: unix_now() + self.settings.tombstone_ttl.as_secs_f64(),
        };
        {
            let mut state = self.lock();
            self.expire(&mut state);
            let held = state.tombstones_by.get(maker).copied().unwrap_or(0);
            let refused = if held >= self.settings.max_tombstones_per_user {
                Some(ApiError::TooManyWaiting {
                    key: "limits.max_tombstones_per_user",
                    limit: self.settings.max_tombstones_per_user,
                    user: true,
                })
            } else if state.tombstone_maker.len() >= self.settings.max_tombstones {
                Some(ApiError::TooManyWaiting {
                    key: "limits.max_tombstones",
                    limit: self.settings.max_tombstones,
                    user: false,
                })
            } else {
                None
            };
            if let Some(refused) = refused {
                if let ApiError::TooManyWaiting { key, user, .. } = &refused {
                    let scope = if *user { "user" } else { "global" };
                    metrics::counter!(crate::shares::METRIC_REFUSED, "limit" => *key, "scope" => scope)
                        .increment(1);
                }
                return Err(refused);
            }
            state.tombstones.push_back((
                Instant::now() + self.settings.tombstone_ttl,
                tombstone.clone(),
            ));
            state
                .tombstone_maker
                .insert(tombstone.id.clone(), Arc::clone(maker));
            *state.tombstones_by.entry(Arc::clone(maker)).or_insert(0) += 1;
            self.expire(&mut state);
        }
        tracing::info!(
            selector = ?selector,
            "cancel for a run not registered yet: kept for {:?}",
            self.settings.tombstone_ttl
        );
        if let Some(cluster) = self.cluster()
            && let Err(full) = cluster.tombstone(&tombstone)
        {
            // Not queued for the other workers (Redis is away and its share of the queue is
            // full): not kept here either, and the caller is told.
            let mut state = self.lock();
            if let Some(i) = state
                .tombstones
                .iter()
                .position(|(_, t)| t.id == tombstone.id)
            {
                state.tombstones.remove(i);
            }
            state.forget_tombstone(&tombstone);
            return Err(queue_full(full));
        }
        Ok(())
    }
}

/// A cancel that would wait for Redis, refused at its share of the queue (the cluster's
/// [`QueueFull`](crate::cluster::QueueFull)): 429 for the caller's own share, 503 otherwise.
fn queue_full(full: crate::cluster::QueueFull) -> ApiError {
    ApiError::TooManyWaiting {
        key: full.key(),
        limit: full.limit(),
        user: full.is_own_share(),
    }
}
