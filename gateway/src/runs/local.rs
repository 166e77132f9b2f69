//! The registry as the cluster sees it ([`LocalRuns`]): cancels that came from other workers,
//! and what a resync after Redis came back writes again.

use crate::cluster::LocalRuns;

use super::*;

impl LocalRuns for Runs {
    fn apply_cancel(&self, run_id: &str, reason: Option<String>) -> bool {
        if self.cancel_live(run_id, CancelSource::Api, reason) {
            return true;
        }
        let state = self.lock();
        state
            .retained
            .get(run_id)
            .is_some_and(|r| r.state == RunState::Cancelled)
    }

    fn add_tombstone(&self, tombstone: Tombstone) {
        let left = tombstone.expires_at - unix_now();
        if left <= 0.0 {
            return;
        }
        let target = {
            let mut state = self.lock();
            let expiry = Instant::now() + Duration::from_secs_f64(left);
            if let Some((at, _)) = state
                .tombstones
                .iter_mut()
                .find(|(_, t)| t.id == tombstone.id)
            {
                // Written late (it waited for Redis): it lives longer than our copy did.
                *at = (*at).max(expiry);
                return;
            }
            let mut matching: Vec<&RunRecord> = state
                .live
                .values()
                .map(|l| &l.record)
                .filter(|r| tombstone.applies_to(r))
                .collect();
            matching.sort_by(|a, b| a.registered_at.total_cmp(&b.registered_at));
            match matching.first() {
                Some(record) => Some(record.run_id.clone()),
                None => {
                    state.tombstones.push_back((expiry, tombstone.clone()));
                    self.expire(&mut state);
                    None
                }
            }
        };
        if let Some(run_id) = target {
            // A run that registered while the cancel could not reach us: claim it first, so
            // only one worker applies it (a claim that must wait for Redis cancels the run
            // through `apply_cancel` once won).
            let Some(cluster) = self.cluster().cloned() else {
                self.apply_queued(&run_id, tombstone);
                return;
            };
            let Some(runs) = self.self_arc() else { return };
            tokio::spawn(async move {
                if cluster.claim_tombstone(&tombstone, &run_id).await {
                    runs.apply_queued(&run_id, tombstone);
                }
            });
        }
    }

    fn forget_tombstone(&self, id: &str) {
        let mut state = self.lock();
        if let Some(index) = state.tombstones.iter().position(|(_, t)| t.id == id)
            && let Some((_, tombstone)) = state.tombstones.remove(index)
        {
            state.forget_tombstone(&tombstone);
        }
    }

    fn records(&self) -> Vec<RunRecord> {
        let mut state = self.lock();
        self.expire(&mut state);
        let live = state.live.values().map(|l| l.record.clone());
        live.chain(state.retained.values().cloned()).collect()
    }

    fn tombstones(&self) -> Vec<Tombstone> {
        let mut state = self.lock();
        self.expire(&mut state);
        state.tombstones.iter().map(|(_, t)| t.clone()).collect()
    }
}
