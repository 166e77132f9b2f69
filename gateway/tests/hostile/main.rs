//! Hostile input on every endpoint: bodies that do not parse or have the wrong types, bodies
//! over the limit, tokens that do not check out, odd ids in the status path, batches and
//! unknown methods on `/rpc`, `/mcp` without a session or with the wrong protocol version.
//! Every response is checked: never a 5xx, never a word about another user's run; afterwards
//! the gateway still serves and its process is alive. And the binary's start-up refusals: a bad
//! config file, Redis without a shared secret; without any secret it prints an admin token.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod mcp;
mod rpc;
mod startup;
mod target;
mod tokens;
