//! `cargo xtask bench --readme`: the README's benchmark sections rendered from
//! `target/bench/*.json` (to be written).
