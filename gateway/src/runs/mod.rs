//! Runs: every `tools/call` the gateway forwards, who may cancel it, and its status.
//!
//! [`Runs`] is this worker's registry. A run is keyed by [`RunKey`] (user, session or
//! connection, typed JSON-RPC id) so two clients' id `1` never meet, and named by a
//! gateway-wide unique run id. Cancels name a run by its run id or by a bare JSON-RPC id; a
//! bare id names the one run of it still live (clients reuse their ids per session, so
//! finished runs never make it ambiguous), and one that names several live runs the caller
//! may see is refused rather than guessed. A cancel that finds no live run is `queued`: it
//! leaves a [`Tombstone`] that cancels the first matching run to register within the race
//! window (`tombstone_ttl`), scoped to the caller's own runs for a user and to the named
//! user's for an admin who names one. Finished runs keep their status for the configured
//! retention. With Redis (`crate::cluster`), records, cancels and tombstones are shared by
//! every worker.
//!
//! Bounds, each with a per-user share so one user never pushes out another: at most
//! `max_runs` live runs (a new one beyond is refused, [`RegisterError::Full`]; the calls' own
//! bound is `crate::shares`, which holds with cancellation off); `max_retained` finished
//! statuses, `max_retained_per_user` of one user (`retained.rs`: a user over their share loses
//! their own oldest, at the bound the largest holder does); `max_tombstones` tombstones,
//! `max_tombstones_per_user` made by one caller (beyond either, the cancel is refused,
//! [`ApiError::TooManyWaiting`]: a cancel answered `queued` is never evicted for a newer one).
//!
//! A run id names its run only. Once the upstream's answer has won ([`Run::settle`]), a cancel
//! is too late and is not applied, so a status always says what the client got.

mod api;
mod local;
pub mod record;
mod retained;
mod run;
mod settings;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, LocalRuns};
pub use api::Status;
use record::{CancelSource, RunKey, RunRecord, RunState, Tombstone, new_run_id, unix_now};
use retained::{Evicted, Retained};
pub use run::Run;
pub use settings::{ApiError, CancelOutcome, RegisterError, Settings};

/// The counter of finished statuses forgotten before their retention (label `limit`:
/// `limits.max_retained_per_user` or `limits.max_retained`).
pub const METRIC_FORGOTTEN: &str = "cancelkit_gateway_statuses_forgotten_total";

#[derive(Debug)]
struct Live {
    key: RunKey,
    record: RunRecord,
    token: CancellationToken,
    cancelled: Option<(Instant, CancelSource)>,
    /// The upstream's answer won the race and is what the client gets: a cancel now comes
    /// too late and is not applied.
    settled: bool,
}

#[derive(Debug, Default)]
struct State {
    live: HashMap<Arc<str>, Live>,
    by_key: HashMap<RunKey, Arc<str>>,
    retained: Retained,
    /// Tombstones in the order they were made, with their local expiry.
    tombstones: VecDeque<(Instant, Tombstone)>,
    /// Who made each tombstone made on this worker (by its id), and how many each user has:
    /// a user's share of waiting cancels (`max_tombstones_per_user`).
    tombstone_maker: HashMap<String, Arc<str>>,
    tombstones_by: HashMap<Arc<str>, usize>,
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

    /// A tombstone left the list (applied, expired, evicted): its maker's count goes down.
    fn forget_tombstone(&mut self, tombstone: &Tombstone) {
        if let Some(maker) = self.tombstone_maker.remove(&tombstone.id)
            && let Some(count) = self.tombstones_by.get_mut(&maker)
        {
            *count -= 1;
            if *count == 0 {
                self.tombstones_by.remove(&maker);
            }
        }
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
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// Registers a run for `key`, under `run_id` if the front end has already told the client
    /// which (else a new one). A tombstone that names it cancels it at once (the returned
    /// run's token is already cancelled, source API, and its status says when the queued
    /// cancel was made).
    pub async fn register(
        self: &Arc<Self>,
        key: RunKey,
        name: Option<String>,
        run_id: Option<Arc<str>>,
    ) -> Result<Run, RegisterError> {
        let run_id = run_id
            .filter(|id| record::is_run_id(id))
            .unwrap_or_else(new_run_id);
        let token = CancellationToken::new();
        let (record, tombstone) = {
            let mut state = self.lock();
            if state.by_key.contains_key(&key) || state.live.contains_key(&run_id) {
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
                cancel_queued_at: None,
            };
            let tombstone = state
                .tombstones
                .iter()
                .position(|(_, t)| t.applies_to(&record))
                .and_then(|i| state.tombstones.remove(i))
                .map(|(_, t)| t);
            if let Some(tombstone) = &tombstone {
                state.forget_tombstone(tombstone);
            }
            state.by_key.insert(key.clone(), Arc::clone(&run_id));
            state.index(&record, &run_id);
            state.live.insert(
                Arc::clone(&run_id),
                Live {
                    key,
                    record: record.clone(),
                    token: token.clone(),
                    cancelled: None,
                    settled: false,
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
                Some(cluster) => cluster.claim_tombstone(&tombstone, &run_id).await,
                None => true,
            };
            if claimed {
                tracing::info!(run_id = %run_id, selector = %tombstone.selector, "a cancel that arrived before this run registered applies to it");
                self.apply_queued(&run_id, tombstone);
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
        self.cancel_live_as(run_id, source, reason, None)
    }

    /// Applies a queued cancel (a tombstone this worker or another made) to the live run it
    /// matched: an API cancel whose status says when it was queued.
    pub(crate) fn apply_queued(&self, run_id: &str, tombstone: Tombstone) -> bool {
        let queued_at = (tombstone.made_at > 0.0).then_some(tombstone.made_at);
        self.cancel_live_as(run_id, CancelSource::Api, tombstone.reason, queued_at)
    }

    fn cancel_live_as(
        &self,
        run_id: &str,
        source: CancelSource,
        reason: Option<String>,
        queued_at: Option<f64>,
    ) -> bool {
        let record = {
            let mut state = self.lock();
            let Some(live) = state.live.get_mut(run_id) else {
                return false;
            };
            if live.cancelled.is_some() {
                return true;
            }
            if live.settled {
                return false;
            }
            live.cancelled = Some((Instant::now(), source));
            live.record.cancelled_at = Some(unix_now());
            live.record.cancel_reason = reason;
            live.record.cancel_source = Some(source);
            live.record.cancel_queued_at = queued_at;
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

    /// The upstream's answer won: it is what the client gets, unless a cancel came first.
    /// Returns `false` when the run was already cancelled (the client then gets -32800, and
    /// the result is dropped), `true` when the answer stands and later cancels are too late.
    pub(crate) fn settle(&self, run_id: &str) -> bool {
        let mut state = self.lock();
        let Some(live) = state.live.get_mut(run_id) else {
            return true;
        };
        if live.cancelled.is_some() {
            return false;
        }
        live.settled = true;
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
            let evicted = state.retained.insert(
                id,
                record.clone(),
                Instant::now() + self.settings.retention,
                self.settings.max_retained_per_user,
                self.settings.max_retained,
            );
            Self::forget_evicted(&mut state, evicted);
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

    /// Unindexes statuses that went, with a warning for those that went early.
    fn forget_evicted(state: &mut State, evicted: Vec<(RunRecord, Evicted)>) {
        for (record, why) in evicted {
            match why {
                Evicted::Expired => {}
                // The designed behaviour at a bound, counted in METRIC_FORGOTTEN: logged at
                // debug, since a busy user past their share would log one line per call.
                Evicted::UserShare => tracing::debug!(
                    run_id = %record.run_id,
                    owner = ?record.owner,
                    "status forgotten before its retention: its user holds limits.max_retained_per_user"
                ),
                Evicted::Global => tracing::debug!(
                    run_id = %record.run_id,
                    owner = ?record.owner,
                    "status forgotten before its retention: limits.max_retained statuses are kept, and its user holds the most"
                ),
            }
            let limit = match why {
                Evicted::Expired => None,
                Evicted::UserShare => Some("limits.max_retained_per_user"),
                Evicted::Global => Some("limits.max_retained"),
            };
            if let Some(limit) = limit {
                metrics::counter!(METRIC_FORGOTTEN, "limit" => limit).increment(1);
            }
            let run_id = record.run_id.clone();
            state.unindex(&record, &run_id);
        }
    }

    /// Forgets expired statuses and tombstones. Beyond `max_tombstones`, tombstones from other
    /// workers go first (oldest first); those made here were admitted within the bound.
    fn expire(&self, state: &mut State) {
        let now = Instant::now();
        let expired = state.retained.expire(now);
        Self::forget_evicted(state, expired);
        if state.tombstones.iter().any(|(at, _)| *at <= now) {
            let (kept, gone): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut state.tombstones)
                .into_iter()
                .partition(|(at, _)| *at > now);
            state.tombstones = kept;
            for (_, t) in &gone {
                state.forget_tombstone(t);
            }
        }
        while state.tombstones.len() > self.settings.max_tombstones {
            let index = state
                .tombstones
                .iter()
                .position(|(_, t)| !state.tombstone_maker.contains_key(&t.id))
                .unwrap_or(0);
            if let Some((_, t)) = state.tombstones.remove(index) {
                tracing::warn!(selector = ?t.selector, "pending cancel forgotten early: max_tombstones are kept");
                state.forget_tombstone(&t);
            }
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
