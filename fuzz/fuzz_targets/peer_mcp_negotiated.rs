#![no_main]
//! Fuzz target `peer_mcp_negotiated`: see `cancelkit_fuzz::peer::mcp_negotiated`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::peer::mcp_negotiated(data));
