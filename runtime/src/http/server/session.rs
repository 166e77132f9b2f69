//! 2025-11-25 sessions: one [`Conn`] each, named by an unguessable `Mcp-Session-Id`, bounded
//! in number, and ended by `DELETE` or by staying idle too long.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;

use super::conn::Conn;

/// One session.
pub(super) struct Session {
    pub(super) id: Arc<str>,
    pub(super) conn: Arc<Conn>,
    /// Who opened it ([`McpHttpServer::session_owner`](super::McpHttpServer::session_owner));
    /// nobody else finds it.
    owner: Option<String>,
    /// The revision `initialize` agreed on; set once it is answered.
    pub(super) version: OnceLock<String>,
    last_used: Mutex<Instant>,
}

impl Session {
    /// Whether its events start with a priming event (2025-11-25 on).
    pub(super) fn primes(&self) -> bool {
        self.version
            .get()
            .and_then(|v| v.parse::<McpRevision>().ok())
            .is_some_and(McpRevision::has_priming_event)
    }

    /// Who opened it, if sessions have owners.
    pub(super) fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
    }

    /// Idle: nothing in flight, no stream attached, and no request for `limit`.
    fn expired(&self, limit: Duration) -> bool {
        self.conn.is_closed()
            || (self.conn.requests() == 0
                && !self.conn.standalone.as_ref().is_some_and(|s| s.attached())
                && self.idle_for() >= limit)
    }
}

/// Every session of a server.
pub(super) struct Sessions {
    map: Mutex<Map>,
    max: usize,
    max_per_owner: usize,
    idle: Duration,
    sweeper: OnceLock<()>,
}

/// The sessions by id, and how many each owner holds (an owner without a session has no
/// entry, so the counts are bounded by the sessions).
#[derive(Default)]
struct Map {
    sessions: HashMap<Arc<str>, Arc<Session>>,
    per_owner: HashMap<String, usize>,
}

impl Map {
    fn len(&self) -> usize {
        self.sessions.len()
    }

    fn held_by(&self, owner: Option<&str>) -> usize {
        owner.map_or(0, |o| self.per_owner.get(o).copied().unwrap_or(0))
    }

    fn insert(&mut self, session: Arc<Session>) {
        if let Some(owner) = &session.owner {
            *self.per_owner.entry(owner.clone()).or_insert(0) += 1;
        }
        self.sessions.insert(Arc::clone(&session.id), session);
    }

    fn remove(&mut self, id: &str) -> Option<Arc<Session>> {
        let session = self.sessions.remove(id)?;
        self.uncount(&session);
        Some(session)
    }

    fn uncount(&mut self, session: &Session) {
        if let Some(owner) = &session.owner
            && let Some(held) = self.per_owner.get_mut(owner)
        {
            *held -= 1;
            if *held == 0 {
                self.per_owner.remove(owner);
            }
        }
    }
}

/// The server, or the session's owner, holds as many sessions as it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TooMany {
    /// Every session the server may hold is open.
    Server(usize),
    /// The owner holds their share.
    Owner(usize),
}

impl Sessions {
    pub(super) fn new(max: usize, max_per_owner: usize, idle: Duration) -> Arc<Sessions> {
        Arc::new(Sessions {
            map: Mutex::new(Map::default()),
            max,
            max_per_owner,
            idle,
            sweeper: OnceLock::new(),
        })
    }

    fn map(&self) -> std::sync::MutexGuard<'_, Map> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new session of `owner` around `conn`; sessions that expired make room first.
    pub(super) fn create(
        self: &Arc<Self>,
        conn: Arc<Conn>,
        owner: Option<String>,
    ) -> Result<Arc<Session>, TooMany> {
        self.start_sweeper();
        let mut map = self.map();
        if map.len() >= self.max || map.held_by(owner.as_deref()) >= self.max_per_owner {
            Self::sweep_locked(&mut map, self.idle);
        }
        if map.held_by(owner.as_deref()) >= self.max_per_owner {
            return Err(TooMany::Owner(self.max_per_owner));
        }
        if map.len() >= self.max {
            return Err(TooMany::Server(self.max));
        }
        let session = Arc::new(Session {
            id: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
            conn,
            owner,
            version: OnceLock::new(),
            last_used: Mutex::new(Instant::now()),
        });
        map.insert(Arc::clone(&session));
        Ok(session)
    }

    /// The session named `id`, if `owner` opened it; marked used.
    pub(super) fn get(&self, id: &str, owner: Option<&str>) -> Option<Arc<Session>> {
        let session = self.map().sessions.get(id).cloned()?;
        if session.owner.as_deref() != owner {
            return None;
        }
        if session.conn.is_closed() {
            self.map().remove(id);
            return None;
        }
        session.touch();
        Some(session)
    }

    /// Ends the session named `id` if `owner` opened it: its peer closes, cancelling what it
    /// runs.
    pub(super) fn remove(&self, id: &str, owner: Option<&str>) -> bool {
        let session = {
            let mut map = self.map();
            if map
                .sessions
                .get(id)
                .is_none_or(|s| s.owner.as_deref() != owner)
            {
                return false;
            }
            map.remove(id)
        };
        let Some(session) = session else {
            return false;
        };
        session.conn.peer.close();
        true
    }

    fn sweep_locked(map: &mut Map, idle: Duration) {
        let mut gone = Vec::new();
        map.sessions.retain(|_, session| {
            let expired = session.expired(idle);
            if expired {
                tracing::info!(session = %session.id, "session expired");
                session.conn.peer.close();
                gone.push(Arc::clone(session));
            }
            !expired
        });
        for session in gone {
            map.uncount(&session);
        }
    }

    /// Ends idle sessions every quarter of the idle limit, for as long as the server lives.
    fn start_sweeper(self: &Arc<Self>) {
        self.sweeper.get_or_init(|| {
            let sessions: Weak<Sessions> = Arc::downgrade(self);
            let every = (self.idle / 4).max(Duration::from_millis(100));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(sessions) = sessions.upgrade() else {
                        return;
                    };
                    let idle = sessions.idle;
                    Self::sweep_locked(&mut sessions.map(), idle);
                }
            });
        });
    }
}
