//! The gateway process checking tokens from an identity provider: RS256 from a JWKS the test
//! serves over HTTP on loopback (rotation, revocation, an unreachable provider, and a flood of
//! unknown `kid`s that may cost only a bounded number of fetches), ES256 from a PEM file with
//! `nbf`, `aud` and `iss` enforced; the subject `admin` without a permission entry; the warning
//! for a wildcard admin grant; and where the admin token goes (`--token-file`, `--print-token`).
//! Key pairs are made in-process at test time (`rcgen`): nothing outside Rust is run.

#[path = "../support/mod.rs"]
mod support;

mod admin_token;
mod admins;
mod keys;
mod providers;
