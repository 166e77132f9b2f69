//! `[limits]`: the bounds on what the gateway keeps, each with a per-user share.

use super::file::LimitsFile;
use super::{ConfigError, positive};

/// `[limits]`: every map the gateway keeps has a bound.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Most runs in flight on this worker; a `tools/call` beyond is answered -32050.
    pub max_runs: usize,
    /// Most finished runs whose status is kept; at the bound the largest holder's oldest go.
    pub max_retained: usize,
    /// Most cancels waiting for their run; a new one beyond is refused (503).
    pub max_tombstones: usize,
    /// Most MCP sessions open at once on this worker; a new `initialize` beyond gets 503.
    pub max_sessions: usize,
    /// Most tool calls one user has in flight on this worker (-32050 beyond, naming it).
    pub max_runs_per_user: usize,
    /// Most MCP sessions one user has open on this worker (503 beyond).
    pub max_sessions_per_user: usize,
    /// Most finished statuses kept for one user (their own oldest is forgotten first).
    pub max_retained_per_user: usize,
    /// Most cancels of one user waiting for their run (429 beyond).
    pub max_tombstones_per_user: usize,
    /// Most calls in flight to one upstream from this worker (-32050 beyond).
    pub max_upstream_calls: usize,
    /// Most calls one user has in flight to one upstream (-32050 beyond).
    pub max_upstream_calls_per_user: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_runs: 10_000,
            max_retained: 100_000,
            max_tombstones: 10_000,
            max_sessions: 10_000,
            max_runs_per_user: 1_000,
            max_sessions_per_user: 100,
            max_retained_per_user: 10_000,
            max_tombstones_per_user: 1_000,
            max_upstream_calls: 1_000,
            max_upstream_calls_per_user: 100,
        }
    }
}

/// Resolves `[limits]`: every bound at least 1 where 0 makes no sense, every share within its
/// bound.
pub(super) fn resolve(
    file: &LimitsFile,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let limits = Limits {
        max_body_bytes: positive(
            "limits.max_body_bytes",
            file.max_body_bytes,
            defaults.max_body_bytes,
        )
        .map_err(|e| key_error("limits.max_body_bytes", e))?,
        max_runs: positive("limits.max_runs", file.max_runs, defaults.max_runs)
            .map_err(|e| key_error("limits.max_runs", e))?,
        max_retained: file.max_retained.unwrap_or(defaults.max_retained),
        max_tombstones: file.max_tombstones.unwrap_or(defaults.max_tombstones),
        max_sessions: positive(
            "limits.max_sessions",
            file.max_sessions,
            defaults.max_sessions,
        )
        .map_err(|e| key_error("limits.max_sessions", e))?,
        max_runs_per_user: 0,
        max_sessions_per_user: 0,
        max_retained_per_user: 0,
        max_tombstones_per_user: 0,
        max_upstream_calls: positive(
            "limits.max_upstream_calls",
            file.max_upstream_calls,
            defaults.max_upstream_calls,
        )
        .map_err(|e| key_error("limits.max_upstream_calls", e))?,
        max_upstream_calls_per_user: 0,
    };
    per_user_shares(limits, file, &defaults, key_error)
}

/// The per-user shares: each at least 1 and at most its global bound (a share above the bound
/// is an error, so an operator never believes a user may hold more than the gateway does).
fn per_user_shares(
    mut limits: Limits,
    file: &LimitsFile,
    defaults: &Limits,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Limits, ConfigError> {
    let shares: [(&str, Option<usize>, usize, usize, &str); 5] = [
        (
            "limits.max_runs_per_user",
            file.max_runs_per_user,
            defaults.max_runs_per_user,
            limits.max_runs,
            "limits.max_runs",
        ),
        (
            "limits.max_sessions_per_user",
            file.max_sessions_per_user,
            defaults.max_sessions_per_user,
            limits.max_sessions,
            "limits.max_sessions",
        ),
        (
            "limits.max_retained_per_user",
            file.max_retained_per_user,
            defaults.max_retained_per_user,
            limits.max_retained.max(1),
            "limits.max_retained",
        ),
        (
            "limits.max_tombstones_per_user",
            file.max_tombstones_per_user,
            defaults.max_tombstones_per_user,
            limits.max_tombstones.max(1),
            "limits.max_tombstones",
        ),
        (
            "limits.max_upstream_calls_per_user",
            file.max_upstream_calls_per_user,
            defaults.max_upstream_calls_per_user,
            limits.max_upstream_calls,
            "limits.max_upstream_calls",
        ),
    ];
    let mut resolved = [0usize; 5];
    for (i, (key, value, default, bound, bound_key)) in shares.into_iter().enumerate() {
        resolved[i] = match value {
            Some(0) => return Err(key_error(key, "must be at least 1".into())),
            Some(n) if n > bound => {
                return Err(key_error(
                    key,
                    format!(
                        "{n} is more than `{bound_key}` ({bound}): a share cannot exceed its bound"
                    ),
                ));
            }
            Some(n) => n,
            // A default share never exceeds a smaller configured bound.
            None => default.min(bound),
        };
    }
    [
        limits.max_runs_per_user,
        limits.max_sessions_per_user,
        limits.max_retained_per_user,
        limits.max_tombstones_per_user,
        limits.max_upstream_calls_per_user,
    ] = resolved;
    Ok(limits)
}
