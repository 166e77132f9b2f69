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
    /// Most bytes of params the MCP requests in flight on `/mcp` hold together (-32050 beyond).
    pub max_in_flight_bytes: usize,
    /// Most bytes of params one user's MCP requests in flight on `/mcp` hold (-32050 beyond,
    /// naming it); one request alone is always admitted.
    pub max_in_flight_bytes_per_user: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let mut limits = Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_runs: 10_000,
            max_retained: 100_000,
            max_tombstones: 10_000,
            max_sessions: 10_000,
            max_runs_per_user: 0,
            max_sessions_per_user: 0,
            max_retained_per_user: 0,
            max_tombstones_per_user: 0,
            max_upstream_calls: 1_000,
            max_upstream_calls_per_user: 0,
            max_in_flight_bytes: 64 * 1024 * 1024,
            max_in_flight_bytes_per_user: 0,
        };
        for share in SHARES {
            *(share.share)(&mut limits) = default_share((share.bound)(&limits), share.divisor);
        }
        limits
    }
}

/// One per-user share and the global bound it divides.
struct Share {
    /// Its key.
    key: &'static str,
    /// Its bound's key.
    bound_key: &'static str,
    /// Its bound.
    bound: fn(&Limits) -> usize,
    /// The share.
    share: fn(&mut Limits) -> &mut usize,
    /// The default share is the bound divided by this (at least 1).
    divisor: usize,
}

/// Every share, and how its default follows its bound: a tenth of it (a hundredth for
/// sessions, which a client opens one of), so that with only the bounds configured no one user
/// can take everything (`max_runs = 8` leaves each user 1).
const SHARES: [Share; 6] = [
    Share {
        key: "limits.max_runs_per_user",
        bound_key: "limits.max_runs",
        bound: |l| l.max_runs,
        share: |l| &mut l.max_runs_per_user,
        divisor: 10,
    },
    Share {
        key: "limits.max_sessions_per_user",
        bound_key: "limits.max_sessions",
        bound: |l| l.max_sessions,
        share: |l| &mut l.max_sessions_per_user,
        divisor: 100,
    },
    Share {
        key: "limits.max_retained_per_user",
        bound_key: "limits.max_retained",
        bound: |l| l.max_retained.max(1),
        share: |l| &mut l.max_retained_per_user,
        divisor: 10,
    },
    Share {
        key: "limits.max_tombstones_per_user",
        bound_key: "limits.max_tombstones",
        bound: |l| l.max_tombstones.max(1),
        share: |l| &mut l.max_tombstones_per_user,
        divisor: 10,
    },
    Share {
        key: "limits.max_upstream_calls_per_user",
        bound_key: "limits.max_upstream_calls",
        bound: |l| l.max_upstream_calls,
        share: |l| &mut l.max_upstream_calls_per_user,
        divisor: 10,
    },
    Share {
        key: "limits.max_in_flight_bytes_per_user",
        bound_key: "limits.max_in_flight_bytes",
        bound: |l| l.max_in_flight_bytes,
        share: |l| &mut l.max_in_flight_bytes_per_user,
        divisor: 10,
    },
];

/// The default share of a bound: `bound / divisor`, at least 1.
fn default_share(bound: usize, divisor: usize) -> usize {
    (bound / divisor).max(1)
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
        max_in_flight_bytes: positive(
            "limits.max_in_flight_bytes",
            file.max_in_flight_bytes,
            defaults.max_in_flight_bytes,
        )
        .map_err(|e| key_error("limits.max_in_flight_bytes", e))?,
        max_in_flight_bytes_per_user: 0,
    };
    per_user_shares(limits, file, key_error)
}

/// The per-user shares: each given one at least 1 and at most its global bound (a share above
/// the bound is an error, so an operator never believes a user may hold more than the gateway
/// does), each one not given derived from its bound. A share equal to its bound lets one user
/// take everything: warned about at start (see [`Limits::warnings`]).
fn per_user_shares(
    mut limits: Limits,
    file: &LimitsFile,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Limits, ConfigError> {
    let given = [
        file.max_runs_per_user,
        file.max_sessions_per_user,
        file.max_retained_per_user,
        file.max_tombstones_per_user,
        file.max_upstream_calls_per_user,
        file.max_in_flight_bytes_per_user,
    ];
    for (share, value) in SHARES.iter().zip(given) {
        let bound = (share.bound)(&limits);
        *(share.share)(&mut limits) = match value {
            Some(0) => return Err(key_error(share.key, "must be at least 1".into())),
            Some(n) if n > bound => {
                return Err(key_error(
                    share.key,
                    format!(
                        "{n} is more than `{}` ({bound}): a share cannot exceed its bound",
                        share.bound_key
                    ),
                ));
            }
            Some(n) => n,
            None => default_share(bound, share.divisor),
        };
    }
    Ok(limits)
}

impl Limits {
    /// What the gateway warns about at start: each share that is not below its bound, so one
    /// user can hold all of it (a single-user gateway may mean that; anyone else should lower
    /// the share or raise the bound).
    pub fn warnings(&self) -> Vec<String> {
        let mut limits = self.clone();
        SHARES
            .iter()
            .filter_map(|share| {
                let bound = (share.bound)(self);
                let held = *(share.share)(&mut limits);
                (held >= bound).then(|| {
                    format!(
                        "`{}` ({held}) is not below `{}` ({bound}): one user can take all of it",
                        share.key, share.bound_key
                    )
                })
            })
            .collect()
    }
}
