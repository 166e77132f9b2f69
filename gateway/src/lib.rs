//! cancelkit-gateway: an MCP gateway whose tool calls can be cancelled from anywhere — by the
//! client, by an operator through the cancellation API, by a timeout — on one worker or many
//! sharing Redis.
//!
//! Data flow: a front end (`/mcp`, `/rpc`) turns each `tools/call` into a run ([`calls`]),
//! registered in this worker's [`runs::Runs`] (shared with the other workers through
//! [`cluster`] when Redis is configured) and forwarded to the [`upstream`] that owns the tool.
//! The cancellation API ([`front::api`]) cancels runs by run id or bare JSON-RPC id; a cancel
//! drops the upstream call, and dropping it is what tells the upstream.

#![forbid(unsafe_code)]

pub mod app;
pub mod auth;
pub mod calls;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod front;
pub mod listen;
pub mod runs;
pub mod shares;
pub mod upstream;

pub use app::App;
pub use config::Config;
