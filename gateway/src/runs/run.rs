//! [`Run`]: the handle the code executing a `tools/call` holds while it runs.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::Runs;
use super::record::{CancelSource, RunState};

/// A registered run. Its token is cancelled when anyone cancels the run; [`finish`](Self::finish)
/// ends it with its outcome (dropping it unfinished ends it as cancelled if it was, failed
/// otherwise), and its status is kept for the retention.
#[derive(Debug)]
pub struct Run {
    runs: Arc<Runs>,
    id: Arc<str>,
    token: CancellationToken,
    finished: bool,
}

impl Run {
    pub(super) fn new(runs: Arc<Runs>, id: Arc<str>, token: CancellationToken) -> Run {
        Run {
            runs,
            id,
            token,
            finished: false,
        }
    }

    /// The gateway-wide unique run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Cancelled when the run is.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Cancels the run from the code executing it (timeout, the caller went away).
    pub fn cancel(&self, source: CancelSource, reason: Option<String>) {
        self.runs.cancel_live(&self.id, source, reason);
    }

    /// The upstream's answer won: it is what the client gets. Returns `false` when a cancel
    /// came first (then the client gets -32800); after `true`, cancels are too late.
    pub fn settle(&self) -> bool {
        self.runs.settle(&self.id)
    }

    /// When, by whom and why the run was cancelled, if it was.
    pub fn cancellation(&self) -> Option<(Instant, CancelSource, Option<String>)> {
        self.runs.cancellation(&self.id)
    }

    /// Ends the run. A run that was cancelled ends as cancelled whatever `outcome` says.
    pub fn finish(mut self, outcome: RunState) {
        self.finished = true;
        self.runs.finish(&self.id, outcome);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.finished {
            self.runs.finish(&self.id, RunState::Failed);
        }
    }
}
