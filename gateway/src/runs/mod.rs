//! Runs: every `tools/call` the gateway forwards, who may cancel it, and its status.

pub mod record;
