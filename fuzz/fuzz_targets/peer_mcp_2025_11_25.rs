#![no_main]
//! Fuzz target `peer_mcp_2025_11_25`: see `cancelkit_fuzz::peer::mcp_2025_11_25`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::peer::mcp_2025_11_25(data));
