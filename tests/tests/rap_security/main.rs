//! RAP protections over loopback HTTP, each against an attempt to get round it: callbacks bound
//! to their invocation by a per-call secret (forged, misdirected and replayed results are
//! refused and change nothing, the genuine one completes its call), the tool server's bound on
//! running calls (global and per client), the bounds on client-chosen text, and client text in
//! the log only escaped. (The `rap` module is Unix only.)

#![cfg(unix)]

mod bounds;
mod callbacks;
mod harness;
mod log;
