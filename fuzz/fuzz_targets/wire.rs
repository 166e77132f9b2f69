#![no_main]
//! Fuzz target `wire`: see `cancelkit_fuzz::wire::check`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::wire::check(data));
