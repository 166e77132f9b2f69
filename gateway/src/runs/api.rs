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

    /// The runs the caller may see that `selector` names, on every worker that can be asked
    /// (while Redis is away, only this one: a cancel that finds nothing then waits as a
    /// tombstone, which reaches the others when Redis is back).
    async fn visible(&self, selector: &str, caller: &Caller) -> Vec<RunRecord> {
        let mut found = self.local_matches(selector);
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
                Err(e) => tracing::debug!("lookup on the other workers failed: {e}"),
            }
        }
        found.retain(|r| caller.may_act_for(&r.owner) && r.matches(selector));
        found
    }

    /// `GET /cancellation/status/{requestId}`: the run the selector names that a cancel would
    /// act on — the one still live, else the newest — and the run ids of the others it names
    /// (a client that numbers its requests per session reuses its ids, so a bare id may name
    /// finished runs beside the live one). 404 when it names none the caller may see.
    pub async fn status(&self, selector: &str, caller: &Caller) -> Result<Status, ApiError> {
        let found = self.visible(selector, caller).await;
        let mut found = by_relevance(found);
        if found.is_empty() {
            return Err(ApiError::NotFound);
        }
        let record = found.remove(0);
        let others = found.into_iter().map(|r| r.run_id).collect();
        Ok(Status { record, others })
    }

    /// `POST /cancellation/cancel`. `user` (an admin's only) narrows a bare id to that user's
    /// runs, and says whose run a cancel that finds none waits for.
    ///
    /// The run a bare id names is the one still live: finished runs with the same id (a
    /// client reusing its ids in a new session) never make a cancel ambiguous. Several live
    /// runs do (409, the run ids say which). A cancel that finds no live run is `queued`: a
    /// bare id, or a run id not seen yet, waits as a tombstone for the race window
    /// (`tombstone_ttl`) and stops the first matching run that registers in it — one of the
    /// caller's own for a user, one of the named `user`'s when an admin names one, anyone's
    /// for an admin who does not.
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
        let mut found = self.visible(selector, caller).await;
        if let Some(user) = user {
            found.retain(|r| r.owner == user);
        }
        let found = by_relevance(found);
        let live: Vec<&RunRecord> = found.iter().filter(|r| is_live(r)).collect();
        match live.as_slice() {
            [] => {}
            [record] => return self.cancel_found(record, caller, reason).await,
            several => {
                return Err(ApiError::Ambiguous(
                    several.iter().map(|r| r.run_id.clone()).collect(),
                ));
            }
        }
        // No live run. A cancel of a run that was already cancelled is answered as the first
        // one was; one for a finished run it names by run id has nothing left to wait for.
        if let Some(newest) = found.first() {
            if newest.state == RunState::Cancelled {
                return Ok(CancelOutcome::Cancelled);
            }
            if record::is_run_id(selector) {
                return Ok(CancelOutcome::Queued);
            }
        }
        // It waits for its run, scoped to whose runs it may stop.
        let scope = match user {
            Some(user) => Some(user.to_owned()),
            None if caller.is_admin() => None,
            None => Some(caller.sub.to_string()),
        };
        self.leave_tombstone(selector, scope, reason, &caller.sub)?;
        Ok(CancelOutcome::Queued)
    }

    /// Cancels the one live run a cancel found, here or on its worker.
    async fn cancel_found(
        &self,
        record: &RunRecord,
        caller: &Caller,
        reason: Option<String>,
    ) -> Result<CancelOutcome, ApiError> {
        if record.worker == self.settings.worker {
            if self.cancel_live(&record.run_id, CancelSource::Api, reason) {
                return Ok(CancelOutcome::Cancelled);
            }
            // Ended meanwhile (or its answer won the race): what it ended as.
            let now = self.local_matches(&record.run_id);
            let cancelled = now.first().unwrap_or(record).state == RunState::Cancelled;
            return Ok(if cancelled {
                CancelOutcome::Cancelled
            } else {
                CancelOutcome::Queued
            });
        }
        // A lost run's worker stopped answering: the cancel is sent (it may come back) and
        // answered `queued`, never `cancelled`.
        let Some(cluster) = self.cluster() else {
            return Ok(CancelOutcome::Queued);
        };
        let by = (!caller.is_admin()).then_some(&*caller.sub);
        match cluster.cancel_remote(record, reason, by).await {
            Ok(RemoteCancel::Stopped) => Ok(CancelOutcome::Cancelled),
            Ok(RemoteCancel::Sent | RemoteCancel::Deferred) => Ok(CancelOutcome::Queued),
            Err(full) => Err(queue_full(full)),
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
            made_at: unix_now(),
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

/// Whether a cancel can still stop the run (`lost`: its worker may come back).
fn is_live(record: &RunRecord) -> bool {
    matches!(record.state, RunState::Running | RunState::Lost)
}

/// Live runs first, then the newest.
fn by_relevance(mut found: Vec<RunRecord>) -> Vec<RunRecord> {
    found.sort_by(|a, b| {
        is_live(b)
            .cmp(&is_live(a))
            .then(b.registered_at.total_cmp(&a.registered_at))
    });
    found
}

/// What `GET /cancellation/status/{requestId}` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The run reported: the live one the selector names, else the newest.
    pub record: RunRecord,
    /// The run ids of the other runs the selector names that the caller may see.
    pub others: Vec<String>,
}

impl Status {
    /// The status body: the run's (see [`RunRecord::status_body`]), plus `other_run_ids`
    /// when the selector names other runs too.
    pub fn body(&self) -> serde_json::Value {
        let mut body = self.record.status_body();
        if !self.others.is_empty() {
            body["other_run_ids"] = serde_json::json!(self.others);
        }
        body
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
