//! `cancelkit trace -- CMD [ARGS...]`: a transparent stdio proxy that records the session.
//!
//! The proxy starts `CMD` with piped stdin and stdout and an inherited stderr, copies its own
//! stdin to the child's and the child's stdout to its own, chunk by chunk as read, flushing after
//! each chunk and changing no byte. Each chunk is forwarded first and only then offered to the
//! recorder, a thread of its own, through a bounded channel: when the channel is full the chunk
//! is not recorded (it was already forwarded), the drop is counted, and the trace ends with a
//! `{"t_us":…,"dropped":N}` record. The recorder splits each direction into newline-terminated
//! frames and writes one JSON line per frame (see the crate documentation for the format).
//!
//! Signals: SIGINT, SIGTERM and SIGHUP sent to the proxy are forwarded to the child. When the
//! proxy's stdin reaches EOF the child's stdin is closed; the child's stdout is forwarded until
//! it closes (a signal received after the child exited ends that wait). The proxy exits with the child's exit code, or 128 + the signal number when the
//! child was killed by a signal, or 2 when the child cannot be started.

mod proxy;
mod record;

pub use proxy::{CHANNEL_CAPACITY, EXIT_CANNOT_START, default_out, run};
pub use record::{Dir, MAX_LINE, Recorder};
