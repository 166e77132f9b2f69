//! Runs: every `tools/call` the gateway forwards, who may cancel it, and its status.
//!
//! [`Runs`] is this worker's registry. A run is keyed by [`RunKey`] (user, session or
//! connection, typed JSON-RPC id) so two clients' id `1` never meet, and named by a
//! gateway-wide unique run id. Cancels name a run by its run id or by a bare JSON-RPC id; a
//! bare id that names several runs the caller may see is refused as ambiguous rather than
//! guessed. A cancel that finds no run leaves a [`Tombstone`] that cancels the first matching
//! run to register. Finished runs keep their status for the configured retention. With Redis
//! (`crate::cluster`), records, cancels and tombstones are shared by every worker.
//!
//! Bounds: at most `max_runs` live runs (a new one beyond is refused, [`RegisterError::Full`]),
//! `max_retained` finished statuses and `max_tombstones` tombstones (the oldest are forgotten
//! first, with a warning).

mod local;
pub mod record;
mod run;
mod settings;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::cluster::{Cluster, LocalRuns, RemoteCancel};
use record::{CancelSource, RunKey, RunRecord, RunState, Tombstone, new_run_id, unix_now};
pub use run::Run;
pub use settings::{ApiError, CancelOutcome, RegisterError, Settings};

#[derive(Debug)]
struct Live {
    key: RunKey,
    record: RunRecord,
    token: CancellationToken,
    cancelled: Option<(Instant, CancelSource)>,
}

#[derive(Debug, Default)]
struct State {
    live: HashMap<Arc<str>, Live>,
    by_key: HashMap<RunKey, Arc<str>>,
    retained: HashMap<Arc<str>, RunRecord>,
    /// Finished runs in the order they finished (= the order they expire).
    retained_order: VecDeque<(Instant, Arc<str>)>,
    /// Tombstones in the order they were made, with their local expiry.
    tombstones: VecDeque<(Instant, Tombstone)>,
    /// The runs, live and retained, by their request id as a selector names it: a lookup by
    /// request id reads its runs instead of scanning every run kept.
    by_request: HashMap<String, Vec<Arc<str>>>,
}

impl State {
    fn index(&mut self, record: &RunRecord, run_id: &Arc<str>) {
        self.by_request
            .entry(record::selector_of(&record.request_id))
            .or_default()
            .push(Arc::clone(run_id));
    }

    fn unindex(&mut self, record: &RunRecord, run_id: &str) {
        let selector = record::selector_of(&record.request_id);
        if let Some(runs) = self.by_request.get_mut(&selector) {
            runs.retain(|r| &**r != run_id);
            if runs.is_empty() {
                self.by_request.remove(&selector);
            }
        }
    }
}

/// This worker's runs.
#[derive(Debug)]
pub struct Runs {
    settings: Settings,
    state: Mutex<State>,
    cluster: OnceLock<Cluster>,
    me: Weak<Runs>,
}

impl Runs {
    /// A registry; with `cluster_settings`, linked to the other workers through Redis.
    pub fn new(
        settings: Settings,
        cluster_settings: Option<crate::cluster::Settings>,
    ) -> Arc<Runs> {
        let runs = Arc::new_cyclic(|me| Runs {
            settings,
            state: Mutex::new(State::default()),
            cluster: OnceLock::new(),
            me: me.clone(),
        });
        if let Some(cluster_settings) = cluster_settings {
            let weak: Weak<Runs> = Arc::downgrade(&runs);
            let weak: Weak<dyn LocalRuns> = weak;
            let _ = runs.cluster.set(Cluster::start(cluster_settings, weak));
        }
        runs
    }

    /// The link to the other workers, if any.
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.get()
    }

    /// This worker's id.
    pub fn worker(&self) -> &str {
        &self.settings.worker
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many runs are in flight here.
    pub fn in_flight(&self) -> usize {
        self.lock().live.len()
    }

    /// How many finished statuses and tombstones are kept (for tests of the bounds).
    pub fn kept(&self) -> (usize, usize) {
        let mut state = self.lock();
        self.expire(&mut state);
        (state.retained.len(), state.tombstones.len())
    }

    /// Registers a run for `key`. A tombstone that names it cancels it at once (the returned
    /// run's token is already cancelled, source API).
    pub async fn register(
        self: &Arc<Self>,
        key: RunKey,
        name: Option<String>,
    ) -> Result<Run, RegisterError> {
        let run_id = new_run_id();
        let token = CancellationToken::new();
        let (record, tombstone) = {
            let mut state = self.lock();
            if state.by_key.contains_key(&key) {
                return Err(RegisterError::Duplicate);
            }
            if state.live.len() >= self.settings.max_runs {
                return Err(RegisterError::Full);
            }
            self.expire(&mut state);
            let record = RunRecord {
                run_id: run_id.to_string(),
                worker: self.settings.worker.clone(),
                owner: key.user.to_string(),
                request_id: key.id.clone(),
                name,
                registered_at: unix_now(),
                state: RunState::Running,
                cancelled_at: None,
                cancel_reason: None,
                cancel_source: None,
            };
            let tombstone = state
                .tombstones
                .iter()
                .position(|(_, t)| t.applies_to(&record))
                .and_then(|i| state.tombstones.remove(i))
                .map(|(_, t)| t);
            state.by_key.insert(key.clone(), Arc::clone(&run_id));
            state.index(&record, &run_id);
            state.live.insert(
                Arc::clone(&run_id),
                Live {
                    key,
                    record: record.clone(),
                    token: token.clone(),
                    cancelled: None,
                },
            );
            (record, tombstone)
        };
        metrics::counter!("cancelkit_gateway_runs_started_total").increment(1);
        metrics::gauge!("cancelkit_gateway_runs_in_flight").increment(1.0);
        if let Some(cluster) = self.cluster() {
            cluster.record(&record);
        }
        let run = Run::new(Arc::clone(self), Arc::clone(&run_id), token);
        if let Some(tombstone) = tombstone {
            let claimed = match self.cluster() {
                Some(cluster) => cluster.claim_tombstone(&tombstone.id).await,
                None => true,
            };
            if claimed {
                tracing::info!(run_id = %run_id, selector = %tombstone.selector, "a cancel that arrived before this run registered applies to it");
                self.cancel_live(&run_id, CancelSource::Api, tombstone.reason);
            }
        }
        Ok(run)
    }

    /// Cancels a live run here; returns whether it is cancelled now (also when it already
    /// was). Sets its cancel time, reason and source the first time.
    pub(crate) fn cancel_live(
        &self,
        run_id: &str,
        source: CancelSource,
        reason: Option<String>,
    ) -> bool {
        let record = {
            let mut state = self.lock();
            let Some(live) = state.live.get_mut(run_id) else {
                return false;
            };
            if live.cancelled.is_some() {
                return true;
            }
            live.cancelled = Some((Instant::now(), source));
            live.record.cancelled_at = Some(unix_now());
            live.record.cancel_reason = reason;
            live.record.cancel_source = Some(source);
            live.token.cancel();
            live.record.clone()
        };
        metrics::counter!("cancelkit_gateway_cancels_total", "source" => source.as_str())
            .increment(1);
        tracing::info!(
            run_id,
            source = source.as_str(),
            reason = record.cancel_reason.as_deref().unwrap_or(""),
            "run cancelled"
        );
        if let Some(cluster) = self.cluster() {
            cluster.record(&record);
        }
        true
    }

    /// The client that started the run under `key` cancelled it (its own
    /// `notifications/cancelled`, a closed 2026-07-28 stream, a deleted session).
    pub fn cancel_key(&self, key: &RunKey, source: CancelSource, reason: Option<String>) -> bool {
        let run_id = self.lock().by_key.get(key).cloned();
        run_id.is_some_and(|id| self.cancel_live(&id, source, reason))
    }

    /// Cancels every live run `user` started on `channel` (a deleted session).
    pub fn cancel_channel(&self, user: &str, channel: &str, source: CancelSource) -> usize {
        let ids: Vec<Arc<str>> = self
            .lock()
            .by_key
            .iter()
            .filter(|(key, _)| &*key.user == user && &*key.channel == channel)
            .map(|(_, id)| Arc::clone(id))
            .collect();
        ids.iter()
            .filter(|id| self.cancel_live(id, source, Some("the session ended".to_owned())))
            .count()
    }

    /// Cancels every live run (shutdown).
    pub fn cancel_all(&self, source: CancelSource, reason: &str) -> usize {
        let ids: Vec<Arc<str>> = self.lock().live.keys().cloned().collect();
        ids.iter()
            .filter(|id| self.cancel_live(id, source, Some(reason.to_owned())))
            .count()
    }

    /// When and by whom a live run was cancelled.
    pub(crate) fn cancellation(
        &self,
        run_id: &str,
    ) -> Option<(Instant, CancelSource, Option<String>)> {
        let state = self.lock();
        let live = state.live.get(run_id)?;
        let (at, source) = live.cancelled?;
        Some((at, source, live.record.cancel_reason.clone()))
    }

    /// Ends a run: its status is kept for the retention.
    pub(crate) fn finish(&self, run_id: &str, outcome: RunState) {
        let record = {
            let mut state = self.lock();
            let Some(live) = state.live.remove(run_id) else {
                return;
            };
            state.by_key.remove(&live.key);
            let mut record = live.record;
            record.state = if live.cancelled.is_some() {
                RunState::Cancelled
            } else {
                outcome
            };
            let id: Arc<str> = Arc::from(run_id);
            state
                .retained_order
                .push_back((Instant::now() + self.settings.retention, Arc::clone(&id)));
            state.retained.insert(id, record.clone());
            self.expire(&mut state);
            record
        };
        metrics::gauge!("cancelkit_gateway_runs_in_flight").decrement(1.0);
        metrics::counter!("cancelkit_gateway_runs_finished_total", "outcome" => record.state.as_str())
            .increment(1);
        if let Some(cluster) = self.cluster() {
            cluster.record(&record);
        }
    }

    /// Forgets expired statuses and tombstones, and the oldest beyond the bounds.
    fn expire(&self, state: &mut State) {
        let now = Instant::now();
        while let Some((at, id)) = state.retained_order.front() {
            let over = state.retained.len() > self.settings.max_retained;
            if *at > now && !over {
                break;
            }
            if over && *at > now {
                tracing::warn!(run_id = %id, "status forgotten before its retention: max_retained finished runs are kept");
            }
            let id = Arc::clone(id);
            state.retained_order.pop_front();
            if let Some(record) = state.retained.remove(&id) {
                state.unindex(&record, &id);
            }
        }
        state.tombstones.retain(|(at, _)| *at > now);
        while state.tombstones.len() > self.settings.max_tombstones {
            if let Some((_, t)) = state.tombstones.pop_front() {
                tracing::warn!(selector = %t.selector, "pending cancel forgotten early: max_tombstones are kept");
            }
        }
    }

    /// Every run on this worker the selector names (live first, then retained).
    fn local_matches(&self, selector: &str) -> Vec<RunRecord> {
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
        let by_request = state
            .by_request
            .get(selector)
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
        found.retain(|r| caller.may_act_for(&r.owner));
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

    /// `POST /cancellation/cancel`.
    pub async fn cancel(
        &self,
        selector: &str,
        caller: &Caller,
        reason: Option<String>,
    ) -> Result<CancelOutcome, ApiError> {
        let (mut found, complete) = self.visible(selector, caller).await;
        match found.len() {
            0 => {
                // Nothing the caller may see. An admin's cancel waits for the run; so does a
                // user's own when the other workers cannot be asked (their run may be there).
                let scope = if caller.is_admin() {
                    None
                } else if !complete {
                    Some(caller.sub.to_string())
                } else {
                    return Err(ApiError::Forbidden);
                };
                self.leave_tombstone(selector, scope, reason);
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
                    RunState::Running => {
                        let Some(cluster) = self.cluster() else {
                            return Ok(CancelOutcome::Queued);
                        };
                        match cluster.cancel_remote(&record, reason).await {
                            RemoteCancel::Stopped => Ok(CancelOutcome::Cancelled),
                            RemoteCancel::Sent | RemoteCancel::Deferred => {
                                Ok(CancelOutcome::Queued)
                            }
                        }
                    }
                }
            }
            n => Err(ApiError::Ambiguous(n)),
        }
    }

    fn leave_tombstone(&self, selector: &str, scope: Option<String>, reason: Option<String>) {
        let tombstone = Tombstone {
            id: uuid::Uuid::new_v4().simple().to_string(),
            selector: selector.to_owned(),
            scope,
            reason,
            expires_at: unix_now() + self.settings.tombstone_ttl.as_secs_f64(),
        };
        tracing::info!(
            selector,
            "cancel for a run not registered yet: kept for {:?}",
            self.settings.tombstone_ttl
        );
        {
            let mut state = self.lock();
            state.tombstones.push_back((
                Instant::now() + self.settings.tombstone_ttl,
                tombstone.clone(),
            ));
            self.expire(&mut state);
        }
        if let Some(cluster) = self.cluster() {
            cluster.tombstone(&tombstone);
        }
    }
}

impl Runs {
    /// An owning handle to this registry from `&self` (the cluster holds only a weak one).
    fn self_arc(&self) -> Option<Arc<Runs>> {
        self.me.upgrade()
    }
}

#[cfg(test)]
mod tests;
