//! The Lua scripts the cluster runs in Redis: each one step that plain commands cannot make
//! atomic, or would make in several round trips.
//!
//! [`PUT`] runs for every record and tombstone, so the link loads it once per connection
//! (`SCRIPT LOAD`, [`load`]) and calls it by hash ([`put`]); a server that lost it (restarted)
//! answers `NOSCRIPT`, which fails the batch and re-establishes the link, loading it again.
//! [`CLAIM`] is rare and sent whole (`EVAL`).

use redis::aio::ConnectionManager;
use redis::{Cmd, Pipeline, RedisResult};

/// Stores a value with its TTL and adds it to index sorted sets scored by when it expires; each
/// index then drops its expired entries and takes the TTL of its longest-lived entry, so an
/// index never outlives what it names.
///
/// KEYS[1]: the value's key; KEYS[2..]: the index sets. ARGV[1]: the value, ARGV[2]: its TTL in
/// ms, ARGV[3]: its member in the indexes, ARGV[4]: now in ms since the epoch (the worker's
/// clock, as every score; the indexes' TTLs are relative, so Redis's clock does not matter).
pub(super) const PUT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local now = tonumber(ARGV[4])
local expiry = now + tonumber(ARGV[2])
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], string.format('%d', expiry), ARGV[3])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[4])
  local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
  if last[2] then
    local left = math.ceil(tonumber(last[2]) - now)
    if left < 1 then left = 1 end
    redis.call('PEXPIRE', KEYS[i], string.format('%d', left))
  end
end
return #KEYS
";

/// Claims a tombstone, once gateway-wide: deletes it and records who claimed it. A claim
/// retried by the same claimant (its answer was lost) wins again; anyone else's loses.
///
/// KEYS[1]: the tombstone, KEYS[2]: its claim key, KEYS[3]: the tombstone index. ARGV[1]: the
/// claimant, ARGV[2]: the claim key's TTL in ms, ARGV[3]: the tombstone id, ARGV[4]: the
/// channel that says so, ARGV[5]: the message. Returns 1 if the claimant holds it.
pub(super) const CLAIM: &str = r"
local holder = redis.call('GET', KEYS[2])
if holder then
  if holder == ARGV[1] then return 1 end
  return 0
end
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return 1
end
return 0
";

/// Loads [`PUT`]; returns its hash.
pub(super) async fn load(conn: &mut ConnectionManager) -> RedisResult<String> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(PUT)
        .query_async(conn)
        .await
}

/// What [`PUT`] needs besides its keys.
pub(super) struct Put<'a> {
    /// The value's key.
    pub key: String,
    /// The index sets.
    pub indexes: &'a [String],
    /// The value.
    pub value: &'a str,
    /// Its TTL, ms.
    pub ttl_ms: u64,
    /// Its member in the indexes.
    pub member: &'a str,
    /// Now, ms since the epoch.
    pub now_ms: u64,
}

/// Adds a call of [`PUT`] (loaded, with hash `sha`) to `pipe`.
pub(super) fn put(pipe: &mut Pipeline, sha: &str, put: &Put<'_>) {
    let mut cmd = Cmd::new();
    cmd.arg("EVALSHA")
        .arg(sha)
        .arg(1 + put.indexes.len())
        .arg(&put.key)
        .arg(put.indexes)
        .arg(put.value)
        .arg(put.ttl_ms)
        .arg(put.member)
        .arg(put.now_ms);
    pipe.add_command(cmd);
}
