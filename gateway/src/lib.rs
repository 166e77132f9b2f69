//! cancelkit-gateway: an MCP gateway whose tool calls can be cancelled from anywhere — by the
//! client, by an operator through the cancellation API, by a timeout — on one worker or many
//! sharing Redis.

pub mod auth;
pub mod cluster;
pub mod config;
pub mod runs;
pub mod upstream;
