#![no_main]
//! Fuzz target `peer_acp`: see `cancelkit_fuzz::peer::acp`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::peer::acp(data));
