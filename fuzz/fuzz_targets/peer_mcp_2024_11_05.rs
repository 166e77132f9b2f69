#![no_main]
//! Fuzz target `peer_mcp_2024_11_05`: see `cancelkit_fuzz::peer::mcp_2024_11_05`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::peer::mcp_2024_11_05(data));
