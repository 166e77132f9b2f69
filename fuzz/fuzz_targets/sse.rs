#![no_main]
//! Fuzz target `sse`: see `cancelkit_fuzz::sse::check`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::sse::check(data));
