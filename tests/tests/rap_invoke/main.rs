//! The runtime-side invoke client (`cancelkit::rap::Invoker`) against the real `ToolServer`,
//! over loopback HTTP: results arrive through the callback route; dropping the future, or
//! cancelling its scope, sends `/cancel_tool_call` (the tool's scope is cancelled by it) and
//! leaves the tracker saying "interrupted"; a late result is refused, even with the call's own
//! callback URL (its secret is forgotten once the call stops waiting); the pending bound holds.
//! (Forged callbacks and the other protections are in `rap_security/`.)

#![cfg(unix)]

mod cancels;
mod harness;
mod refusals;
